// Carving a caller's workspace into pieces: every piece starts on a 256-byte boundary, and the
// same walk with no base only counts, so a size query and the carve cannot disagree. Header
// only, plain C++ (host code and the nvcc launchers both use it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe::gpu {

constexpr size_t kWorkspaceAlign = 256;

constexpr size_t workspace_round_up(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(void* base) : base_(static_cast<uint8_t*>(base)) {}
  // The next `count` elements of T; null while only counting. A piece of zero elements is a
  // pointer to nothing: it may equal the next piece's start, so it is never dereferenced.
  template <class T = uint8_t>
  T* take(size_t count) {
    T* p = base_ != nullptr ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += workspace_round_up(count * sizeof(T));
    return p;
  }
  size_t used() const { return used_; }

 private:
  uint8_t* base_;
  size_t used_ = 0;
};

}  // namespace moe::gpu
