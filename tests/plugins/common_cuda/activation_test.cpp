// launch_activation against moe::reference::apply_activation (double) on the same bf16 inputs and
// fp32 biases: every activation, every gate/up layout, bias, sink rows, row ranges, NaN.
#include <cmath>
#include <limits>
#include <vector>

#include "activations.hpp"  // plugins/reference: the oracle
#include "cuda_test_env.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/activation.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

struct Case {
  moe_activation activation;
  GateUpLayout layout;
  int64_t intermediate;
  bool bias;
};

class ActivationTest : public test::CudaTest {
 protected:
  static constexpr int32_t kGroups = 6;  // groups 0..3 routed (with bias), 4..5 sinks

  moe_problem problem_for(moe_activation a, int gelu_tanh = 0) {
    moe_problem p = default_problem();
    p.activation = a;
    p.gelu_tanh = gelu_tanh;
    p.activation_alpha = 1.702f;
    p.activation_limit = 7.0f;
    return p;
  }

  // Expected out row (double, then the bf16 it must round near) of one gemm1 row.
  std::vector<double> reference_row(const moe_problem& p, moe_activation act, GateUpLayout layout,
                                    const uint16_t* in, const float* bias, int64_t inter) {
    const bool gated = is_gated(act);
    std::vector<double> canonical(static_cast<size_t>(gated ? 2 * inter : inter));
    for (int64_t i = 0; i < inter; ++i) {
      int64_t gc = i, uc = inter + i;  // columns of gate and up in this layout
      if (gated && layout == GateUpLayout::kInterleavedUpGate) gc = 2 * i + 1, uc = 2 * i;
      if (gated && layout == GateUpLayout::kInterleavedGateUp) gc = 2 * i, uc = 2 * i + 1;
      if (gated && layout == GateUpLayout::kConcatenatedUpGate) gc = inter + i, uc = i;
      // The kernel adds the bias in fp32: the reference sees that same float.
      canonical[i] = bias ? double(bf16_to_float(in[gc]) + bias[gc]) : bf16_to_float(in[gc]);
      if (gated)
        canonical[inter + i] =
            bias ? double(bf16_to_float(in[uc]) + bias[uc]) : bf16_to_float(in[uc]);
    }
    moe_problem q = p;
    q.activation = act;
    std::vector<double> out(static_cast<size_t>(inter));
    reference::apply_activation(q, canonical.data(), inter, out.data());
    return out;
  }

  // Runs rows [begin, end) of `rows` rows (groups cycling 0..kGroups-1); rows outside stay poison.
  // skip_sinks: the sink groups are skipped instead (computed apart): their rows stay poison.
  void expect_case(const moe_problem& p, const Case& c, int64_t rows, int64_t begin, int64_t end,
                   bool sinks, bool skip_sinks = false) {
    SCOPED_TRACE(testing::Message()
                 << activation_name(c.activation) << " layout " << int(c.layout)
                 << " I=" << c.intermediate << " bias=" << c.bias << " sinks=" << sinks);
    const int64_t inter = c.intermediate;
    const int64_t n1 = (is_gated(c.activation) ? 2 : 1) * inter;
    std::vector<uint16_t> gemm1 =
        random_bf16(static_cast<size_t>(rows * n1), 4.0f);            // past the limit 7
    for (size_t i = 0; i < gemm1.size(); i += 97) gemm1[i] = 0x7fc0;  // some NaN
    std::vector<float> bias;
    if (c.bias) {
      bias.resize(static_cast<size_t>(kGroups * n1));
      for (auto& b : bias) b = normal(0.5f);
    }
    std::vector<int32_t> row_group(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) row_group[r] = int32_t(r % kGroups);

    DeviceBuffer<uint16_t> d_in(gemm1), d_out(static_cast<size_t>(rows * inter));
    DeviceBuffer<float> d_bias(bias);
    DeviceBuffer<int32_t> d_group(row_group);
    DeviceBuffer<int64_t> d_range(std::vector<int64_t>{begin, end});
    d_out.poison(0xff);
    ActivationArgs a;
    a.gemm1 = d_in.get();
    a.out = d_out.get();
    a.intermediate = inter;
    a.layout = c.layout;
    a.bias = c.bias ? d_bias.get() : nullptr;
    a.bias_groups = 4;
    a.row_group = d_group.get();
    a.silu_group_begin = sinks ? 4 : 0;
    a.silu_group_end = sinks ? kGroups : 0;
    a.rows = RowRange{rows, d_range.get(), d_range.get() + 1};
    a.skip_group_begin = skip_sinks ? 4 : 0;
    a.skip_group_end = skip_sinks ? kGroups : 0;
    launch_activation(p, a, stream_);
    sync();
    const std::vector<uint16_t> got = d_out.download();

    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t* got_row = got.data() + r * inter;
      if (r < begin || r >= end || (skip_sinks && row_group[r] >= 4)) {
        for (int64_t i = 0; i < inter; ++i) wrong += got_row[i] != 0xffff;
        continue;
      }
      const int32_t g = row_group[r];
      const bool silu = sinks && g >= 4;
      const moe_activation act = silu ? MOE_ACTIVATION_SILU_MUL : c.activation;
      const float* b = c.bias && g < 4 ? bias.data() + g * n1 : nullptr;
      const std::vector<double> want =
          reference_row(p, act, c.layout, gemm1.data() + r * n1, b, inter);
      for (int64_t i = 0; i < inter; ++i) {
        const double v = bf16_to_float(got_row[i]);
        // fp32 math then one bf16 rounding: within one bf16 ulp (2^-7 relative) of the exact value.
        const bool ok = std::isnan(want[i])
                            ? std::isnan(v)
                            : std::abs(v - want[i]) <= std::abs(want[i]) * 0x1p-7 + 1e-5;
        if (!ok && wrong++ < 5)
          ADD_FAILURE() << "row " << r << " (group " << g << ") col " << i << ": got " << v
                        << " want " << want[i];
      }
    }
    EXPECT_EQ(wrong, 0);
  }
};

