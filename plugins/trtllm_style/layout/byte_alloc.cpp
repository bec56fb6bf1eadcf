#include "byte_alloc.hpp"

#include <atomic>
#include <cstring>

namespace moe::trtllm {

namespace {

std::atomic<int64_t> g_live{0}, g_peak{0}, g_allocated{0};
std::atomic<bool> g_poison{false};

}  // namespace

ByteCounts byte_counts() {
  return {g_live.load(), g_peak.load(), g_allocated.load()};
}

void reset_byte_peak() {
  g_peak.store(g_live.load());
}

void poison_new_bytes(bool on) {
  g_poison.store(on);
}

namespace detail {

void count_allocation(void* p, size_t bytes) {
  if (g_poison.load()) std::memset(p, 0xA5, bytes);
  const int64_t live = g_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  g_allocated.fetch_add(int64_t(bytes));
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
}

void count_deallocation(size_t bytes) {
  g_live.fetch_sub(int64_t(bytes));
}

}  // namespace detail

}  // namespace moe::trtllm
