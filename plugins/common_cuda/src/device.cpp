// Device properties the launchers size their grids with. Host queries only: safe during capture.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "launch.hpp"
#include "moe_cuda/check.hpp"
#include "moe_cuda/dependent_launch.hpp"

namespace moe::gpu::detail {

int multiprocessor_count() {
  static std::array<std::atomic<int>, 64> cache{};  // 0 = not read yet
  int device = 0;
  MOE_CUDA_CHECK(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < int(cache.size());
  if (cached) {
    const int known = cache[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int count = 0;
  MOE_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  if (cached) cache[device].store(count, std::memory_order_relaxed);
  return count;
}

int grid_size(int64_t work, int per_sm) {
  const int64_t cap = int64_t(multiprocessor_count()) * per_sm;
  return int(std::max<int64_t>(1, std::min(work, cap)));
}

}  // namespace moe::gpu::detail

namespace moe::gpu {
namespace {
std::atomic<int> dependent_launch{-1};  // -1: not decided yet
}  // namespace

bool dependent_launch_allowed(const char* moe_pdl) {
  const std::string_view value = moe_pdl != nullptr ? moe_pdl : "";
  return !(value == "0" || value == "off" || value == "false");
}

// On where MOE_PDL allows it, on a device of compute capability 9.0 or above (the first launch's
// device decides; PDL is an sm90 feature).
bool dependent_launch_enabled() {
  int on = dependent_launch.load(std::memory_order_relaxed);
  if (on < 0) {
    const bool refused = !dependent_launch_allowed(std::getenv("MOE_PDL"));
    int device = 0, major = 0;
    const bool sm90 =
        cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        major >= 9;
    int expected = -1;
    dependent_launch.compare_exchange_strong(expected, !refused && sm90 ? 1 : 0);
    on = dependent_launch.load(std::memory_order_relaxed);
  }
  return on == 1;
}

void set_dependent_launch(bool on) {
  dependent_launch.store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace moe::gpu
