// Row shuffle for the transposed-MMA epilogue (TensorRT-LLM's shuffleMatrixA): within each block
// of B rows (B = 32 when epilogue_tile_m % 128 == 0, else 16), destination row 8*b + a takes
// source row (B/8)*a + b, a in [0, 8), b in [0, B/8). The epilogue of a swapped-AB GEMM writes a
// thread's rows 8 apart, so storing A's rows in this order makes each thread's output rows
// contiguous. Scale rows (one per weight row) take the same gather.
#pragma once

#include <cstdint>

#include "matrix_stack.hpp"
#include "row_ops.hpp"

namespace moe::trtllm {

constexpr int64_t kDefaultEpilogueTileM = 128;

// 32 if epilogue_tile_m % 128 == 0, else 16. epilogue_tile_m must be positive.
int64_t shuffle_block_size(int64_t epilogue_tile_m);

// (rows): dst -> src. Throws UNSUPPORTED when rows is not a multiple of the block size.
RowMap shuffle_row_map(int64_t rows, int64_t epilogue_tile_m);

// (batch, rows, cols) -> same shape, rows permuted within blocks of B; and the inverse.
Bytes shuffle_rows(ByteSpan in, const MatrixStack& s, int64_t epilogue_tile_m);
Bytes unshuffle_rows(ByteSpan in, const MatrixStack& s, int64_t epilogue_tile_m);

}  // namespace moe::trtllm
