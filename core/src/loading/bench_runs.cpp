#include "loading/bench_runs.hpp"

#include <cstring>

namespace moe::detail {

std::vector<unsigned char> pack_bench_runs(const std::vector<moe_run_args>& runs, uint32_t minor) {
  const size_t stride = minor >= 6   ? sizeof(moe_run_args)
                        : minor >= 4 ? kRunArgsSizeBefore16
                                     : kRunArgsSizeBefore14;
  std::vector<unsigned char> packed(stride * runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    moe_run_args run = runs[i];
    run.struct_size = stride;
    std::memcpy(packed.data() + i * stride, &run, stride);
  }
  return packed;
}

}  // namespace moe::detail
