#include "row_shuffle.hpp"

#include "moe/sdk/error.hpp"

namespace moe::trtllm {

int64_t shuffle_block_size(int64_t epilogue_tile_m) {
  MOE_CHECK(epilogue_tile_m > 0, MOE_STATUS_INVALID_ARGUMENT,
            "row shuffle: epilogue_tile_m={} must be positive", epilogue_tile_m);
  return epilogue_tile_m % 128 == 0 ? 32 : 16;
}

RowMap shuffle_row_map(int64_t rows, int64_t epilogue_tile_m) {
  const int64_t block = shuffle_block_size(epilogue_tile_m);
  MOE_CHECK(rows >= 0 && rows % block == 0, MOE_STATUS_UNSUPPORTED,
            "row shuffle (epilogue_tile_m={}): rows={} is not a multiple of the shuffle block {}",
            epilogue_tile_m, rows, block);
  const int64_t per_group = block / 8;  // B/8 source rows per group of 8 destination rows
  RowMap map(static_cast<size_t>(rows));
  for (int64_t d = 0; d < rows; ++d) {
    const int64_t base = d - d % block, local = d % block;
    const int64_t a = local % 8, b = local / 8;  // local = 8*b + a
    map[d] = base + per_group * a + b;
  }
  return map;
}

Bytes shuffle_rows(ByteSpan in, const MatrixStack& s, int64_t epilogue_tile_m) {
  check_stack(in, s, "row shuffle");
  return gather_rows(in, s, shuffle_row_map(s.rows, epilogue_tile_m));
}

Bytes unshuffle_rows(ByteSpan in, const MatrixStack& s, int64_t epilogue_tile_m) {
  check_stack(in, s, "row unshuffle");
  return scatter_rows(in, s, shuffle_row_map(s.rows, epilogue_tile_m));
}

}  // namespace moe::trtllm
