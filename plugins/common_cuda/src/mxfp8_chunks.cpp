#include "moe_cuda/mxfp8_chunks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe_cuda/mxfp8_decode.hpp"

namespace moe::gpu {

int mx8_word_at(int kk) {
  const int j = kk / 16, q = (kk % 8) / 2;  // K 16j + 2q (+1, +8, +9)
  return q * 32 + j * 4;
}

std::vector<uint8_t> pack_mxfp8_stack(const uint8_t* codes, const uint8_t* scales, int64_t experts,
                                      int64_t rows, int64_t k, int64_t gate_up,
                                      std::string_view name, Fp4Padding pad, GatePairing pairing) {
  const auto [tiles, stages] = chunk_cover(pad, rows, k, gate_up, name);
  const int64_t scale_cols = (k + kMxBlockSize - 1) / kMxBlockSize;
  constexpr int64_t kBlocks = kFp4StageK / kMxBlockSize;  // 4 scale codes a chunk row
  std::vector<uint8_t> out(size_t(experts * tiles * stages * kMx8ChunkBytes), 0);
  for_each_chunk_row(
      experts, tiles, rows, gate_up,
      [&](int64_t e, int64_t t, int64_t r, int64_t row) {
        const int64_t src = e * rows + row;
        const uint8_t* q = codes + src * k;
        const uint8_t* s = scales + src * scale_cols;
        for (int64_t st = 0; st < stages; ++st) {
          uint8_t* chunk = out.data() + ((e * tiles + t) * stages + st) * kMx8ChunkBytes;
          uint8_t c[kFp4StageK] = {};  // the stage's codes of this row, zeros past k
          for (int64_t b = 0; b < kBlocks; ++b) {
            const int64_t block = st * kBlocks + b;
            if (block >= scale_cols) break;  // K padding: zero codes
            const int64_t k0 = st * kFp4StageK + b * kMxBlockSize;
            const int64_t k1 = std::min(k0 + kMxBlockSize, k);
            bool all_zero = true;  // then any scale gives zeros: the window's 1 stands in
            for (int64_t kk = k0; kk < k1 && all_zero; ++kk) all_zero = (q[kk] & 0x7f) == 0;
            const uint8_t x = all_zero ? uint8_t(127) : s[block];
            MOE_CHECK(x != 0xff, MOE_STATUS_INVALID_ARGUMENT,
                      "{}_scale[{}, {}, {}] is the ue8m0 NaN code 0xff", name, e, row, block);
            MOE_CHECK(x >= kMx8MinCode && x <= kMx8MaxCode, MOE_STATUS_INVALID_ARGUMENT,
                      "{}_scale[{}, {}, {}] = 2^{} is outside the mxfp8 scales the weight-only "
                      "kernel applies exactly in bf16, 2^{} to 2^{}",
                      name, e, row, block, int(x) - 127, kMx8MinCode - 127, kMx8MaxCode - 127);
            chunk[kMx8CodeBytes + r * kMx8ScaleBytes + b] = x;
            for (int64_t kk = b * kMxBlockSize;
                 kk < (b + 1) * kMxBlockSize && st * kFp4StageK + kk < k; ++kk) {
              c[kk] = q[st * kFp4StageK + kk];
              MOE_CHECK((c[kk] & 0x7f) != 0x7f, MOE_STATUS_INVALID_ARGUMENT,
                        "{}[{}, {}, {}] is an e4m3 NaN code (0x{:02x})", name, e, row,
                        st * kFp4StageK + kk, c[kk]);
            }
          }
          for (int kk = 0; kk < kFp4StageK; kk += 16)  // K step kk / 16
            for (int i = 0; i < 8; i += 2) {           // thread q = i / 2: K 2q, 2q+1, 2q+8, 2q+9
              const uint32_t w = mx8_word(c[kk + i], c[kk + i + 1], c[kk + i + 8], c[kk + i + 9]);
              std::memcpy(chunk + r * kFp4StageK + mx8_word_at(kk + i), &w, 4);
            }
        }
      },
      pairing);
  return out;
}

}  // namespace moe::gpu