TEST_F(ActivationTest, EveryGatedActivationInEveryLayoutMatchesTheReference) {
  const moe_activation gated[] = {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP,
                                  MOE_ACTIVATION_SWIGLU_OAI, MOE_ACTIVATION_GELU_MUL};
  const GateUpLayout layouts[] = {GateUpLayout::kConcatenated, GateUpLayout::kInterleavedUpGate,
                                  GateUpLayout::kInterleavedGateUp,
                                  GateUpLayout::kConcatenatedUpGate};
  for (moe_activation act : gated)
    for (GateUpLayout layout : layouts)
      for (int64_t inter : {256, 100})  // 16-byte vectors, scalar
        for (bool bias : {false, true})
          expect_case(problem_for(act), {act, layout, inter, bias}, 40, 0, 40, false);
}

TEST_F(ActivationTest, GeluTanhFormAndRelu2MatchTheReference) {
  for (int64_t inter : {256, 100}) {
    expect_case(problem_for(MOE_ACTIVATION_GELU_MUL, 1),
                {MOE_ACTIVATION_GELU_MUL, GateUpLayout::kInterleavedGateUp, inter, true}, 40, 0, 40,
                false);
    expect_case(problem_for(MOE_ACTIVATION_RELU2),
                {MOE_ACTIVATION_RELU2, GateUpLayout::kConcatenated, inter, true}, 40, 0, 40, false);
  }
}

TEST_F(ActivationTest, SinkGroupsUseSiluMulWhateverTheLayerActivation) {
  for (moe_activation act : {MOE_ACTIVATION_SWIGLU_OAI, MOE_ACTIVATION_GELU_MUL})
    expect_case(problem_for(act), {act, GateUpLayout::kInterleavedUpGate, 128, true}, 36, 0, 36,
                /*sinks=*/true);
}

TEST_F(ActivationTest, RowsOfSkippedGroupsAreLeftUntouched) {
  expect_case(problem_for(MOE_ACTIVATION_SILU_MUL),
              {MOE_ACTIVATION_SILU_MUL, GateUpLayout::kConcatenated, 64, true}, 36, 0, 36, false,
              /*skip_sinks=*/true);
}

TEST_F(ActivationTest, OnlyRowsInTheDeviceRangeAreWritten) {
  expect_case(problem_for(MOE_ACTIVATION_SILU_MUL),
              {MOE_ACTIVATION_SILU_MUL, GateUpLayout::kConcatenated, 64, false}, 50, 13, 31, false);
  expect_case(problem_for(MOE_ACTIVATION_SILU_MUL),
              {MOE_ACTIVATION_SILU_MUL, GateUpLayout::kConcatenated, 64, false}, 50, 20, 20, false);
}

}  // namespace
}  // namespace moe::gpu
