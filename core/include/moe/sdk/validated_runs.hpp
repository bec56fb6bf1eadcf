// Remembers the last run arguments a layer validated, so that calls with the very same tensors
// (shapes, dtypes, strides, data pointers, workspace and extensions; an engine's decode loop with
// fixed buffers, or any CUDA graph replay's capture) skip re-checking them: the host cost per call
// is what a decode step pays on the CPU. Thread-safe; the stream is not part of what is checked.
#pragma once

#include <mutex>

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

class ValidatedRuns {
 public:
  // True when `a` has the same tensors as the last remembered run.
  bool known(const moe_run_args& a) const;
  // Call after `a` passed every check.
  void remember(const moe_run_args& a);

 private:
  mutable std::mutex mutex_;
  moe_run_args last_{};
  bool has_ = false;
};

}  // namespace moe::sdk
