// The allocator of the layout library's byte buffers (Bytes). Two differences from
// std::allocator, both for prepare()'s weights, which run to tens of gigabytes per layer:
//   - Bytes(n) and resize(n) leave the new bytes uninitialised (Bytes(n, 0) zeroes them): a
//     transform that writes every output byte need not pay for a zero fill first.
//   - every allocation is counted, so a test can assert how many copies of the weights a
//     transform made (byte_counts(): live bytes, their high-water mark, and the total ever
//     allocated); tests can also poison new buffers (poison_new_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace moe::trtllm {

struct ByteCounts {
  int64_t live = 0;       // bytes held by Bytes buffers now
  int64_t peak = 0;       // most bytes held at once since the last reset_byte_peak()
  int64_t allocated = 0;  // bytes ever allocated (buffers created, sized at creation)
};

// Process-wide; thread-safe.
ByteCounts byte_counts();
// peak = live, so a following byte_counts().peak is the high-water mark of what follows.
void reset_byte_peak();
// For tests: while on, new buffers are filled with 0xA5 instead of left as the heap had them,
// so a byte that a transform forgets to write shows up in a comparison.
void poison_new_bytes(bool on);

namespace detail {
void count_allocation(void* p, size_t bytes);
void count_deallocation(size_t bytes);
}  // namespace detail

template <class T>
struct CountingAllocator {
  using value_type = T;

  CountingAllocator() = default;
  template <class U>
  CountingAllocator(const CountingAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    detail::count_allocation(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, size_t n) noexcept {
    detail::count_deallocation(n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  // Default-initialisation for value-less construction: no zero fill.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  friend bool operator==(const CountingAllocator&, const CountingAllocator&) { return true; }
};

}  // namespace moe::trtllm
