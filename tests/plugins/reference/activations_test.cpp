// The reference activations (docs/design.md §5) on small rows whose expectations are written out
// here, from the formulas of §5 or from known constants, never from the code under test.
#include "activations.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace {

using moe::reference::apply_activation;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double silu(double x) {
  return x * sigmoid(x);
}

moe_problem problem_with(moe_activation activation) {
  moe_problem p = moe::default_problem();
  p.activation = activation;
  return p;
}

// gemm1 = [gate (n) | up (n)] for gated activations; returns the activated row [n].
std::vector<double> activate(const moe_problem& p, const std::vector<double>& gemm1, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n), kNaN);
  apply_activation(p, gemm1.data(), n, out.data());
  return out;
}

void expect_row(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "element " << i;
}

TEST(ReferenceActivation, SiluMulIsSiluOfGateTimesUp) {
  const moe_problem p = problem_with(MOE_ACTIVATION_SILU_MUL);
  // gate = {0, 1, -2, 3}, up = {3, 2, 0.5, 0}
  const auto out = activate(p, {0, 1, -2, 3, /**/ 3, 2, 0.5, 0}, 4);
  // silu(1) = 1 / (1 + e^-1); silu(-2) = -2 / (1 + e^2)
  expect_row(out, {0.0, 2.0 / (1.0 + std::exp(-1.0)), 0.5 * -2.0 / (1.0 + std::exp(2.0)), 0.0});
}

TEST(ReferenceActivation, SiluMulLargeNegativeGateGivesZeroNotNaN) {
  const moe_problem p = problem_with(MOE_ACTIVATION_SILU_MUL);
  const auto out = activate(p, {-800, 1}, 1);  // exp(800) overflows to inf: silu -> -0
  EXPECT_EQ(out[0], 0.0);
}

TEST(ReferenceActivation, SiluMulClampClampsGateFromAboveAndUpBothWays) {
  moe_problem p = problem_with(MOE_ACTIVATION_SILU_MUL_CLAMP);
  p.activation_limit = 4.0f;
  // gate = {10, -10, 2, 4}: only 10 is clamped (to 4); -10 stays -10 (no lower clamp on gate).
  // up   = {20, -20, 3, -4}: clamped to [-4, 4].
  const auto out = activate(p, {10, -10, 2, 4, /**/ 20, -20, 3, -4}, 4);
  expect_row(out, {silu(4.0) * 4.0, silu(-10.0) * -4.0, silu(2.0) * 3.0, silu(4.0) * -4.0});
}

TEST(ReferenceActivation, SiluMulClampBelowTheLimitEqualsSiluMul) {
  moe_problem p = problem_with(MOE_ACTIVATION_SILU_MUL_CLAMP);
  p.activation_limit = 7.0f;
  const auto out = activate(p, {6.5, -3, /**/ -6.5, 1.5}, 2);
  expect_row(out, {silu(6.5) * -6.5, silu(-3.0) * 1.5});
}

TEST(ReferenceActivation, SwigluOaiIsUpPlusOneTimesGateTimesSigmoidAlphaGate) {
  moe_problem p = problem_with(MOE_ACTIVATION_SWIGLU_OAI);
  p.activation_alpha = 1.702f;
  p.activation_limit = 7.0f;
  const double alpha = 1.702f;  // the problem holds a float: this is the alpha in effect
  // gate = {10, -10, 1, 2}, up = {-9, 8, 0.5, -1}
  // gate 10 -> 7 (L); gate -10 unchanged; up -9 -> -7, up 8 -> 7; up = -1 makes (u + 1) = 0.
  const auto out = activate(p, {10, -10, 1, 2, /**/ -9, 8, 0.5, -1}, 4);
  expect_row(out, {(-7.0 + 1.0) * 7.0 / (1.0 + std::exp(-alpha * 7.0)),
                   (7.0 + 1.0) * -10.0 / (1.0 + std::exp(alpha * 10.0)),
                   (0.5 + 1.0) * 1.0 / (1.0 + std::exp(-alpha)), 0.0});
}

TEST(ReferenceActivation, SwigluOaiUsesTheProblemsAlphaAndLimit) {
  moe_problem p = problem_with(MOE_ACTIVATION_SWIGLU_OAI);
  p.activation_alpha = 1.0f;
  p.activation_limit = 2.0f;
  // gate 3 -> 2, up 5 -> 2: (2 + 1) * 2 * sigmoid(2)
  const auto out = activate(p, {3, /**/ 5}, 1);
  expect_row(out, {3.0 * 2.0 / (1.0 + std::exp(-2.0))});
}

// Standard normal CDF values: Phi(1), Phi(-1), Phi(2).
constexpr double kPhi1 = 0.8413447460685429;
constexpr double kPhiMinus1 = 0.15865525393145707;
constexpr double kPhi2 = 0.9772498680518208;

TEST(ReferenceActivation, GeluMulErfFormIsXTimesNormalCdf) {
  moe_problem p = problem_with(MOE_ACTIVATION_GELU_MUL);
  p.gelu_tanh = 0;
  // gate = {1, -1, 2, 0}, up = {1, 2, 0.5, 9}
  const auto out = activate(p, {1, -1, 2, 0, /**/ 1, 2, 0.5, 9}, 4);
  const std::vector<double> want{kPhi1, -kPhiMinus1 * 2.0, 2.0 * kPhi2 * 0.5, 0.0};
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-15) << "element " << i;
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
double gelu_tanh(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

TEST(ReferenceActivation, GeluMulTanhFormDiffersFromErfForm) {
  moe_problem p = problem_with(MOE_ACTIVATION_GELU_MUL);
  p.gelu_tanh = 1;
  const auto out = activate(p, {1, -1, 2, /**/ 1, 2, 0.5}, 3);
  expect_row(out, {gelu_tanh(1.0), gelu_tanh(-1.0) * 2.0, gelu_tanh(2.0) * 0.5});
  // At these points the two forms differ by more than 1e-5, so the flag is really honoured.
  EXPECT_GT(std::abs(out[0] - kPhi1), 1e-5);
  EXPECT_GT(std::abs(out[1] - -kPhiMinus1 * 2.0), 1e-5);
  EXPECT_GT(std::abs(out[2] - 2.0 * kPhi2 * 0.5), 1e-5);
}

TEST(ReferenceActivation, Relu2SquaresThePositivePart) {
  const moe_problem p = problem_with(MOE_ACTIVATION_RELU2);
  const auto out = activate(p, {-2, 0, 3, 0.5}, 4);
  expect_row(out, {0.0, 0.0, 9.0, 0.25});
}

TEST(ReferenceActivation, Relu2IsNotGatedAndReadsOnlyIntermediateValues) {
  const moe_problem p = problem_with(MOE_ACTIVATION_RELU2);
  // The would-be "up" half is NaN: reading it would poison the output.
  const auto out = activate(p, {1.5, -1, kNaN, kNaN}, 2);
  expect_row(out, {2.25, 0.0});
}

// A value from a newer header is refused (UNSUPPORTED, reason activation), never computed.
TEST(ReferenceActivation, UnknownActivationIsRefusedNamingIt) {
  moe_problem p = problem_with(MOE_ACTIVATION_SILU_MUL);
  p.activation = 42;
  std::vector<double> gemm1{1, 1}, out(1);
  try {
    apply_activation(p, gemm1.data(), 1, out.data());
    FAIL() << "no error";
  } catch (const moe::Refusal& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED);
    EXPECT_EQ(e.reason(), MOE_REASON_ACTIVATION);
    EXPECT_NE(std::string(e.what()).find("activation=42"), std::string::npos) << e.what();
  }
}

}  // namespace
