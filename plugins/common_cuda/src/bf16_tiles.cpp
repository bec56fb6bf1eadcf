#include "moe_cuda/bf16_tiles.hpp"

#include <algorithm>

namespace moe::gpu {

std::vector<uint16_t> pack_bf16_stack(const uint16_t* weights, int64_t experts, int64_t rows,
                                      int64_t k, int64_t gate_up, std::string_view name,
                                      Fp4Padding pad, GatePairing pairing) {
  const auto [tiles, stages] = chunk_cover(pad, rows, k, gate_up, name);
  const int64_t ld = stages * kFp4StageK;  // a tile row's elements, K padded
  std::vector<uint16_t> out(size_t(experts * tiles * kFp4TileRows * ld), 0);
  for_each_chunk_row(
      experts, tiles, rows, gate_up,
      [&](int64_t e, int64_t t, int64_t r, int64_t row) {
        const uint16_t* src = weights + (e * rows + row) * k;
        std::copy(src, src + k, out.data() + ((e * tiles + t) * kFp4TileRows + r) * ld);
      },
      pairing);
  return out;
}

}  // namespace moe::gpu
