// What the conventions' writers share (export_layer): the layer's sizes and the tensor surgery
// that undoes the readers', so that load_layer(export_layer(w)) == w byte for byte.
#pragma once

#include <string>
#include <vector>

#include "conventions.hpp"

namespace moe::detail {

// The sizes a writer walks: a whole layer, since export_layer writes no TP or EP pieces.
struct Layout {
  moe_format format;
  int64_t experts, inter, hidden;
  bool gated;
};

Layout layout_of(const moe_problem& p);

// One projection as `base`.weight plus its scales under the format table's checkpoint names
// (the mirror of read_projection).
void put_projection(std::vector<NamedTensor>& out, const std::string& base, const Matrix& m);

// Same-shaped per-expert tensors as one [parts.size(), ...] tensor.
HostTensor stack(const std::vector<HostTensor>& parts);

// Row e of a bias stack [E, n] (bf16 or f32) as floats.
std::vector<float> bias_row(const HostTensor& t, int64_t e, int64_t n);

// [a0, b0, a1, b1, ...] as f32 [2n].
HostTensor interleave_vector(const float* a, const float* b, int64_t n);

// Matrix `index` (-1: an unstacked tensor) of fused gate/up rows [2 * half_rows, cols], its
// halves' rows interleaved [g0, u0, g1, u1, ...]; `what` names the tensor in refusals.
Matrix interleaved_halves(moe_format format, int64_t half_rows, int64_t cols, const HostTensor& q,
                          const HostTensor& scale, const HostTensor& scale_2, int64_t index,
                          const std::string& what);

// Expert e's w13 [2I, H] with gate and up rows interleaved [g0, u0, g1, u1, ...], and its b13 row
// likewise (f32 [2I]): how gpt_oss and interleaved stacked checkpoints store them.
Matrix interleaved_w13(const LayerWeights& w, const Layout& g, int64_t e);
HostTensor interleaved_b13(const LayerWeights& w, const Layout& g, int64_t e);

}  // namespace moe::detail
