// moe::parallel_for when the system will not start a thread (a container's pids limit: EAGAIN):
// the threads that did start and the calling thread share the work, and nothing terminates the
// process. This executable's pthread_create stands in front of the C library's and refuses as
// many creations as a test asks.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "moe/sdk/parallel_for.hpp"

namespace {
std::atomic<int> g_starts_left{-1};  // -1: no limit
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  int left = g_starts_left.load();
  while (left >= 0) {
    if (left == 0) return EAGAIN;
    if (g_starts_left.compare_exchange_weak(left, left - 1)) break;
  }
  return real(thread, attr, start, arg);
}

namespace moe::test {
namespace {

struct StartLimit {
  explicit StartLimit(int n) { g_starts_left = n; }
  ~StartLimit() { g_starts_left = -1; }
};

std::vector<int64_t> doubled(int64_t n, int starts) {
  std::vector<int64_t> out(size_t(n), -1);
  const StartLimit limit(starts);
  parallel_for(
      n, [&](int64_t i) { out[size_t(i)] = 2 * i; }, 8);
  return out;
}

TEST(ParallelFor, ThreadsTheSystemWillNotStartLeaveTheWorkToTheOthers) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: parallel_for starts none";
  for (const int starts : {0, 1}) {
    const std::vector<int64_t> out = doubled(1000, starts);
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(out[size_t(i)], 2 * i) << "starts " << starts;
  }
}

TEST(ParallelFor, AnExceptionStillComesBackWhenThreadsAreShort) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: parallel_for starts none";
  const StartLimit limit(0);
  EXPECT_THROW(parallel_for(
                   100,
                   [](int64_t i) {
                     if (i == 37) throw std::runtime_error("item 37");
                   },
                   8),
               std::runtime_error);
}

}  // namespace
}  // namespace moe::test
