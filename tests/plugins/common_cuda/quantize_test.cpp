// e4m3 activation quantisation against core's rules (moe::fp8_scale_from_amax,
// moe::e4m3_from_double, moe::fake_quant_fp8_1x128 / fake_quant_fp8): scales and codes bit for
// bit, including quotients that fp32 division rounds onto an e4m3 midpoint.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_test_env.hpp"
#include "moe/sdk/formats.hpp"
#include "moe_cuda/quantize.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

// One element: the kernel's code must be the reference's (the exact x / scale rounded once to
// e4m3; double holds the quotient closely enough to round it the same), and fake_quant's value
// (`fake`) must be that code times the scale. Returns a failure text.
std::string check_element(float x, float scale, uint8_t got, double fake) {
  const uint8_t reference = e4m3_from_double(double(x) / double(scale));
  std::string why;
  if (got != reference)
    why = fmt::format("code 0x{:02x}, the reference's 0x{:02x}", got, reference);
  const bool fake_ok =
      std::isnan(fake) ? reference == 0x7f : e4m3_to_double(reference) * double(scale) == fake;
  if (!fake_ok)
    why += fmt::format(" reference code 0x{:02x} is not fake_quant's {}", reference, fake);
  return why.empty() ? why : fmt::format("x={} scale={}: {}", x, scale, why);
}
// bf16 bits would convert to float silently (as a number, not as bf16): say bf16_to_float.
std::string check_element(uint16_t x_bits, float scale, uint8_t got, double fake) = delete;

class QuantizeTest : public test::CudaTest {
 protected:
  // Rows of very different magnitudes; a zero block, a NaN, a -0 and exact midpoints mixed in.
  std::vector<uint16_t> activations(int64_t rows, int64_t hidden) {
    std::vector<uint16_t> x(static_cast<size_t>(rows * hidden));
    for (int64_t r = 0; r < rows; ++r) {
      const float magnitude = std::pow(10.0f, uniform(-3.0f, 3.0f));
      for (int64_t c = 0; c < hidden; ++c) x[r * hidden + c] = float_to_bf16(normal(magnitude));
    }
    if (rows > 2) {
      for (int64_t c = 0; c < std::min<int64_t>(hidden, 128); ++c) x[1 * hidden + c] = 0;
      x[2 * hidden + 3] = 0x7fc0;                 // NaN: code 0x7f, and not part of the amax
      x[2 * hidden + 4] = 0x8000;                 // -0
      x[2 * hidden + 5] = float_to_bf16(448.0f);  // with the block amax 448, scale 1: exact
      x[2 * hidden + 6] = float_to_bf16(12.5f);   // quotients on midpoints, ties to even: 12
      x[2 * hidden + 7] = float_to_bf16(-17.0f);  // -16
      for (int64_t c = 8; c < std::min<int64_t>(hidden, 128); ++c) x[2 * hidden + c] = 0;
    }
    if (rows > 4) {
      test::plant_e4m3_midpoint_quotients(x.data() + 3 * hidden, std::min<int64_t>(hidden, 128),
                                          false);
      test::plant_e4m3_midpoint_quotients(x.data() + 4 * hidden, std::min<int64_t>(hidden, 128),
                                          true);
    }
    return x;
  }

