// The kernels that quantise rows for fp8 GEMMs: the gather fused into the 1x128 quantisation
// (rows read through a source map, dead rows untouched) and the activation with its output
// quantised per 1x128 from fp32 GEMM1 rows (masked rows skipped), against the reference's
// rules: the gather's scales and codes bit for bit (quotients that fp32 rounds onto an e4m3
// midpoint included); the activation's scales to fp32 and codes equal except next to a midpoint
// (its fp32 math differs from the reference's double math).
#include <algorithm>
#include <cmath>
#include <vector>

#include "activations.hpp"  // plugins/reference: the oracle
#include "cuda_test_env.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/quantize.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

// Codes may differ by one step only where the exact quotient sits within `tol` (relative) of
// the midpoint between two adjacent e4m3 values.
bool near_midpoint(double q, double tol) {
  const double a = std::abs(q);
  const int code = e4m3_from_double(a);
  for (int c = std::max(0, code - 1); c < std::min(0x7e, code + 1); ++c) {
    const double mid = 0.5 * (e4m3_to_double(uint8_t(c)) + e4m3_to_double(uint8_t(c + 1)));
    if (std::abs(a - mid) <= tol * mid) return true;
  }
  return false;
}

class QuantizedRowsTest : public test::CudaTest {};

TEST_F(QuantizedRowsTest, GatherQuantiseReadsEachRowFromItsSourceAndSkipsDeadRows) {
  const int64_t tokens = 7, rows = 40, hidden = 512, blocks = hidden / 128;
  std::vector<uint16_t> x = random_bf16(size_t(tokens * hidden));
  test::plant_e4m3_midpoint_quotients(x.data() + 128, 128, false);    // token 0, block 1
  test::plant_e4m3_midpoint_quotients(x.data() + hidden, 128, true);  // token 1, block 0
  std::vector<int32_t> source(static_cast<size_t>(rows));
  for (auto& s : source) s = randint(0, 3) == 0 ? -1 : int32_t(randint(0, tokens - 1));
  DeviceBuffer<uint16_t> d_x(x);
  DeviceBuffer<int32_t> d_source(source);
  DeviceBuffer<uint8_t> d_codes(size_t(rows * hidden));
  DeviceBuffer<float> d_scales(size_t(rows * blocks));  // MN-major [blocks][rows]
  d_codes.poison(0xaa);
  d_scales.poison(0xff);
  launch_gather_quantize_fp8_1x128(d_x.get(), hidden, d_source.get(), RowRange{rows}, d_codes.get(),
                                   {d_scales.get(), 1, rows}, stream_);
  sync();
  const std::vector<uint8_t> codes = d_codes.download();
  const std::vector<float> scales = d_scales.download();
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (source[r] < 0) {
      for (int64_t c = 0; c < hidden; ++c) wrong += codes[r * hidden + c] != 0xaa;
      for (int64_t b = 0; b < blocks; ++b) wrong += !std::isnan(scales[b * rows + r]);
      continue;
    }
    std::vector<double> row(static_cast<size_t>(hidden));
    for (int64_t c = 0; c < hidden; ++c) row[c] = bf16_to_float(x[source[r] * hidden + c]);
    for (int64_t b = 0; b < blocks; ++b) {
      double amax = 0;
      for (int64_t c = b * 128; c < (b + 1) * 128; ++c) amax = std::max(amax, std::abs(row[c]));
      const float want = fp8_scale_from_amax(amax);
      if (scales[b * rows + r] != want && wrong++ < 5)
        ADD_FAILURE() << "row " << r << " block " << b << " scale " << scales[b * rows + r]
                      << " want " << want;
      for (int64_t c = b * 128; c < (b + 1) * 128; ++c) {
        const double q = row[c] / double(want);
        if (codes[r * hidden + c] != e4m3_from_double(q) && wrong++ < 5)
          ADD_FAILURE() << "row " << r << " col " << c;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

// Column of a gated GEMM1 row in `layout` that holds canonical column c ([gate (I) | up (I)]).
int64_t stored_col(GateUpLayout layout, int64_t c, int64_t inter) {
  const bool gate = c < inter;
  const int64_t i = gate ? c : c - inter;
  switch (layout) {
    case GateUpLayout::kConcatenated:
      return c;
    case GateUpLayout::kConcatenatedUpGate:
      return gate ? inter + i : i;
    case GateUpLayout::kInterleavedUpGate:
      return gate ? 2 * i + 1 : 2 * i;
    case GateUpLayout::kInterleavedGateUp:
      return gate ? 2 * i : 2 * i + 1;
  }
  return c;
}

// fp32 GEMM1 rows -> act -> e4m3 per 128 outputs, every activation and every gate/up layout;
// rows the row list leaves out (a masked layout's dead rows) are left alone. The reference is
// apply_activation in double on the same fp32 inputs.
TEST_F(QuantizedRowsTest, ActivationQuantisesItsFp32OutputPer128AndSkipsDeadRows) {
  struct Case {
    moe_activation act;
    GateUpLayout layout;
  };
  for (const Case k : {Case{MOE_ACTIVATION_SILU_MUL, GateUpLayout::kConcatenated},
                       Case{MOE_ACTIVATION_SILU_MUL, GateUpLayout::kConcatenatedUpGate},
                       Case{MOE_ACTIVATION_SWIGLU_OAI, GateUpLayout::kConcatenatedUpGate},
                       Case{MOE_ACTIVATION_SWIGLU_OAI, GateUpLayout::kInterleavedUpGate},
                       Case{MOE_ACTIVATION_GELU_MUL, GateUpLayout::kInterleavedGateUp},
                       Case{MOE_ACTIVATION_RELU2, GateUpLayout::kConcatenated}}) {
    const moe_activation act = k.act;
    SCOPED_TRACE(testing::Message() << "activation " << int(act) << " layout " << int(k.layout));
    moe_problem p = default_problem();
    p.activation = act;
    p.activation_alpha = 1.702f;
    p.activation_limit = 7.0f;
    const int64_t rows = 37, inter = 384, blocks = inter / 128;
    const int64_t n1 = is_gated(act) ? 2 * inter : inter;
    std::vector<float> gemm1(static_cast<size_t>(rows * n1));
    for (auto& v : gemm1) v = normal(2.0f);
    std::vector<int32_t> live(static_cast<size_t>(rows));
    for (auto& l : live) l = randint(0, 4) == 0 ? -1 : 0;
    DeviceBuffer<float> d_gemm1(gemm1);
    std::vector<int32_t> live_rows;  // the rows to visit, as a masked layout lists its live ones
    for (int64_t r = 0; r < rows; ++r)
      if (live[size_t(r)] >= 0) live_rows.push_back(int32_t(r));
    DeviceBuffer<int32_t> d_live(live_rows);
    DeviceBuffer<uint8_t> d_codes(size_t(rows * inter));
    DeviceBuffer<float> d_scales(size_t(rows * blocks));
    d_codes.poison(0xaa);
    d_scales.poison(0xff);
    ActivationArgs a;
    a.gemm1_f32 = d_gemm1.get();
    a.intermediate = inter;
    a.layout = k.layout;
    a.rows = RowRange{rows, nullptr, nullptr, d_live.get(), int64_t(live_rows.size())};
    a.out_fp8 = d_codes.get();
    a.out_scales = {d_scales.get(), 1, rows};
    launch_activation(p, a, stream_);
    sync();
    const std::vector<uint8_t> codes = d_codes.download();
    const std::vector<float> scales = d_scales.download();
    int64_t wrong = 0, flips = 0, checked = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (live[r] < 0) {
        for (int64_t c = 0; c < inter; ++c) wrong += codes[r * inter + c] != 0xaa;
        continue;
      }
      std::vector<double> in(static_cast<size_t>(n1)), y(static_cast<size_t>(inter));
      for (int64_t c = 0; c < n1; ++c)
        in[c] = gemm1[r * n1 + (is_gated(act) ? stored_col(k.layout, c, inter) : c)];
      reference::apply_activation(p, in.data(), inter, y.data());
      for (int64_t b = 0; b < blocks; ++b) {
        double amax = 0;
        for (int64_t c = b * 128; c < (b + 1) * 128; ++c) amax = std::max(amax, std::abs(y[c]));
        const double want = fp8_scale_from_amax(amax), got = scales[b * rows + r];
        // fp32 math (expf, erff) against double: the scale within a few fp32 ulps.
        if (std::abs(got - want) > 1e-6 * want && wrong++ < 5)
          ADD_FAILURE() << "row " << r << " block " << b << " scale " << got << " want " << want;
        for (int64_t c = b * 128; c < (b + 1) * 128; ++c, ++checked) {
          const double q = y[c] / want;
          if (codes[r * inter + c] == e4m3_from_double(q)) continue;
          ++flips;
          if (!near_midpoint(q, 1e-5) && wrong++ < 5)
            ADD_FAILURE() << "row " << r << " col " << c << " code " << int(codes[r * inter + c])
                          << " want " << int(e4m3_from_double(q)) << " (q=" << q << ")";
        }
      }
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_LE(flips, checked / 1000) << "codes next to a midpoint that rounded the other way";
  }
}

}  // namespace
}  // namespace moe::gpu
