#include "matrix_stack.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "moe/sdk/error.hpp"

namespace moe::trtllm {

std::string to_string(const MatrixStack& s) {
  return fmt::format("(batch={}, rows={}, cols={}, elem_bytes={})", s.batch, s.rows, s.cols,
                     s.elem_bytes);
}

int64_t checked_bytes(const MatrixStack& s, const char* what) {
  MOE_CHECK(s.batch >= 0 && s.rows >= 0 && s.cols >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: negative extent in {}", what, to_string(s));
  MOE_CHECK(s.elem_bytes == 1 || s.elem_bytes == 2 || s.elem_bytes == 4 || s.elem_bytes == 8,
            MOE_STATUS_INVALID_ARGUMENT, "{}: elem_bytes={} is not one of 1, 2, 4, 8", what,
            s.elem_bytes);
  int64_t bytes = 0;
  const bool overflow = __builtin_mul_overflow(s.cols, s.elem_bytes, &bytes) ||
                        __builtin_mul_overflow(bytes, s.rows, &bytes) ||
                        __builtin_mul_overflow(bytes, s.batch, &bytes);
  MOE_CHECK(!overflow, MOE_STATUS_INVALID_ARGUMENT, "{}: shape {} holds more than {} bytes", what,
            to_string(s), INT64_MAX);
  return bytes;
}

void check_stack(ByteSpan buffer, const MatrixStack& s, const char* what) {
  const int64_t bytes = checked_bytes(s, what);
  MOE_CHECK(int64_t(buffer.size()) == bytes, MOE_STATUS_SHAPE_MISMATCH,
            "{}: buffer holds {} bytes, shape {} needs {}", what, buffer.size(), to_string(s),
            bytes);
}

}  // namespace moe::trtllm
