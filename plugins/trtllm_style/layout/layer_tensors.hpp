// The per-expert tensors of one MoE layer as the layout transforms see them: byte buffers with
// a dtype and a (batch = experts, rows, cols) shape. Canonical shapes follow docs/design.md §3;
// R13 = 2I for gated activations (rows [gate; up]) and I for relu2; K13 = H, stored as H/2
// bytes for packed fp4. nvfp4's per-expert scale_2 and the activation scales are scalars the
// layout never touches, so they are not carried here.
#pragma once

#include <cstdint>

#include "matrix_stack.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/format_table.hpp"

namespace moe::trtllm {

struct LayerShape {
  moe_format format = MOE_FORMAT_BF16;
  bool gated = true;
  int64_t experts = 0;       // E held here (local experts under EP)
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I
};

// One scale row per weight row (mxfp8, mxfp4, nvfp4): the scales move with the rows. fp8_block
// has one per 128 rows, fp8_tensor one per matrix, bf16 none.
inline bool has_row_scales(moe_format f) {
  return format_spec(f).scale_block_rows == 1;
}

// From a normalised problem: its format, activation, local_experts, hidden and intermediate.
LayerShape layer_shape(const moe_problem& problem);

struct LayoutTensor {
  moe_dtype dtype = MOE_DTYPE_INVALID;  // MOE_DTYPE_INVALID = absent
  MatrixStack shape;                    // (E, rows, cols), cols in stored elements
  Bytes bytes;                          // shape.bytes() bytes, owned

  bool present() const { return dtype != MOE_DTYPE_INVALID; }
};

struct LayerTensors {
  LayoutTensor w13;        // (E, R13, K13)
  LayoutTensor w13_scale;  // fp8_tensor (E, 1, 1) f32; fp8_block (E, ceil(R13/128),
                           // ceil(H/128)) f32; mx* (E, R13, ceil(H/32)) ue8m0;
                           // nvfp4 (E, R13, ceil(H/16)) e4m3; absent for bf16
  LayoutTensor w2;         // (E, H, I), I/2 bytes for fp4
  LayoutTensor w2_scale;   // like w13_scale for the (H, I) matrix
  LayoutTensor b13;        // (E, R13, 1) bf16|f32, optional
  LayoutTensor b2;         // (E, H, 1) bf16|f32, optional
};

// A tensor borrowed from the caller (moe_weights, or a LayerTensors that outlives the view):
// prepare() reads canonical weights through these and never copies them first.
struct TensorView {
  moe_dtype dtype = MOE_DTYPE_INVALID;  // MOE_DTYPE_INVALID = absent
  MatrixStack shape;
  ByteSpan bytes;

  bool present() const { return dtype != MOE_DTYPE_INVALID; }
};

struct LayerView {
  TensorView w13, w13_scale, w2, w2_scale, b13, b2;  // as in LayerTensors
};

TensorView view_of(const LayoutTensor& t);
LayerView view_of(const LayerTensors& t);

// A bias's geometry with `rows` rows: (E, rows, 1) in the dtype the caller chose; no bytes.
// Absent stays absent. `T` is a LayoutTensor or a TensorView.
template <class T>
LayoutTensor bias_geometry(const T& b, int64_t rows) {
  if (!b.present()) return {};
  return {b.dtype, {b.shape.batch, rows, 1, b.shape.elem_bytes}, {}};
}

// Shapes and dtypes of the canonical tensors of `shape` with intermediate size `intermediate`
// (the padded size gives the padded geometry), with empty buffers: nothing is allocated. Biases
// come back absent: their dtype is the caller's choice, their shapes are (E, R13, 1) and (E, H, 1).
LayerTensors canonical_shapes(const LayerShape& shape, int64_t intermediate);
// canonical_shapes() with every present tensor's bytes allocated and zeroed.
LayerTensors canonical_geometry(const LayerShape& shape, int64_t intermediate);

// Checks the routed-expert tensors of `w` against `shape` (dtype, shape, contiguity; errors name
// the tensor and both shapes) and returns views of them, biases included when present.
LayerView view_canonical(const LayerShape& shape, const moe_weights& w);

// Throws SHAPE_MISMATCH / DTYPE_MISMATCH naming `name` when `t` does not have `expected`'s dtype
// and shape, or its byte count is wrong.
void check_layout_tensor(const TensorView& t, const LayoutTensor& expected, const char* name);
void check_layout_tensor(const LayoutTensor& t, const LayoutTensor& expected, const char* name);

// What a present bias of a layer of `experts` experts must be: bf16 or f32 (DTYPE_MISMATCH
// naming `name` otherwise), (experts, rows, 1) of that dtype's size. Absent stays absent.
LayoutTensor expected_bias(moe_dtype dtype, bool present, int64_t experts, int64_t rows,
                           const char* name);

// Checks every tensor of `t` (a LayerTensors or a LayerView) against the canonical geometry of
// `shape` with intermediate size `intermediate` (check_layout_tensor, by name).
template <class Tensors>
void check_canonical_tensors(const Tensors& t, const LayerShape& shape, int64_t intermediate) {
  const LayerTensors g = canonical_shapes(shape, intermediate);
  check_layout_tensor(t.w13, g.w13, "w13");
  check_layout_tensor(t.w13_scale, g.w13_scale, "w13_scale");
  check_layout_tensor(t.w2, g.w2, "w2");
  check_layout_tensor(t.w2_scale, g.w2_scale, "w2_scale");
  check_layout_tensor(
      t.b13, expected_bias(t.b13.dtype, t.b13.present(), shape.experts, g.w13.shape.rows, "b13"),
      "b13");
  check_layout_tensor(
      t.b2, expected_bias(t.b2.dtype, t.b2.present(), shape.experts, shape.hidden, "b2"), "b2");
}

}  // namespace moe::trtllm
