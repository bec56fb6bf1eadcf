// While `moe bench` times a point, the GPU's SM clock, board power and temperature, sampled
// through NVML (libnvidia-ml.so.1, loaded at run time) every few milliseconds, so that a record
// says under which clock and power it was timed. Sustained GEMMs on an H200 run at its 700 W cap
// with the SM clock well under its maximum, and a kernel that spends more energy a byte gets the
// lower clock (bench/NOTES.md, session 27). Nothing is sampled where the NVIDIA driver or NVML is
// missing: a host plugin, a machine without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace moe::tool {

// What the samples of one timed stretch say.
struct GpuSamples {
  int count = 0;
  double sm_mhz_mean = 0, power_w_mean = 0, power_limit_w = 0;
  unsigned sm_mhz_min = 0, sm_mhz_max = 0, temp_c_max = 0;
};

class GpuMonitor {
 public:
  // The GPU of the calling thread's current CUDA context (the plugin's, after prepare), else
  // device 0; null where the driver or NVML cannot be loaded or does not know the device.
  static std::unique_ptr<GpuMonitor> open();
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Samples every `period` on a thread of its own until stop(), which returns their summary
  // (at least one sample, taken at the stop if the stretch was shorter than a period).
  void start(std::chrono::milliseconds period = std::chrono::milliseconds(5));
  GpuSamples stop();

  struct Api;  // NVML's functions and the device handle (gpu_monitor.cpp)

 private:
  explicit GpuMonitor(std::unique_ptr<Api> api);
  void sample();

  std::unique_ptr<Api> api_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::mutex mutex_;
  std::vector<unsigned> sm_mhz_, power_mw_, temp_c_;
};

}  // namespace moe::tool
