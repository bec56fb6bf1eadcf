// Row permutations of a matrix stack: gather/scatter by an index map, the w31 half swap and the
// gated row interleave. Index maps are always dst -> src: out row d = in row map[d]; the same map
// applied as a scatter (out row map[d] = in row d) is the inverse.
#pragma once

#include <cstdint>
#include <vector>

#include "matrix_stack.hpp"

namespace moe::trtllm {

using RowMap = std::vector<int64_t>;  // (rows): dst row -> src row, a permutation

// out[b, d, :] = in[b, map[d], :] for every matrix b. `map` must be a permutation of [0, rows).
Bytes gather_rows(ByteSpan in, const MatrixStack& s, const RowMap& map);
// out[b, map[d], :] = in[b, d, :]: the inverse of gather_rows with the same map.
Bytes scatter_rows(ByteSpan in, const MatrixStack& s, const RowMap& map);

// w31 order: (2I, K) rows [gate; up] -> [up; gate]. Its own inverse. Needs an even row count.
RowMap w31_row_map(int64_t rows);
Bytes swap_halves(ByteSpan in, const MatrixStack& s);

// Gated interleave for fused-activation GEMMs: (2I, K) -> (2I, K) with out[2i] = in[i],
// out[2i+1] = in[I+i]. Needs an even row count.
RowMap interleave_row_map(int64_t rows);
Bytes interleave_gated_rows(ByteSpan in, const MatrixStack& s);
Bytes deinterleave_gated_rows(ByteSpan in, const MatrixStack& s);

}  // namespace moe::trtllm
