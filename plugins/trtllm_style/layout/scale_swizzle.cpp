#include "scale_swizzle.hpp"

#include <cstring>

#include "moe/sdk/error.hpp"

namespace moe::trtllm {

namespace {

// The swizzled buffer viewed as a stack of one-row matrices, for the size check.
MatrixStack swizzled_stack(const MatrixStack& s) {
  return {s.batch, 1, swizzled_elems(s.rows, s.cols), s.elem_bytes};
}

// `s` and its swizzled stack checked (checked_bytes): the padding to 128 rows and 4 columns must
// not take a count past int64_t either.
MatrixStack checked_swizzled_stack(const MatrixStack& s, const char* what) {
  checked_bytes(s, what);
  int64_t rows = 0, cols = 0, elems = 0;
  const bool overflow = __builtin_add_overflow(s.rows, 127, &rows) ||
                        __builtin_add_overflow(s.cols, 3, &cols) ||
                        __builtin_mul_overflow(rows / 128 * 128, cols / 4 * 4, &elems);
  MOE_CHECK(!overflow, MOE_STATUS_INVALID_ARGUMENT,
            "{}: shape {} padded to 128x4 tiles holds "
            "more than {} elements",
            what, to_string(s), INT64_MAX);
  const MatrixStack swizzled = swizzled_stack(s);
  checked_bytes(swizzled, what);
  return swizzled;
}

// Moves every element of one (rows, cols) matrix between row-major `linear` and `swizzled`.
// kBytes is a compile-time element size so the per-element copy is a plain load and store.
template <int kBytes, bool kToSwizzled>
void move_matrix(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t lin = (r * cols + c) * kBytes, swz = swizzled_offset(r, c, cols) * kBytes;
      if constexpr (kToSwizzled)
        std::memcpy(dst + swz, src + lin, kBytes);
      else
        std::memcpy(dst + lin, src + swz, kBytes);
    }
}

template <bool kToSwizzled>
void move_stack(const uint8_t* src, uint8_t* dst, const MatrixStack& s) {
  const int64_t lin_bytes = s.matrix_bytes(), swz_bytes = swizzled_stack(s).matrix_bytes();
  const int64_t src_step = kToSwizzled ? lin_bytes : swz_bytes;
  const int64_t dst_step = kToSwizzled ? swz_bytes : lin_bytes;
  for (int64_t b = 0; b < s.batch; ++b) {
    const uint8_t* in = src + b * src_step;
    uint8_t* out = dst + b * dst_step;
    switch (s.elem_bytes) {
      case 1:
        move_matrix<1, kToSwizzled>(in, out, s.rows, s.cols);
        break;
      case 2:
        move_matrix<2, kToSwizzled>(in, out, s.rows, s.cols);
        break;
      case 4:
        move_matrix<4, kToSwizzled>(in, out, s.rows, s.cols);
        break;
      default:
        move_matrix<8, kToSwizzled>(in, out, s.rows, s.cols);
        break;  // checked: 1,2,4,8
    }
  }
}

}  // namespace

Bytes swizzle_scales_128x4(ByteSpan in, const MatrixStack& s) {
  check_stack(in, s, "128x4 scale swizzle");
  Bytes out(static_cast<size_t>(checked_bytes(checked_swizzled_stack(s, "128x4 scale swizzle"),
                                              "128x4 scale swizzle")),
            0);
  move_stack<true>(in.data(), out.data(), s);
  return out;
}

Bytes unswizzle_scales_128x4(ByteSpan in, const MatrixStack& s) {
  check_stack(in, checked_swizzled_stack(s, "128x4 scale unswizzle"), "128x4 scale unswizzle");
  Bytes out(static_cast<size_t>(s.bytes()));  // checked with the swizzled stack
  move_stack<false>(in.data(), out.data(), s);
  return out;
}

}  // namespace moe::trtllm
