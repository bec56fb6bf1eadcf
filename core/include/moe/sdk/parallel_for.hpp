// Runs fn(i) for i in [0, n) on a few threads; the first exception is rethrown after all join.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace moe {

// Up to `max_threads` threads (0: hardware_concurrency). Each i must write only its own outputs,
// so the result does not depend on the schedule.
template <class Fn>
void parallel_for(int64_t n, Fn&& fn, int64_t max_threads = 0) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = std::min<int64_t>(n, max_threads > 0 ? std::min(max_threads, hw) : hw);
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads));
  bool short_of_threads = false;
  for (int64_t t = 0; t < threads && !short_of_threads; ++t) {
    // A thread the system will not start (a pids limit: EAGAIN) leaves its share to the threads
    // already running and to this one; a vector destroyed holding joinable threads would
    // terminate the process.
    try {
      pool.emplace_back(work);
    } catch (...) {  // std::system_error (EAGAIN), or bad_alloc for the thread's state
      short_of_threads = true;
    }
  }
  if (short_of_threads) work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace moe
