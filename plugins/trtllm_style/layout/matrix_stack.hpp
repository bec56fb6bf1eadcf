// MatrixStack: the shape every layout transform works on, a stack of row-major matrices in host
// memory, (batch, rows, cols) elements of `elem_bytes` bytes each. The element size is all a
// transform needs, so one implementation serves weights (e4m3 and packed fp4 bytes: 1, bf16: 2)
// and scales (ue8m0 and e4m3: 1, f32: 4) alike. For packed fp4, `cols` counts bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "byte_alloc.hpp"

namespace moe::trtllm {

// Bytes(n) leaves the bytes uninitialised; Bytes(n, 0) zeroes them (byte_alloc.hpp).
using Bytes = std::vector<uint8_t, CountingAllocator<uint8_t>>;
using ByteSpan = std::span<const uint8_t>;

struct MatrixStack {
  int64_t batch = 1;       // experts (1 for a single matrix)
  int64_t rows = 0;        // M
  int64_t cols = 0;        // K, contiguous
  int64_t elem_bytes = 1;  // bytes of one element

  int64_t row_bytes() const { return cols * elem_bytes; }
  int64_t matrix_bytes() const { return rows * row_bytes(); }
  int64_t bytes() const { return batch * matrix_bytes(); }
};

// "(batch=2, rows=48, cols=7, elem_bytes=2)", for error messages.
std::string to_string(const MatrixStack& s);

// s.bytes(), checked: throws moe::Error (INVALID_ARGUMENT) for a negative extent, an element
// size outside {1, 2, 4, 8}, or a byte count past int64_t (which s.bytes() would wrap, and a
// wrapped size would pass the buffer check below). `what` names the operation in the message.
int64_t checked_bytes(const MatrixStack& s, const char* what);

// checked_bytes, then (SHAPE_MISMATCH) when `buffer` does not hold exactly s.bytes() bytes.
void check_stack(ByteSpan buffer, const MatrixStack& s, const char* what);

// Row r of matrix b of a stack, as a byte offset.
inline int64_t row_offset(const MatrixStack& s, int64_t b, int64_t r) {
  return b * s.matrix_bytes() + r * s.row_bytes();
}

}  // namespace moe::trtllm
