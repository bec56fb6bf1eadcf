// Helpers shared by the trtllm_style layout tests: deterministic byte patterns, the error-text
// check, and random canonical layer tensors.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "layer_tensors.hpp"
#include "moe/sdk/error.hpp"

namespace moe::trtllm::testing {

inline Bytes random_bytes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(static_cast<size_t>(n));
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

// 0, 1, 2, ... (mod 256): each byte names its position in small worked examples.
inline Bytes iota_bytes(int64_t n) {
  Bytes b(static_cast<size_t>(n));
  std::iota(b.begin(), b.end(), uint8_t(0));
  return b;
}

// f32 values in [lo, hi), as bytes.
inline Bytes random_f32_bytes(int64_t count, uint32_t seed, float lo = 0.01f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Bytes b(size_t(count) * 4);
  for (int64_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    std::memcpy(b.data() + i * 4, &v, 4);
  }
  return b;
}

// Runs `fn`, expects a moe::Error with `status` whose message contains every one of `parts`.
template <class Fn>
void expect_error(Fn&& fn, moe_status status, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const auto& p : parts) EXPECT_THAT(e.what(), ::testing::HasSubstr(p));
  }
}

// Random canonical tensors of `shape` (f32 scales positive, so the fp8 floor leaves them).
inline LayerTensors random_canonical(const LayerShape& shape, bool bias, uint32_t seed) {
  LayerTensors t = canonical_geometry(shape, shape.intermediate);
  for (LayoutTensor* x : {&t.w13, &t.w13_scale, &t.w2, &t.w2_scale}) {
    if (!x->present()) continue;
    x->bytes = x->dtype == MOE_DTYPE_F32 ? random_f32_bytes(x->shape.bytes() / 4, seed++)
                                         : random_bytes(x->shape.bytes(), seed++);
  }
  if (bias) {
    t.b13 = {MOE_DTYPE_F32, {shape.experts, t.w13.shape.rows, 1, 4}, {}};
    t.b13.bytes = random_bytes(t.b13.shape.bytes(), seed++);
    t.b2 = {MOE_DTYPE_BF16, {shape.experts, shape.hidden, 1, 2}, {}};
    t.b2.bytes = random_bytes(t.b2.shape.bytes(), seed++);
  }
  return t;
}

}  // namespace moe::trtllm::testing
