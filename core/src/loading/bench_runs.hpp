// The run sets of moe_bench_args as a plugin of a given ABI minor reads them (docs/design.md
// §2.7): 1.1-1.5 plugins step through the array by their own sizeof(moe_run_args): 496 bytes
// in 1.1-1.3, 504 in 1.4-1.5 (accumulate and its padding); 1.6 and later ones by
// runs[0].struct_size.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::detail {

// The size of moe_run_args in ABI 1.1-1.3 (it ended at `stream`) and in 1.4-1.5 (accumulate, an
// int32, padded to 8).
inline constexpr size_t kRunArgsSizeBefore14 = offsetof(moe_run_args, accumulate);
inline constexpr size_t kRunArgsSizeBefore16 = offsetof(moe_run_args, router_logits);

// `runs` laid out for a plugin of ABI minor `minor`: each struct_size set to the stride, the
// fields past it left out (the caller refuses what an older plugin cannot read first).
std::vector<unsigned char> pack_bench_runs(const std::vector<moe_run_args>& runs, uint32_t minor);

}  // namespace moe::detail
