#include "layer_tensors.hpp"

#include <cstring>
#include <utility>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::trtllm {

namespace {

int64_t elem_bytes(moe_dtype dtype) {
  return int64_t(dtype_size(dtype));
}

LayoutTensor empty_tensor(moe_dtype dtype, MatrixStack s) {
  return {dtype, s, {}};
}

// A weight matrix (rows, cols) of the format and its scales, stacked over `experts`; no bytes.
void matrix_geometry(moe_format format, int64_t experts, int64_t rows, int64_t cols,
                     LayoutTensor& q, LayoutTensor& scale) {
  const MatrixLayout m = matrix_layout(format, rows, cols);
  q = empty_tensor(m.dtype, {experts, m.rows, m.stored_cols, elem_bytes(m.dtype)});
  if (m.scale_dtype == MOE_DTYPE_INVALID) {
    scale = {};
  } else if (m.scale_rows == 0) {  // one scalar per expert
    scale = empty_tensor(m.scale_dtype, {experts, 1, 1, elem_bytes(m.scale_dtype)});
  } else {
    scale = empty_tensor(m.scale_dtype,
                         {experts, m.scale_rows, m.scale_cols, elem_bytes(m.scale_dtype)});
  }
}

TensorView view_tensor(const moe_tensor& t, const LayoutTensor& geometry) {
  TensorView out{static_cast<moe_dtype>(t.dtype), geometry.shape, {}};
  out.shape.elem_bytes = elem_bytes(out.dtype);
  out.bytes = ByteSpan(static_cast<const uint8_t*>(t.data), size_t(out.shape.bytes()));
  return out;
}

TensorView view_bias(const moe_tensor& t, const char* name, int64_t experts, int64_t rows) {
  if (t.data == nullptr) return {};
  const moe_dtype dt = t.dtype == MOE_DTYPE_F32 ? MOE_DTYPE_F32 : MOE_DTYPE_BF16;
  sdk::check_tensor(t, name, dt, {experts, rows});
  return view_tensor(t, {dt, {experts, rows, 1, elem_bytes(dt)}, {}});
}

}  // namespace

LayerShape layer_shape(const moe_problem& p) {
  return {static_cast<moe_format>(p.format), is_gated(static_cast<moe_activation>(p.activation)),
          p.local_experts, p.hidden, p.intermediate};
}

LayerTensors canonical_shapes(const LayerShape& s, int64_t intermediate) {
  MOE_CHECK(s.experts >= 0 && s.hidden > 0 && intermediate > 0, MOE_STATUS_INVALID_ARGUMENT,
            "layer shape: experts={}, hidden={}, intermediate={} must be positive", s.experts,
            s.hidden, intermediate);
  const int64_t r13 = s.gated ? 2 * intermediate : intermediate;
  LayerTensors t;
  matrix_geometry(s.format, s.experts, r13, s.hidden, t.w13, t.w13_scale);
  matrix_geometry(s.format, s.experts, s.hidden, intermediate, t.w2, t.w2_scale);
  return t;
}

LayerTensors canonical_geometry(const LayerShape& s, int64_t intermediate) {
  LayerTensors t = canonical_shapes(s, intermediate);
  for (LayoutTensor* x : {&t.w13, &t.w13_scale, &t.w2, &t.w2_scale})
    if (x->present()) x->bytes.assign(size_t(x->shape.bytes()), 0);
  return t;
}

TensorView view_of(const LayoutTensor& t) {
  return {t.dtype, t.shape, ByteSpan(t.bytes)};
}

LayerView view_of(const LayerTensors& t) {
  return {view_of(t.w13),      view_of(t.w13_scale), view_of(t.w2),
          view_of(t.w2_scale), view_of(t.b13),       view_of(t.b2)};
}

LayerView view_canonical(const LayerShape& s, const moe_weights& w) {
  const LayerTensors g = canonical_shapes(s, s.intermediate);
  const bool scalar_scales = s.format == MOE_FORMAT_FP8_TENSOR;  // canonical shape [E]
  auto view_matrix = [&](const moe_tensor& t, const LayoutTensor& geo, const char* name,
                         bool scalar) {
    if (!geo.present()) return TensorView{};
    const MatrixStack& m = geo.shape;
    if (scalar)
      sdk::check_tensor(t, name, geo.dtype, {m.batch});
    else
      sdk::check_tensor(t, name, geo.dtype, {m.batch, m.rows, m.cols});
    return view_tensor(t, geo);
  };
  LayerView v;
  v.w13 = view_matrix(w.w13, g.w13, "w13", false);
  v.w13_scale = view_matrix(w.w13_scale, g.w13_scale, "w13_scale", scalar_scales);
  v.w2 = view_matrix(w.w2, g.w2, "w2", false);
  v.w2_scale = view_matrix(w.w2_scale, g.w2_scale, "w2_scale", scalar_scales);
  v.b13 = view_bias(w.b13, "b13", s.experts, g.w13.shape.rows);
  v.b2 = view_bias(w.b2, "b2", s.experts, s.hidden);
  return v;
}

LayoutTensor expected_bias(moe_dtype dtype, bool present, int64_t experts, int64_t rows,
                           const char* name) {
  if (!present) return {};
  MOE_CHECK(dtype == MOE_DTYPE_BF16 || dtype == MOE_DTYPE_F32, MOE_STATUS_DTYPE_MISMATCH,
            "{}: expected dtype bf16 or f32, got {}", name, dtype_name(dtype));
  return {dtype, {experts, rows, 1, elem_bytes(dtype)}, {}};
}

void check_layout_tensor(const TensorView& t, const LayoutTensor& expected, const char* name) {
  MOE_CHECK(t.dtype == expected.dtype, MOE_STATUS_DTYPE_MISMATCH, "{}: expected dtype {}, got {}",
            name, dtype_name(expected.dtype), dtype_name(t.dtype));
  if (!expected.present()) return;
  const MatrixStack &a = t.shape, &b = expected.shape;
  MOE_CHECK(a.batch == b.batch && a.rows == b.rows && a.cols == b.cols &&
                a.elem_bytes == b.elem_bytes && int64_t(t.bytes.size()) == a.bytes(),
            MOE_STATUS_SHAPE_MISMATCH, "{}: expected {} ({} bytes), got {} ({} bytes)", name,
            to_string(b), b.bytes(), to_string(a), t.bytes.size());
}

void check_layout_tensor(const LayoutTensor& t, const LayoutTensor& expected, const char* name) {
  check_layout_tensor(view_of(t), expected, name);
}

}  // namespace moe::trtllm
