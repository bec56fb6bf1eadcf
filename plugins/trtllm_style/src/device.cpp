#include "device.hpp"

#include <fmt/format.h>

namespace moe::trtllm {

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    const gpu::DeviceInfo& g = gpu::device_info();
    DeviceInfo d;
    if (!g.present) {
      d.why_not = g.why_not;
      return d;
    }
    d.major = g.major;
    d.minor = g.minor;
    d.sm_count = g.sm_count;
    // The kernels are built for sm_90a (wgmma, TMA): they run on Hopper and nowhere else.
    d.usable = g.major == 9 && g.minor == 0;
    if (!d.usable)
      d.why_not = fmt::format("needs an sm_90 (Hopper) GPU; device {} ({}) is sm_{}{}", g.device,
                              g.name, g.major, g.minor);
    return d;
  }();
  return info;
}

}  // namespace moe::trtllm