  void expect_1x128(int64_t rows, int64_t hidden, int64_t begin, int64_t end, bool mn_major) {
    SCOPED_TRACE(testing::Message() << "H=" << hidden << " rows [" << begin << ", " << end
                                    << ") of " << rows << (mn_major ? " MN-major" : ""));
    const int64_t blocks = ceil_div(hidden, kFp8BlockSize);
    const std::vector<uint16_t> x = activations(rows, hidden);
    DeviceBuffer<uint16_t> d_x(x);
    DeviceBuffer<uint8_t> d_codes(static_cast<size_t>(rows * hidden));
    DeviceBuffer<float> d_scales(static_cast<size_t>(rows * blocks));
    DeviceBuffer<int64_t> d_range(std::vector<int64_t>{begin, end});
    d_codes.poison(0xaa);
    d_scales.poison(0xff);
    const Fp8BlockScales layout =
        mn_major ? Fp8BlockScales{d_scales.get(), 1, rows} : Fp8BlockScales{d_scales.get()};
    launch_quantize_fp8_1x128(d_x.get(), hidden, RowRange{rows, d_range.get(), d_range.get() + 1},
                              d_codes.get(), layout, stream_);
    sync();
    const std::vector<uint8_t> codes = d_codes.download();
    const std::vector<float> scales = d_scales.download();

    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const bool in_range = r >= begin && r < end;
      std::vector<double> fake(
          static_cast<size_t>(hidden));  // the reference's fake quantisation of the row
      for (int64_t c = 0; c < hidden; ++c) fake[c] = bf16_to_float(x[r * hidden + c]);
      fake_quant_fp8_1x128(fake.data(), hidden);
      for (int64_t b = 0; b < blocks; ++b) {
        const float scale = scales[mn_major ? b * rows + r : r * blocks + b];
        if (!in_range) {
          wrong += !std::isnan(scale);
          continue;
        }
        const int64_t c0 = b * kFp8BlockSize, c1 = std::min(hidden, c0 + kFp8BlockSize);
        double amax = 0.0;
        for (int64_t c = c0; c < c1; ++c)
          amax = std::max(amax, std::abs(double(bf16_to_float(x[r * hidden + c]))));
        if (scale != fp8_scale_from_amax(amax) && wrong++ < 5)
          ADD_FAILURE() << "row " << r << " block " << b << ": scale " << scale << " want "
                        << fp8_scale_from_amax(amax);
        for (int64_t c = c0; c < c1; ++c) {
          const std::string why = check_element(bf16_to_float(x[r * hidden + c]), scale,
                                                codes[r * hidden + c], fake[c]);
          if (!why.empty() && wrong++ < 5)
            ADD_FAILURE() << "row " << r << " col " << c << ": " << why;
        }
      }
      if (!in_range)
        for (int64_t c = 0; c < hidden; ++c) wrong += codes[r * hidden + c] != 0xaa;
    }
    EXPECT_EQ(wrong, 0);
  }

  // Per-tensor: dynamic (scale from the amax of rows [begin, end)) or static (given), from bf16
  // values or (f32) from f32 ones that bf16 cannot hold (each bf16 value nudged by up to 2^-9).
  void expect_tensor(int64_t rows, int64_t hidden, int64_t begin, int64_t end, bool dynamic,
                     bool f32 = false) {
    SCOPED_TRACE(testing::Message() << "H=" << hidden << " rows [" << begin << ", " << end << ") "
                                    << (dynamic ? "dynamic" : "static") << (f32 ? " f32" : ""));
    const std::vector<uint16_t> x_bf16 = activations(rows, hidden);
    std::vector<float> x(x_bf16.size());
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = bf16_to_float(x_bf16[i]) * (f32 ? 1.0f + uniform(-1.0f, 1.0f) / 512.0f : 1.0f);
    double amax = 0.0;
    for (int64_t i = begin * hidden; i < end * hidden; ++i)
      if (!std::isnan(x[i])) amax = std::max(amax, std::abs(double(x[i])));
    const float want_scale = dynamic ? fp8_scale_from_amax(amax) : uniform(0.001f, 0.1f);
    DeviceBuffer<uint16_t> d_x(x_bf16);
    DeviceBuffer<float> d_x_f32(x);
    DeviceBuffer<uint8_t> d_codes(static_cast<size_t>(rows * hidden));
    DeviceBuffer<float> d_scale(std::vector<float>{dynamic ? std::nanf("") : want_scale});
    DeviceBuffer<char> workspace(quantize_fp8_tensor_workspace_bytes());
    DeviceBuffer<int64_t> d_range(std::vector<int64_t>{begin, end});
    workspace.poison(0x7b);  // the launch must zero its amax itself
    d_codes.poison(0xaa);
    const RowRange range{rows, d_range.get(), d_range.get() + 1};
    if (dynamic && f32)
      launch_quantize_fp8_tensor_dynamic(d_x_f32.get(), hidden, range, d_codes.get(), d_scale.get(),
                                         workspace.get(), stream_);
    else if (dynamic)
      launch_quantize_fp8_tensor_dynamic(d_x.get(), hidden, range, d_codes.get(), d_scale.get(),
                                         workspace.get(), stream_);
    else if (f32)
      launch_quantize_fp8_tensor_static(d_x_f32.get(), hidden, range, d_scale.get(), d_codes.get(),
                                        stream_);
    else
      launch_quantize_fp8_tensor_static(d_x.get(), hidden, range, d_scale.get(), d_codes.get(),
                                        stream_);
    sync();
    const float scale = d_scale.download()[0];
    EXPECT_EQ(scale, want_scale);
    const std::vector<uint8_t> codes = d_codes.download();
    std::vector<double> fake(
        static_cast<size_t>((end - begin) * hidden));  // the reference's fake_quant_fp8
    for (size_t i = 0; i < fake.size(); ++i) fake[i] = x[begin * hidden + i];
    if (!fake.empty()) fake_quant_fp8(fake.data(), int64_t(fake.size()), want_scale);
    int64_t wrong = 0;
    for (int64_t i = 0; i < rows * hidden; ++i) {
      const int64_t r = i / hidden;
      if (r < begin || r >= end) {
        wrong += codes[i] != 0xaa;
        continue;
      }
      const std::string why = check_element(x[i], want_scale, codes[i], fake[i - begin * hidden]);
      if (!why.empty() && wrong++ < 5) ADD_FAILURE() << "element " << i << ": " << why;
    }
    EXPECT_EQ(wrong, 0);
  }
};

