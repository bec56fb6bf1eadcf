// The format table (moe/sdk/format_table.hpp): its rows agree with the codecs and the canonical
// geometry they stand for, and every lookup goes through it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {
namespace {

TEST(FormatTable, RowsFollowTheEnumAndParseBack) {
  const auto table = format_table();
  ASSERT_EQ(table.size(), 6u);
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(table[i].format, static_cast<moe_format>(i));
    EXPECT_EQ(parse_format(table[i].name), table[i].format);
    EXPECT_EQ(&format_spec(table[i].format), &table[i]);
  }
}

TEST(FormatTable, AnUnknownFormatIsRefusedWithTheFormatReason) {
  const auto unknown = static_cast<moe_format>(format_table().size());
  EXPECT_EQ(find_format(unknown), nullptr);
  try {
    format_spec(unknown);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Refusal& e) {
    EXPECT_EQ(e.reason(), MOE_REASON_FORMAT);
    EXPECT_THAT(e.what(), testing::HasSubstr("format=6 is not a weight format this build knows"));
  }
}

// The geometry the rows imply for a [300, 520] matrix, written out by hand from §3.
TEST(FormatTable, GeometryMatchesTheCanonicalLayouts) {
  struct Expected {
    moe_format format;
    moe_dtype dtype;
    int64_t stored_cols, scale_rows, scale_cols, scale_count, k_granularity;
    moe_input_format natural;
  };
  const Expected rows[] = {
      {MOE_FORMAT_BF16, MOE_DTYPE_BF16, 520, 0, 0, 0, 1, MOE_INPUT_BF16},
      {MOE_FORMAT_FP8_TENSOR, MOE_DTYPE_E4M3, 520, 0, 0, 1, 1, MOE_INPUT_FP8_TENSOR_DYNAMIC},
      {MOE_FORMAT_FP8_BLOCK, MOE_DTYPE_E4M3, 520, 3, 5, 15, 128, MOE_INPUT_FP8_1X128},
      {MOE_FORMAT_MXFP8, MOE_DTYPE_E4M3, 520, 300, 17, 300 * 17, 32, MOE_INPUT_MXFP8},
      {MOE_FORMAT_MXFP4, MOE_DTYPE_E2M1X2, 260, 300, 17, 300 * 17, 32, MOE_INPUT_BF16},
      {MOE_FORMAT_NVFP4, MOE_DTYPE_E2M1X2, 260, 300, 33, 300 * 33, 16, MOE_INPUT_BF16},
  };
  for (const auto& e : rows) {
    SCOPED_TRACE(format_name(e.format));
    const MatrixLayout m = matrix_layout(e.format, 300, 520);
    EXPECT_EQ(m.dtype, e.dtype);
    EXPECT_EQ(m.stored_cols, e.stored_cols);
    EXPECT_EQ(m.scale_rows, e.scale_rows);
    EXPECT_EQ(m.scale_cols, e.scale_cols);
    EXPECT_EQ(scale_count(m), e.scale_count);
    EXPECT_EQ(m.has_scale_2, e.format == MOE_FORMAT_NVFP4);
    EXPECT_EQ(k_granularity(format_spec(e.format)), e.k_granularity);
    EXPECT_EQ(format_spec(e.format).natural_input, e.natural);
    moe_problem p = default_problem();
    p.format = e.format;
    normalize_problem(p);
    EXPECT_EQ(p.input_format, e.natural);
  }
}

// quantize_matrix and dequantize_matrix through the table equal the codecs called directly.
TEST(FormatTable, CodecsThroughTheTableEqualTheDirectCodecs) {
  const int64_t rows = 4, cols = 64;
  std::vector<float> w(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 23) - 11) * 0.37f;
  for (const FormatSpec& f : format_table()) {
    SCOPED_TRACE(f.name);
    const MatrixLayout m = matrix_layout(f.format, rows, cols);
    std::vector<uint8_t> q(rows * m.stored_cols * dtype_size(m.dtype));
    std::vector<uint8_t> s(std::max<int64_t>(1, scale_count(m)) * 4);
    float s2 = 0;
    quantize_matrix(f.format, w.data(), rows, cols, q.data(), s.data(), &s2);
    std::vector<double> via_table(rows * cols), direct(rows * cols);
    dequantize_matrix(f.format, q.data(), s.data(), s2, rows, cols, via_table.data());
    f.dequantize(q.data(), s.data(), s2, rows, cols, direct.data());
    EXPECT_EQ(via_table, direct);
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(via_table[i], w[i], f.format == MOE_FORMAT_BF16 ? 0.02 : 1.1) << i;
  }
}

}  // namespace
}  // namespace moe
