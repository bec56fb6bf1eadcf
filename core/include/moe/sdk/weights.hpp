// Geometry of the canonical weight tensors (docs/design.md §3) and their validation against a
// problem. One place decides what shape and dtype every weight and scale has.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "moe/abi/moe_abi.h"

namespace moe {

// Every tensor of moe_weights by the name the C API, Python and the error messages use.
using WeightField = moe_tensor moe_weights::*;
inline constexpr std::array<std::pair<const char*, WeightField>, 18> kWeightFields = {{
    {"w13", &moe_weights::w13},
    {"w13_scale", &moe_weights::w13_scale},
    {"w13_scale_2", &moe_weights::w13_scale_2},
    {"w2", &moe_weights::w2},
    {"w2_scale", &moe_weights::w2_scale},
    {"w2_scale_2", &moe_weights::w2_scale_2},
    {"b13", &moe_weights::b13},
    {"b2", &moe_weights::b2},
    {"a13_scale", &moe_weights::a13_scale},
    {"a2_scale", &moe_weights::a2_scale},
    {"shared_w13", &moe_weights::shared_w13},
    {"shared_w13_scale", &moe_weights::shared_w13_scale},
    {"shared_w13_scale_2", &moe_weights::shared_w13_scale_2},
    {"shared_w2", &moe_weights::shared_w2},
    {"shared_w2_scale", &moe_weights::shared_w2_scale},
    {"shared_w2_scale_2", &moe_weights::shared_w2_scale_2},
    {"sink_w13", &moe_weights::sink_w13},
    {"sink_w2", &moe_weights::sink_w2},
}};

// One matrix [rows, cols] (K = cols contiguous) of a format: how its elements and scales are
// stored. Shapes are per matrix; the expert dimension comes in front.
struct MatrixLayout {
  moe_dtype dtype;  // element dtype
  int64_t rows;
  int64_t stored_cols;    // cols, or cols/2 bytes for packed fp4
  moe_dtype scale_dtype;  // MOE_DTYPE_INVALID = no scale
  int64_t scale_rows;     // fp8_tensor: 0 (one scalar per matrix)
  int64_t scale_cols;
  bool has_scale_2;  // nvfp4: an fp32 global scale per matrix
};

MatrixLayout matrix_layout(moe_format format, int64_t rows, int64_t cols);

// Elements of one matrix's scales (1 for fp8_tensor, 0 without scales).
int64_t scale_count(const MatrixLayout& m);

// Checks every tensor of `w` against the (normalised, validated) problem: presence or absence,
// dtype, shape, contiguity. Throws moe::Error naming the tensor and the expected shape.
void check_weights(const moe_problem& problem, const moe_weights& w);

}  // namespace moe