TEST_F(QuantizeTest, PerToken1x128MatchesTheReferenceScalesAndCodes) {
  expect_1x128(64, 7168, 0, 64, false);  // 16-byte loads
  expect_1x128(33, 200, 0, 33, false);   // H % 8 != 0: scalar, a partial last block
  expect_1x128(20, 320, 0, 20, false);   // 16-byte loads with a partial last block
}

TEST_F(QuantizeTest, PerToken1x128WritesOnlyTheDeviceRangeAndHonoursTheScaleLayout) {
  expect_1x128(50, 512, 7, 29, true);
  expect_1x128(50, 512, 9, 9, false);
}

// Rows of skipped groups (computed apart, e.g. bf16 sinks) keep their codes and scales; the
// others are quantised as always.
TEST_F(QuantizeTest, PerToken1x128LeavesTheRowsOfSkippedGroupsUntouched) {
  const int64_t rows = 8, hidden = 256, blocks = 2;
  const std::vector<uint16_t> x = activations(rows, hidden);
  const std::vector<int32_t> group = {0, 1, 1, 2, 1, 0, 2, 2};
  DeviceBuffer<uint16_t> d_x(x);
  DeviceBuffer<int32_t> d_group(group);
  DeviceBuffer<uint8_t> d_codes(static_cast<size_t>(rows * hidden));
  DeviceBuffer<float> d_scales(static_cast<size_t>(rows * blocks));
  d_codes.poison(0xaa);
  d_scales.poison(0xff);
  launch_gather_quantize_fp8_1x128(d_x.get(), hidden, nullptr, RowRange{rows}, d_codes.get(),
                                   Fp8BlockScales{d_scales.get()}, stream_,
                                   GroupSkip{d_group.get(), 1, 2});
  sync();
  const std::vector<uint8_t> codes = d_codes.download();
  const std::vector<float> scales = d_scales.download();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> fake(static_cast<size_t>(hidden));
    for (int64_t c = 0; c < hidden; ++c) fake[c] = bf16_to_float(x[r * hidden + c]);
    fake_quant_fp8_1x128(fake.data(), hidden);
    int64_t wrong = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = scales[r * blocks + b];
      for (int64_t c = b * 128; c < (b + 1) * 128; ++c) {
        if (group[r] == 1)
          wrong += codes[r * hidden + c] != 0xaa || !std::isnan(scale);
        else
          wrong += !check_element(bf16_to_float(x[r * hidden + c]), scale, codes[r * hidden + c],
                                  fake[c])
                        .empty();
      }
    }
    EXPECT_EQ(wrong, 0) << "row " << r << " of group " << group[r];
  }
}

