#include "block_major.hpp"

#include <cstring>

#include "moe/sdk/error.hpp"

namespace moe::trtllm {

void check_block_major_k(const MatrixStack& s, int64_t block_k, const char* what) {
  MOE_CHECK(block_k > 0, MOE_STATUS_INVALID_ARGUMENT, "{}: block_k={} must be positive", what,
            block_k);
  MOE_CHECK(s.cols % block_k == 0, MOE_STATUS_UNSUPPORTED,
            "{}: K={} ({} bytes per row) is not a multiple of block_k={} ({} bytes)", what, s.cols,
            s.row_bytes(), block_k, block_k * s.elem_bytes);
}

namespace {

// Byte offset of (m, kb) in the block-major layout of one matrix: (K/bk, M, bk).
int64_t block_offset(const MatrixStack& s, int64_t block_k, int64_t m, int64_t kb) {
  return (kb * s.rows + m) * block_k * s.elem_bytes;
}

}  // namespace

Bytes to_block_major_k(ByteSpan in, const MatrixStack& s, int64_t block_k) {
  check_stack(in, s, "BlockMajorK");
  check_block_major_k(s, block_k, "BlockMajorK");
  Bytes out(in.size());
  const int64_t slab = block_k * s.elem_bytes, k_blocks = s.cols / block_k;
  for (int64_t b = 0; b < s.batch; ++b) {
    const uint8_t* src = in.data() + b * s.matrix_bytes();
    uint8_t* dst = out.data() + b * s.matrix_bytes();
    for (int64_t m = 0; m < s.rows; ++m)
      for (int64_t kb = 0; kb < k_blocks; ++kb)
        std::memcpy(dst + block_offset(s, block_k, m, kb), src + m * s.row_bytes() + kb * slab,
                    size_t(slab));
  }
  return out;
}

Bytes from_block_major_k(ByteSpan in, const MatrixStack& s, int64_t block_k) {
  check_stack(in, s, "BlockMajorK inverse");
  check_block_major_k(s, block_k, "BlockMajorK inverse");
  Bytes out(in.size());
  const int64_t slab = block_k * s.elem_bytes, k_blocks = s.cols / block_k;
  for (int64_t b = 0; b < s.batch; ++b) {
    const uint8_t* src = in.data() + b * s.matrix_bytes();
    uint8_t* dst = out.data() + b * s.matrix_bytes();
    for (int64_t m = 0; m < s.rows; ++m)
      for (int64_t kb = 0; kb < k_blocks; ++kb)
        std::memcpy(dst + m * s.row_bytes() + kb * slab, src + block_offset(s, block_k, m, kb),
                    size_t(slab));
  }
  return out;
}

}  // namespace moe::trtllm
