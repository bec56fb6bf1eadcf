// Shared by the moe_cuda_common tests: a fixture that skips cleanly without a CUDA device, device
// buffers, fresh random seeds and bf16 helpers. Tests compare against the CPU (the reference or a
// float model written here) on fresh random inputs, with every output poisoned first.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "moe/sdk/formats.hpp"
#include "moe_cuda/check.hpp"

namespace moe::gpu::test {

// Fresh per run; MOE_TEST_SEED=<n> repeats a failing run (the seed is printed by every test).
inline uint64_t fresh_seed() {
  if (const char* s = std::getenv("MOE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

// A device array owned by the test. upload, download and poison synchronise the whole device
// before and after (cudaMemset and pageable cudaMemcpy run on the legacy stream, which the tests'
// non-blocking stream does not wait for).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n > 0) MOE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& v) : DeviceBuffer(v.size()) { upload(v); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }

  T* get() const { return p_; }
  size_t size() const { return n_; }

  void upload(const std::vector<T>& v) {
    ASSERT_LE(v.size(), n_);
    MOE_CUDA_CHECK(cudaDeviceSynchronize());
    if (!v.empty())
      MOE_CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    MOE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    MOE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> v(n_);
    if (n_ > 0) MOE_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  // Every byte = `byte`: 0xff makes floats and bf16 NaN, 0x7b makes int32 0x7b7b7b7b.
  void poison(uint8_t byte = 0xff) {
    MOE_CUDA_CHECK(cudaDeviceSynchronize());
    if (n_ > 0) MOE_CUDA_CHECK(cudaMemset(p_, byte, n_ * sizeof(T)));
    MOE_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

constexpr int32_t kPoisonI32 = 0x7b7b7b7b;

// Skips the test, with the reason, when cudaGetDeviceCount fails or finds no device.
// Fills one 128-channel block (n <= 128 values) with bf16 values whose fp32 quotient by the
// block's scale lands exactly on an e4m3 rounding midpoint while the exact quotient lies just off
// it towards the odd code: rounding the fp32 quotient (ties to even) picks the other neighbour
// than the reference (the exact quotient rounded once). Amax 9, whose scale float(9/448) is
// rounded down: 0.84375 = 42 * 9/448 sits between the codes 40 and 44, and so on. `subnormal`:
// amax 3, whose scale is rounded up, and 4.57763671875e-05 = 3.5 * 2^-9 * 3/448, between the
// subnormal codes 3 and 4 (times 2^-9). The rest of the block is zero.
inline void plant_e4m3_midpoint_quotients(uint16_t* block, int64_t n, bool subnormal) {
  const std::vector<float> normal = {9.0f,    0.84375f, -0.421875f, 1.6875f,
                                     -3.375f, 6.75f,    0.2109375f, -0.052734375f};
  const std::vector<float> tiny = {3.0f, 4.57763671875e-05f, -4.57763671875e-05f};
  const std::vector<float>& v = subnormal ? tiny : normal;
  for (int64_t c = 0; c < n; ++c) block[c] = c < int64_t(v.size()) ? float_to_bf16(v[c]) : 0;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();  // clear it: later tests ask again
      GTEST_SKIP() << "no CUDA device ("
                   << (e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0")
                   << "): the moe_cuda_common kernels need one";
    }
    MOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    seed_ = fresh_seed();
    rng_.seed(seed_);
    std::cout << "[   seed   ] MOE_TEST_SEED=" << seed_ << "\n";
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      cudaStreamDestroy(stream_);
    }
  }
  void sync() { MOE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  float normal(float stddev = 1.0f) { return std::normal_distribution<float>(0.0f, stddev)(rng_); }
  int64_t randint(int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  // bf16 bits of n normal values.
  std::vector<uint16_t> random_bf16(size_t n, float stddev = 1.0f) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = float_to_bf16(normal(stddev));
    return v;
  }

  cudaStream_t stream_ = nullptr;
  std::mt19937_64 rng_;
  uint64_t seed_ = 0;
};

}  // namespace moe::gpu::test
