// Intermediate padding: I grows to a padded size P with zeros in every tensor whose extent
// follows I: w13 rows (per half when gated: gate rows I -> P, then up rows I -> P), w2 columns,
// b13, and the scales that follow those rows and columns. Zero weights contribute nothing, so
// the layer computes the same function; unpad crops back to the canonical bytes.
//
// NOTES: scale blocks. Padding only appends: every existing scale block keeps the rows and
// columns it covered, and a partial last block along I just gains zero elements. Per-row scales
// (mxfp8, mxfp4, nvfp4) pad like their weight rows; scale columns of w2 go from ceil(I/b) to
// ceil(P/b) with zero scales (b = 32 mx, 16 nv). The one layout padding cannot keep consistent
// is fp8_block with a gated activation and I % 128 != 0: one 128-row scale block of w13 then
// holds gate and up rows together, and padding each half apart would need two scales in one
// block; that is refused (as are the w31 swap and interleave of such a w13).
//
// The default padded size is round_up(I, intermediate_alignment(format, gated)): the multiple 16
// (gated: 2P rows fill whole 32-row shuffle blocks) or 128 (non-gated), raised to the format's
// scale block along I (fp8_block 128, mx 32, nvfp4 16) so that no scale block along I is partial
// in the prepared layout.
#pragma once

#include <cstdint>

#include "layer_tensors.hpp"
#include "matrix_stack.hpp"

namespace moe::trtllm {

// lcm(gated ? 16 : 128, scale block of the format along I).
int64_t intermediate_alignment(moe_format format, bool gated);

// round_up(I, multiple); multiple = 0 means intermediate_alignment(format, gated).
int64_t padded_intermediate(const LayerShape& shape, int64_t multiple = 0);

// Each matrix (rows, cols) of the stack -> (new_rows, new_cols): the common top-left part is
// copied, new elements are zero, elements beyond the new extents are dropped.
Bytes resize_matrices(ByteSpan in, const MatrixStack& s, int64_t new_rows, int64_t new_cols);

// Throws INVALID_ARGUMENT when padded < I or an fp4 size is odd, UNSUPPORTED for the fp8_block
// case above; both sizes are named.
void check_padded_intermediate(const LayerShape& shape, int64_t padded);

// Canonical tensors with intermediate shape.intermediate -> tensors of intermediate `padded`.
// Throws INVALID_ARGUMENT when padded < I or an fp4 size is odd, UNSUPPORTED for the fp8_block
// case above; both sizes are named.
LayerTensors pad_intermediate(const LayerShape& shape, const LayerTensors& t, int64_t padded);

// Inverse: tensors of intermediate `padded` -> canonical tensors of shape.intermediate.
LayerTensors unpad_intermediate(const LayerShape& shape, const LayerTensors& t, int64_t padded);

}  // namespace moe::trtllm
