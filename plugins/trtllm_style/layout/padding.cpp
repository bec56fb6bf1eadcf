#include "padding.hpp"

#include <cstring>
#include <numeric>

#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "scale_swizzle.hpp"  // round_up

namespace moe::trtllm {

namespace {}  // namespace

void check_padded_intermediate(const LayerShape& s, int64_t padded) {
  const int64_t i = s.intermediate;
  MOE_CHECK(padded >= i, MOE_STATUS_INVALID_ARGUMENT,
            "intermediate padding: cannot pad I={} down to {}", i, padded);
  MOE_CHECK(!is_fp4(s.format) || (i % 2 == 0 && padded % 2 == 0), MOE_STATUS_INVALID_ARGUMENT,
            "intermediate padding: {} packs two values per byte, I={} and padded {} must be even",
            format_name(s.format), i, padded);
  // A scale block spanning several rows of w13 must not hold both gate and up rows.
  const FormatSpec& f = format_spec(s.format);
  const int64_t block = f.scale_block_rows;
  const bool straddles = block > 1 && (i % block != 0 || padded % block != 0);
  MOE_CHECK(!(s.gated && padded != i && straddles), MOE_STATUS_UNSUPPORTED,
            "intermediate padding: {} cannot pad I={} to {} for a gated activation: a {}x{} scale "
            "block of w13 would hold both gate and up rows; I and the padded size must be "
            "multiples of {}",
            f.name, i, padded, block, f.scale_block_k, block);
}

namespace {

// `t` resized to the rows and cols of `target`; `halves` resizes the two row halves apart.
LayoutTensor resize_to(const LayoutTensor& t, const LayoutTensor& target, bool halves,
                       const char* name) {
  if (!t.present()) return {};
  const MatrixStack& s = t.shape;
  if (s.rows == target.shape.rows && s.cols == target.shape.cols) return t;
  LayoutTensor out{t.dtype, {s.batch, target.shape.rows, target.shape.cols, s.elem_bytes}, {}};
  if (!halves) {
    out.bytes = resize_matrices(t.bytes, s, out.shape.rows, out.shape.cols);
    return out;
  }
  MOE_CHECK(s.rows % 2 == 0 && out.shape.rows % 2 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: gate/up halves need even row counts, got {} -> {}", name, s.rows, out.shape.rows);
  // (E, 2h, K) is (2E, h, K): each half is its own matrix.
  const MatrixStack split{2 * s.batch, s.rows / 2, s.cols, s.elem_bytes};
  out.bytes = resize_matrices(t.bytes, split, out.shape.rows / 2, out.shape.cols);
  return out;
}

LayerTensors resize_intermediate(const LayerShape& s, const LayerTensors& t, int64_t from,
                                 int64_t to) {
  check_canonical_tensors(t, s, from);
  const LayerTensors out = canonical_shapes(s, to);

  // fp8_tensor's per-expert scalar and fp8_block's block rows of a non-gated w13 resize whole.
  const bool scale_halves = s.gated && s.format != MOE_FORMAT_FP8_TENSOR;
  LayerTensors r;
  r.w13 = resize_to(t.w13, out.w13, s.gated, "w13");
  r.w13_scale = resize_to(t.w13_scale, out.w13_scale, scale_halves, "w13_scale");
  r.w2 = resize_to(t.w2, out.w2, false, "w2");
  r.w2_scale = resize_to(t.w2_scale, out.w2_scale, false, "w2_scale");
  r.b13 = resize_to(t.b13, bias_geometry(t.b13, out.w13.shape.rows), s.gated, "b13");
  r.b2 = t.b2;
  return r;
}

}  // namespace

int64_t intermediate_alignment(moe_format format, bool gated) {
  // w2's columns (= I) one scale covers: padding keeps whole blocks.
  return std::lcm(gated ? int64_t(16) : int64_t(128), k_granularity(format_spec(format)));
}

int64_t padded_intermediate(const LayerShape& s, int64_t multiple) {
  MOE_CHECK(multiple >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "intermediate padding: multiple={} must be >= 0", multiple);
  if (multiple == 0) multiple = intermediate_alignment(s.format, s.gated);
  return round_up(s.intermediate, multiple);
}

Bytes resize_matrices(ByteSpan in, const MatrixStack& s, int64_t new_rows, int64_t new_cols) {
  check_stack(in, s, "resize");
  MOE_CHECK(new_rows >= 0 && new_cols >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "resize: new extents ({}, {}) must be >= 0", new_rows, new_cols);
  const MatrixStack o{s.batch, new_rows, new_cols, s.elem_bytes};
  Bytes out(size_t(checked_bytes(o, "resize")), 0);
  const int64_t rows = std::min(s.rows, new_rows);
  const size_t row = size_t(std::min(s.cols, new_cols) * s.elem_bytes);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.data() + row_offset(o, b, r), in.data() + row_offset(s, b, r), row);
  return out;
}

LayerTensors pad_intermediate(const LayerShape& s, const LayerTensors& t, int64_t padded) {
  check_padded_intermediate(s, padded);
  return resize_intermediate(s, t, s.intermediate, padded);
}

LayerTensors unpad_intermediate(const LayerShape& s, const LayerTensors& t, int64_t padded) {
  check_padded_intermediate(s, padded);
  return resize_intermediate(s, t, padded, s.intermediate);
}

}  // namespace moe::trtllm
