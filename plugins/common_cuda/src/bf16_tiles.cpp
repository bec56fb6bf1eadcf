#include "moe_cuda/bf16_tiles.hpp"

#include <algorithm>

namespace moe::gpu {

namespace {

template <class T>
std::vector<T> pack_stack(const T* weights, int64_t experts, int64_t rows, int64_t k,
                          int64_t gate_up, std::string_view name, Fp4Padding pad,
                          GatePairing pairing) {
  const auto [tiles, stages] = chunk_cover(pad, rows, k, gate_up, name);
  const int64_t ld = stages * kFp4StageK;  // a tile row's elements, K padded
  std::vector<T> out(size_t(experts * tiles * kFp4TileRows * ld), T(0));
  for_each_chunk_row(
      experts, tiles, rows, gate_up,
      [&](int64_t e, int64_t t, int64_t r, int64_t row) {
        const T* src = weights + (e * rows + row) * k;
        std::copy(src, src + k, out.data() + ((e * tiles + t) * kFp4TileRows + r) * ld);
      },
      pairing);
  return out;
}

}  // namespace

std::vector<uint16_t> pack_bf16_stack(const uint16_t* weights, int64_t experts, int64_t rows,
                                      int64_t k, int64_t gate_up, std::string_view name,
                                      Fp4Padding pad, GatePairing pairing) {
  return pack_stack(weights, experts, rows, k, gate_up, name, pad, pairing);
}

std::vector<uint8_t> pack_e4m3_stack(const uint8_t* weights, int64_t experts, int64_t rows,
                                     int64_t k, int64_t gate_up, std::string_view name,
                                     Fp4Padding pad, GatePairing pairing) {
  return pack_stack(weights, experts, rows, k, gate_up, name, pad, pairing);
}

}  // namespace moe::gpu
