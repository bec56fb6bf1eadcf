// The epilogues' branch-free exact forms (kernels/exact_math.cuh, activate_batch): on the CPU,
// div448_rn against the double expression of the quantisation scale for every mantissa of two
// binades (the operations scale exactly with the input's exponent while everything stays
// normal), the ends of the range and random inputs of every exponent; on a GPU (skips without
// one), rcp_rn_fast and the device's fp8_scale_from_amax over every fp32 bit pattern, and
// activate_batch against activate() bit for bit, extreme and non-finite inputs included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_env.hpp"
#include "e4m3_round_host.hpp"
#include "exact_math_kernel.hpp"

namespace moe::gpu::test {
namespace {

// Checks div448_rn(a) against float(a / 448.0) in double; counts a mismatch.
void check_div448(float a, int64_t& failures) {
  const float want = float(double(a) / 448.0), got = div448(a);
  if (bits_of(want) != bits_of(got) && ++failures <= 5)
    ADD_FAILURE() << "div448_rn(" << a << ") = " << got << ", want " << want;
}

TEST(ExactMath, Div448IsTheDoubleQuotientRoundedToFloat) {
  int64_t failures = 0, checked = 0;
  // Every mantissa of [1, 2) and of [2^-30, 2^-29) (near the smallest amax, 1e-10 ~ 2^-33).
  for (const uint32_t exponent : {127u, 97u})
    for (uint32_t m = 0; m < (1u << 23); ++m, ++checked)
      check_div448(from_bits((exponent << 23) | m), failures);
  for (const float a : {1e-10f, std::nextafter(1e-10f, 1.0f), 448.0f, 447.99997f, 1.0f,
                        std::numeric_limits<float>::max(), -3.0f, -448.0f})
    check_div448(a, failures), ++checked;
  std::mt19937 rng{static_cast<uint32_t>(fresh_seed())};
  std::uniform_int_distribution<uint32_t> any(bits_of(1e-10f), 0x7f7fffffu);
  for (int i = 0; i < 1000000; ++i, ++checked) check_div448(from_bits(any(rng)), failures);
  EXPECT_EQ(failures, 0) << "of " << checked;
  // Infinity and NaN pass through as the division gives them.
  EXPECT_EQ(div448(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(div448(std::numeric_limits<float>::quiet_NaN())));
}

using ExactMathGpu = CudaTest;

TEST_F(ExactMathGpu, TheFastReciprocalAndTheScaleAreExactForEveryFloat) {
  DeviceBuffer<unsigned long long> counts(3);
  MOE_CUDA_CHECK(count_exact_math_mismatches(counts.get(), stream_));
  sync();
  const std::vector<unsigned long long> c = counts.download();
  // Every normal float below 2^126 in magnitude takes the fast path: exponent fields 1..252.
  EXPECT_EQ(c[0], 2ull * 252 * (1ull << 23));
  EXPECT_EQ(c[1], 0u) << "reciprocals off 1.0f / y";
  EXPECT_EQ(c[2], 0u) << "scales off float(max(amax, 1e-10) / 448.0)";
}

TEST_F(ExactMathGpu, TheBatchedActivationIsActivateBitForBit) {
  constexpr int64_t kN = 16 * 4096;
  const float specials[] = {0.0f,
                            -0.0f,
                            -87.0f,
                            -87.5f,
                            -88.8f,
                            -89.0f,
                            -104.0f,
                            88.8f,
                            1e-30f,
                            -1e-30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min()};
  std::vector<float> g(kN), u(kN);
  for (int64_t i = 0; i < kN; ++i) {
    // Mostly ordinary values; every 64th a special one, every 8th from a range past the
    // fast reciprocal's (so whole batches go both ways).
    g[size_t(i)] = i % 64 == 5  ? specials[(i / 64) % 16]
                   : i % 8 == 3 ? uniform(-120.0f, 120.0f)
                                : normal(4.0f);
    u[size_t(i)] = i % 64 == 9 ? specials[(i / 64 + 3) % 16] : normal(4.0f);
  }
  DeviceBuffer<float> d_g(g), d_u(u), out(2 * kN);
  struct Case {
    int32_t act;
    float alpha, limit;
  };
  // silu_mul, silu_mul_clamp, swiglu_oai (gpt-oss's alpha and limit), relu2 (no batch form).
  for (const Case c :
       {Case{0, 1.0f, 0.0f}, Case{1, 1.0f, 7.0f}, Case{2, 1.702f, 7.0f}, Case{4, 1.0f, 0.0f}}) {
    out.poison();
    MOE_CUDA_CHECK(
        activate_both_ways(c.act, c.alpha, c.limit, d_g.get(), d_u.get(), out.get(), kN, stream_));
    sync();
    const std::vector<float> o = out.download();
    int64_t failures = 0;
    for (int64_t i = 0; i < kN; ++i) {
      const float batch = o[size_t(i)], one = o[size_t(kN + i)];
      const bool same = std::isnan(one) ? std::isnan(batch) : bits_of(batch) == bits_of(one);
      if (!same && ++failures <= 5)
        ADD_FAILURE() << "activation " << c.act << " g=" << g[size_t(i)] << " u=" << u[size_t(i)]
                      << ": batch " << batch << ", activate " << one;
    }
    EXPECT_EQ(failures, 0) << "activation " << c.act;
  }
}

}  // namespace
}  // namespace moe::gpu::test
