#include "gpu_monitor.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "bench_method.hpp"

namespace moe::tool {

// The driver's and NVML's C signatures (CUresult, CUdevice, nvmlReturn_t and NVML's enums are
// ints, nvmlDevice_t a pointer): no CUDA or NVML header needed. Both libraries stay loaded: the
// plugin on the device holds the driver anyway, and NVML is small.
struct GpuMonitor::Api {
  int (*clock_info)(void* device, int type, unsigned* mhz) = nullptr;
  int (*power_usage)(void* device, unsigned* milliwatts) = nullptr;
  int (*temperature)(void* device, int sensor, unsigned* celsius) = nullptr;
  int (*power_limit)(void* device, unsigned* milliwatts) = nullptr;
  void* device = nullptr;
};

namespace {

constexpr int kClockSm = 1;          // NVML_CLOCK_SM
constexpr int kTemperatureGpu = 0;   // NVML_TEMPERATURE_GPU
constexpr int kPciBusIdLength = 32;  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE

template <class F>
bool bind(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  return out != nullptr;
}

// The PCI bus id of the calling thread's current CUDA device (else device 0): NVML numbers
// devices its own way, so the bus id is what names the same GPU to both.
bool current_pci_bus_id(char (&bus_id)[kPciBusIdLength]) {
  const std::optional<DriverDevice> d = current_driver_device();
  int (*pci_bus_id)(char*, int, int) = nullptr;
  return d && bind(d->library, "cuDeviceGetPCIBusId", pci_bus_id) &&
         pci_bus_id(bus_id, kPciBusIdLength, d->device) == 0;
}

}  // namespace

std::unique_ptr<GpuMonitor> GpuMonitor::open() {
  char bus_id[kPciBusIdLength] = {};
  if (!current_pci_bus_id(bus_id)) return nullptr;
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return nullptr;
  int (*init)() = nullptr;
  int (*by_bus_id)(const char*, void**) = nullptr;
  auto api = std::make_unique<Api>();
  if (!bind(nvml, "nvmlInit_v2", init) ||
      !bind(nvml, "nvmlDeviceGetHandleByPciBusId_v2", by_bus_id) ||
      !bind(nvml, "nvmlDeviceGetClockInfo", api->clock_info) ||
      !bind(nvml, "nvmlDeviceGetPowerUsage", api->power_usage) ||
      !bind(nvml, "nvmlDeviceGetTemperature", api->temperature) ||
      !bind(nvml, "nvmlDeviceGetEnforcedPowerLimit", api->power_limit) || init() != 0 ||
      by_bus_id(bus_id, &api->device) != 0)
    return nullptr;
  unsigned mhz = 0;
  if (api->clock_info(api->device, kClockSm, &mhz) != 0) return nullptr;
  return std::unique_ptr<GpuMonitor>(new GpuMonitor(std::move(api)));
}

GpuMonitor::GpuMonitor(std::unique_ptr<Api> api) : api_(std::move(api)) {}

GpuMonitor::~GpuMonitor() {
  if (thread_.joinable()) stop();
}

void GpuMonitor::sample() {
  unsigned mhz = 0, mw = 0, celsius = 0;
  const bool clock = api_->clock_info(api_->device, kClockSm, &mhz) == 0;
  const bool power = api_->power_usage(api_->device, &mw) == 0;
  const bool temp = api_->temperature(api_->device, kTemperatureGpu, &celsius) == 0;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (clock) sm_mhz_.push_back(mhz);
  if (power) power_mw_.push_back(mw);
  if (temp) temp_c_.push_back(celsius);
}

void GpuMonitor::start(std::chrono::milliseconds period) {
  if (thread_.joinable()) stop();
  sm_mhz_.clear();
  power_mw_.clear();
  temp_c_.clear();
  running_ = true;
  thread_ = std::thread([this, period] {
    while (running_) {
      sample();
      std::this_thread::sleep_for(period);
    }
  });
}

GpuSamples GpuMonitor::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  if (sm_mhz_.empty()) sample();
  GpuSamples s;
  s.count = int(sm_mhz_.size());
  if (!sm_mhz_.empty()) {
    s.sm_mhz_mean = std::accumulate(sm_mhz_.begin(), sm_mhz_.end(), 0.0) / double(sm_mhz_.size());
    s.sm_mhz_min = *std::min_element(sm_mhz_.begin(), sm_mhz_.end());
    s.sm_mhz_max = *std::max_element(sm_mhz_.begin(), sm_mhz_.end());
  }
  if (!power_mw_.empty())
    s.power_w_mean =
        std::accumulate(power_mw_.begin(), power_mw_.end(), 0.0) / double(power_mw_.size()) / 1e3;
  if (!temp_c_.empty()) s.temp_c_max = *std::max_element(temp_c_.begin(), temp_c_.end());
  unsigned limit_mw = 0;
  if (api_->power_limit(api_->device, &limit_mw) == 0) s.power_limit_w = limit_mw / 1e3;
  return s;
}

}  // namespace moe::tool
