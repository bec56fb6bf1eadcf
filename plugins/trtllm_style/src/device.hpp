// The CUDA device as this plugin sees it: the shared device query (moe_cuda/device.hpp) with
// trtllm_style's rule on top: its kernels are built for sm_90a only.
#pragma once

#include <string>

#include "moe_cuda/device.hpp"

namespace moe::trtllm {

using gpu::check_cuda;
using gpu::DeviceBuffer;
using gpu::upload_vector;

struct DeviceInfo {
  bool usable = false;
  std::string why_not;  // when !usable: no device, or not sm_90
  int sm_count = 0;
  int major = 0, minor = 0;
};

// Queried once per process (cached).
const DeviceInfo& device_info();

}  // namespace moe::trtllm
