// One-pass form of prepare()'s steps for one tensor: every prepared byte is written once, read
// straight from the canonical bytes. Padding I, the w31 swap, the gated interleave and the row
// shuffle each map a destination row to a source row (or to a zero row, for padding), so they
// compose into one map; padding along K (w2's columns) copies the first bytes of a row and zeroes
// the rest; BlockMajorK and the 128x4 scale swizzle only decide where a row's bytes land. The
// step functions (padding, row_ops, row_shuffle, scale_swizzle, block_major) stay the definition:
// tests check that a plan writes what they write one after the other.
#pragma once

#include <cstdint>
#include <span>

#include "matrix_stack.hpp"
#include "row_ops.hpp"

namespace moe::trtllm {

constexpr int64_t kZeroRow = -1;  // in a gather map: the destination row is all zeros

// The map of gathering by `first`, then by `second` (second's rows index first's output):
// out[d] = first[second[d]], kZeroRow staying kZeroRow.
RowMap compose(const RowMap& first, const RowMap& second);

// How one prepared tensor is written from its canonical source.
struct GatherPlan {
  MatrixStack src;       // canonical (batch, rows, cols)
  MatrixStack dst;       // prepared logical shape: same batch and element size
  RowMap rows;           // (dst.rows): dst row -> src row or kZeroRow
  int64_t block_k = 0;   // > 0: stored BlockMajorK with slabs of block_k elements
  bool swizzle = false;  // stored in the 128x4 scale layout (zero-padded to 128 rows, 4 cols)
};

// Bytes of the prepared tensor as stored (the swizzled layout is padded).
int64_t stored_bytes(const GatherPlan& plan);

// A plan with its input, and the buffer run_gathers() allocates and fills.
struct GatherJob {
  GatherPlan plan;
  ByteSpan src;  // src.bytes() bytes, borrowed
  Bytes* out;    // becomes stored_bytes(plan) bytes
};

// Checks every plan (throws INVALID_ARGUMENT / SHAPE_MISMATCH), allocates each output once
// (uninitialised: the plan writes every byte) and fills them on moe::parallel_for, in tasks of a
// few MiB of output rows, so experts and large matrices alike spread over the threads.
void run_gathers(std::span<GatherJob> jobs);

// One plan: the prepared bytes.
Bytes gather(const GatherPlan& plan, ByteSpan src);

// The output bytes one task writes (default 4 MiB; tasks are whole 128-row tiles at least).
// Tests lower it so that small matrices are split across tasks too. Returns the previous value.
int64_t set_gather_task_bytes(int64_t bytes);

}  // namespace moe::trtllm
