#include "bench_method.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace moe::tool {

const char* timing_column(Timing t) {
  return t == Timing::kGraph ? "graph" : t == Timing::kStream ? "stream" : "host";
}

const char* timing_record(Timing t) {
  return t == Timing::kGraph ? "cuda_graph" : t == Timing::kStream ? "device_events" : "host_clock";
}

std::optional<DriverDevice> current_driver_device() {
  // The driver API's C signatures (CUresult and CUdevice are ints): no CUDA header needed.
  using Init = int (*)(unsigned);
  using CtxGetDevice = int (*)(int*);
  using DeviceGet = int (*)(int*, int);
  // Never closed: the plugin running on the device holds the same library anyway.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  const auto init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
  const auto ctx_device = reinterpret_cast<CtxGetDevice>(dlsym(lib, "cuCtxGetDevice"));
  const auto device_get = reinterpret_cast<DeviceGet>(dlsym(lib, "cuDeviceGet"));
  if (!init || !ctx_device || !device_get || init(0) != 0) return std::nullopt;
  int device = 0;
  if (ctx_device(&device) != 0 && device_get(&device, 0) != 0) return std::nullopt;
  return DriverDevice{lib, device};
}

std::optional<std::string> device_of(const Plugin& plugin) {
  if (!plugin.device_memory()) return std::nullopt;
  const std::optional<DriverDevice> d = current_driver_device();
  if (!d) return std::nullopt;
  using DeviceGetName = int (*)(char*, int, int);
  const auto get_name = reinterpret_cast<DeviceGetName>(dlsym(d->library, "cuDeviceGetName"));
  char name[256] = {};
  if (get_name == nullptr || get_name(name, int(sizeof(name)), d->device) != 0) return std::nullopt;
  return std::string(name);
}

Ceilings ceilings_for(const Plugin& plugin, const std::optional<std::string>& gpu) {
  if (!plugin.device_memory())
    return {"nominal H200", fmt::format("nominal: {} runs on the host", plugin.name())};
  if (!gpu) return {"nominal H200", "nominal: the NVIDIA driver did not name the device"};
  if (gpu->find("H200") == std::string::npos)
    return {"nominal H200", fmt::format("nominal: {} runs on {}", plugin.name(), *gpu)};
  return {*gpu, fmt::format("measured on this device ({})", *gpu)};
}

}  // namespace moe::tool
