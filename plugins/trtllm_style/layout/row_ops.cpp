#include "row_ops.hpp"

#include <cstring>

#include "moe/sdk/error.hpp"

namespace moe::trtllm {

namespace {

void check_map(const RowMap& map, const MatrixStack& s, const char* what) {
  MOE_CHECK(int64_t(map.size()) == s.rows, MOE_STATUS_INVALID_ARGUMENT,
            "{}: row map has {} entries, the matrix has rows={}", what, map.size(), s.rows);
  std::vector<bool> seen(map.size(), false);
  for (int64_t src : map) {
    MOE_CHECK(src >= 0 && src < s.rows && !seen[src], MOE_STATUS_INVALID_ARGUMENT,
              "{}: row map is not a permutation of [0, {}) (entry {})", what, s.rows, src);
    seen[src] = true;
  }
}

void check_even_rows(const MatrixStack& s, const char* what) {
  MOE_CHECK(s.rows % 2 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: needs an even row count (2I rows of [gate; up]), got rows={}", what, s.rows);
}

}  // namespace

Bytes gather_rows(ByteSpan in, const MatrixStack& s, const RowMap& map) {
  check_stack(in, s, "gather_rows");
  check_map(map, s, "gather_rows");
  Bytes out(in.size());
  const size_t row = size_t(s.row_bytes());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t d = 0; d < s.rows; ++d)
      std::memcpy(out.data() + row_offset(s, b, d), in.data() + row_offset(s, b, map[d]), row);
  return out;
}

Bytes scatter_rows(ByteSpan in, const MatrixStack& s, const RowMap& map) {
  check_stack(in, s, "scatter_rows");
  check_map(map, s, "scatter_rows");
  Bytes out(in.size());
  const size_t row = size_t(s.row_bytes());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t d = 0; d < s.rows; ++d)
      std::memcpy(out.data() + row_offset(s, b, map[d]), in.data() + row_offset(s, b, d), row);
  return out;
}

RowMap w31_row_map(int64_t rows) {
  MOE_CHECK(rows % 2 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "w31 swap: needs an even row count (2I rows of [gate; up]), got rows={}", rows);
  const int64_t half = rows / 2;
  RowMap map(static_cast<size_t>(rows));
  for (int64_t d = 0; d < rows; ++d) map[d] = d < half ? d + half : d - half;
  return map;
}

Bytes swap_halves(ByteSpan in, const MatrixStack& s) {
  check_even_rows(s, "w31 swap");
  return gather_rows(in, s, w31_row_map(s.rows));
}

RowMap interleave_row_map(int64_t rows) {
  MOE_CHECK(rows % 2 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "gated interleave: needs an even row count (2I rows of [gate; up]), got rows={}", rows);
  const int64_t half = rows / 2;
  RowMap map(static_cast<size_t>(rows));
  for (int64_t i = 0; i < half; ++i) {
    map[2 * i] = i;
    map[2 * i + 1] = half + i;
  }
  return map;
}

Bytes interleave_gated_rows(ByteSpan in, const MatrixStack& s) {
  check_even_rows(s, "gated interleave");
  return gather_rows(in, s, interleave_row_map(s.rows));
}

Bytes deinterleave_gated_rows(ByteSpan in, const MatrixStack& s) {
  check_even_rows(s, "gated de-interleave");
  return scatter_rows(in, s, interleave_row_map(s.rows));
}

}  // namespace moe::trtllm