// With a staging area (rows >= 2 x tokens) each token is quantised once and copied to its rows:
// the bytes of the fused gather-quantisation, codes and MN-major scales, for every kept row; rows
// without a token, of skipped groups or outside the device range untouched. With fewer rows than
// twice the tokens the staging area is not used.
TEST_F(QuantizeTest, PerToken1x128ThroughStagingWritesTheFusedGathersBytes) {
  for (const auto& [tokens, rows, hidden] :
       {std::array<int64_t, 3>{37, 150, 7168}, std::array<int64_t, 3>{5, 16, 384},
        std::array<int64_t, 3>{20, 39, 256}}) {
    SCOPED_TRACE(testing::Message() << "T=" << tokens << " R=" << rows << " H=" << hidden);
    const int64_t blocks = hidden / 128, begin = 3, end = rows - 2;
    const std::vector<uint16_t> x = activations(tokens, hidden);
    std::vector<int32_t> source(static_cast<size_t>(rows)), group(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      source[r] = r % 9 == 4 ? -1 : int32_t((r * 7) % tokens);
      group[r] = int32_t(r % 5);
    }
    DeviceBuffer<uint16_t> d_x(x);
    DeviceBuffer<int32_t> d_source(source), d_group(group);
    DeviceBuffer<int64_t> d_range(std::vector<int64_t>{begin, end});
    const RowRange range{rows, d_range.get(), d_range.get() + 1};
    DeviceBuffer<uint8_t> fused_codes(static_cast<size_t>(rows * hidden)),
        staged_codes(static_cast<size_t>(rows * hidden));
    DeviceBuffer<float> fused_scales(static_cast<size_t>(rows * blocks)),
        staged_scales(static_cast<size_t>(rows * blocks));
    DeviceBuffer<uint8_t> staging(gather_quantize_fp8_staging_bytes(tokens, hidden));
    for (auto* b : {&fused_codes, &staged_codes, &staging}) b->poison(0xaa);
    for (auto* b : {&fused_scales, &staged_scales}) b->poison(0xff);
    const GroupSkip skip{d_group.get(), 2, 3};
    launch_gather_quantize_fp8_1x128(d_x.get(), hidden, d_source.get(), range, fused_codes.get(),
                                     {fused_scales.get(), 1, rows}, stream_, skip);
    launch_gather_quantize_fp8_1x128(d_x.get(), hidden, d_source.get(), range, staged_codes.get(),
                                     {staged_scales.get(), 1, rows}, stream_, skip,
                                     Fp8Staging{staging.get(), tokens});
    sync();
    EXPECT_EQ(staged_codes.download(), fused_codes.download());
    const std::vector<float> want = fused_scales.download(), got = staged_scales.download();
    ASSERT_EQ(got.size(), want.size());
    int64_t kept = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << "scale " << i;
      if (std::isnan(want[i])) continue;
      EXPECT_EQ(got[i], want[i]) << "scale " << i;
      ++kept;
    }
    EXPECT_GT(kept, 0);
    const std::vector<uint8_t> staged = staging.download();
    const bool used = std::any_of(staged.begin(), staged.begin() + tokens * hidden,
                                  [](uint8_t b) { return b != 0xaa; });
    EXPECT_EQ(used, rows >= 2 * tokens);
  }
}

TEST_F(QuantizeTest, PerTensorDynamicTakesTheAmaxOfTheRangeOnly) {
  // Above 2^16 elements (max_rows x H): zero the amax, reduce over many blocks, quantise.
  expect_tensor(64, 4096, 0, 64, true);
  expect_tensor(700, 100, 5, 690, true);  // scalar loads (H % 8 != 0)
  // Up to 2^16: one block and one launch.
  expect_tensor(64, 1024, 3, 60, true);  // exactly 2^16, 16-byte loads
  expect_tensor(40, 100, 5, 31, true);   // scalar loads
  expect_tensor(16, 256, 3, 3, true);    // no rows: scale 1e-10 / 448 as the reference
}

TEST_F(QuantizeTest, PerTensorStaticUsesTheGivenScale) {
  expect_tensor(64, 4096, 0, 64, false);
  expect_tensor(40, 100, 2, 39, false);
}

TEST_F(QuantizeTest, PerTensorFromF32ValuesMatchesTheReferenceOnTheUnroundedValues) {
  expect_tensor(64, 4096, 0, 64, true, true);
  expect_tensor(40, 100, 5, 31, true, true);   // scalar loads, one block
  expect_tensor(32, 2048, 1, 30, true, true);  // 16-byte loads, one block
  expect_tensor(64, 1024, 3, 60, false, true);
}

}  // namespace
}  // namespace moe::gpu
