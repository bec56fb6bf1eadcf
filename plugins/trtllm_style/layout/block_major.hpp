// BlockMajorK: (batch, M, K) viewed as (batch, M, K/bk, bk) and permuted to
// (batch, K/bk, M, bk), so a K-slab of bk elements of every row is contiguous. TensorRT-LLM's
// bf16 and fp8 kernels load weights this way, with bk = 128 bytes.
#pragma once

#include <cstdint>

#include "matrix_stack.hpp"

namespace moe::trtllm {

constexpr int64_t kDefaultBlockKBytes = 128;

// Throws INVALID_ARGUMENT when block_k <= 0 and UNSUPPORTED when s.cols % block_k != 0, naming
// `what`, K and block_k in elements and bytes.
void check_block_major_k(const MatrixStack& s, int64_t block_k, const char* what);

// `block_k` counts elements of s.elem_bytes. Throws UNSUPPORTED when cols % block_k != 0.
Bytes to_block_major_k(ByteSpan in, const MatrixStack& s, int64_t block_k);
// Inverse; `s` is the (batch, M, K) shape to restore.
Bytes from_block_major_k(ByteSpan in, const MatrixStack& s, int64_t block_k);

}  // namespace moe::trtllm
