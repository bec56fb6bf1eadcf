#include "device.hpp"

namespace moe::trtllm {

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    const gpu::DeviceInfo& g = gpu::device_info();
    DeviceInfo d;
    d.major = g.major;
    d.minor = g.minor;
    d.sm_count = g.sm_count;
    d.why_not = gpu::sm90a_refusal();
    d.usable = d.why_not.empty();
    return d;
  }();
  return info;
}

}  // namespace moe::trtllm
