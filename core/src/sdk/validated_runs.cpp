#include "moe/sdk/validated_runs.hpp"

#include <cstring>

namespace moe::sdk {
namespace {

// moe_tensor has no padding (a pointer, two int32, int64 arrays), so bytes compare exactly.
bool same_tensor(const moe_tensor& a, const moe_tensor& b) {
  static_assert(sizeof(moe_tensor) ==
                sizeof(void*) + 2 * sizeof(int32_t) + 2 * MOE_TENSOR_MAX_DIMS * sizeof(int64_t));
  return std::memcmp(&a, &b, sizeof(moe_tensor)) == 0;
}

bool same_run(const moe_run_args& a, const moe_run_args& b) {
  return a.ext == b.ext && a.layer == b.layer && same_tensor(a.hidden, b.hidden) &&
         same_tensor(a.topk_ids, b.topk_ids) && same_tensor(a.topk_weights, b.topk_weights) &&
         same_tensor(a.output, b.output) && a.workspace == b.workspace &&
         a.workspace_size == b.workspace_size;
}

}  // namespace

bool ValidatedRuns::known(const moe_run_args& a) const {
  std::lock_guard lock(mutex_);
  return has_ && same_run(last_, a);
}

void ValidatedRuns::remember(const moe_run_args& a) {
  std::lock_guard lock(mutex_);
  last_ = a;
  has_ = true;
}

}  // namespace moe::sdk
