// The boundary to the nvcc-compiled reorder of bf16 and e4m3 stacks into prepared chunks
// (kernels/chunk_layout.hpp; bf16's default, e4m3 with MOE_MEGA_CHUNKS=1): plain types, no
// exceptions.
#pragma once

#include <cstdint>

namespace moe::mega::detail {

// A stack's geometry as kernels::ChunkStack holds it (its K stages follow from row_bytes).
struct ChunkShape {
  int64_t rows_per_expert;  // n1 (W13) or H (W2)
  int64_t row_bytes;        // K x the element's bytes, a multiple of 128
  int64_t up_row;           // gated W13: I; otherwise 0
  int64_t slices;           // work items an expert has
};

// `stack` ([experts][rows_per_expert][row_bytes] on the device) into its chunks in place, an
// expert at a time (an expert's chunks fill exactly its own rows' bytes), through a scratch
// buffer of one expert, on the default stream, synchronised: the layer's stack is never held
// twice. nullptr on success, else what failed.
const char* reorder_to_chunks(void* stack, const ChunkShape& shape, int64_t experts) noexcept;

}  // namespace moe::mega::detail
