// The Hopper mxfp8 weight-only layout on any machine: the prepared chunks decoded with the
// kernel's own integer steps (moe_cuda/mxfp8_decode.hpp) and a bf16 multiply give every canonical
// weight exactly (e4m3 element x ue8m0 scale), through gate/up tile pairing, padding, a partial
// last scale block, every e4m3 code and the whole scale window; NaN codes and scales the kernel
// cannot apply exactly are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expected_chunk_row.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe_cuda/mxfp8_chunks.hpp"
#include "moe_cuda/mxfp8_decode.hpp"

namespace moe::gpu {
namespace {

struct Stack {
  int64_t experts, rows, k, gate_up;
  std::vector<uint8_t> codes, scales;  // [E, rows, k], [E, rows, ceil(k / 32)]
  int64_t blocks() const { return (k + 31) / 32; }
  double weight(int64_t e, int64_t row, int64_t kk) const {
    const int64_t r = e * rows + row;
    return e4m3_to_double(codes[size_t(r * k + kk)]) *
           ue8m0_to_double(scales[r * blocks() + kk / 32]);
  }
};

Stack random_stack(int64_t experts, int64_t rows, int64_t k, int64_t gate_up, uint32_t seed) {
  Stack s{experts, rows, k, gate_up, {}, {}};
  std::mt19937 rng(seed);
  s.codes.resize(size_t(experts * rows * k));
  for (auto& c : s.codes) {
    c = uint8_t(rng());
    if ((c & 0x7f) == 0x7f) c = uint8_t(c & 0xfe);  // not NaN
  }
  s.scales.resize(size_t(experts * rows * s.blocks()));
  for (auto& x : s.scales) x = uint8_t(kMx8MinCode + rng() % (kMx8MaxCode - kMx8MinCode + 1));
  return s;
}

double bf16(uint32_t bits) {
  return double(bf16_to_float(uint16_t(bits)));
}

// Decodes every element of the prepared chunks as the consumer threads do (word j of thread q,
// both pairs, the block's scale) and compares it with the canonical weight; padding must decode
// to zero. Returns how many real weights it checked.
int64_t check_decodes_exactly(const Stack& s, Fp4Padding pad = {},
                              GatePairing pairing = GatePairing::kHalves) {
  const std::vector<uint8_t> packed = pack_mxfp8_stack(s.codes.data(), s.scales.data(), s.experts,
                                                       s.rows, s.k, s.gate_up, "w13", pad, pairing);
  const int64_t tiles = pad.tiles > 0 ? pad.tiles : s.rows / kFp4TileRows;
  const int64_t stages = pad.stages > 0 ? pad.stages : s.k / kFp4StageK;
  EXPECT_EQ(int64_t(packed.size()), s.experts * tiles * stages * kMx8ChunkBytes);
  int64_t checked = 0;
  for (int64_t e = 0; e < s.experts; ++e)
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t st = 0; st < stages; ++st) {
        const uint8_t* chunk = packed.data() + ((e * tiles + t) * stages + st) * kMx8ChunkBytes;
        for (int64_t r = 0; r < kFp4TileRows; ++r) {
          const int64_t row = expected_chunk_row(s.rows, s.gate_up, t, r, pairing);
          if (row >= 0) {
            EXPECT_EQ(fp4_source_row(t, r, s.gate_up, pairing), row);
          }
          for (int q = 0; q < 4; ++q)
            for (int j = 0; j < 8; ++j) {
              uint32_t word = 0;
              std::memcpy(&word, chunk + r * 128 + q * 32 + j * 4, 4);
              const uint32_t scale =
                  mx8_scale_pair(chunk[kMx8CodeBytes + r * kMx8ScaleBytes + j / 2]);
              for (int upper = 0; upper < 2; ++upper) {  // K 2q, 2q+1, then 2q+8, 2q+9
                const uint32_t pair = upper ? mx8_second_pair(word) : mx8_first_pair(word);
                for (int elem = 0; elem < 2; ++elem) {
                  const int64_t kk = st * kFp4StageK + 16 * j + 2 * q + 8 * upper + elem;
                  EXPECT_EQ(mx8_word_at(int(kk % kFp4StageK)), q * 32 + j * 4);
                  const double a = bf16(pair >> (16 * elem) & 0xffff);
                  const double b = bf16(scale >> (16 * elem) & 0xffff);
                  const double got = a * b;
                  EXPECT_EQ(bf16(double_to_bf16(got)), got) << "not exact in bf16";
                  const bool real = row >= 0 && kk < s.k;
                  EXPECT_EQ(got, real ? s.weight(e, row, kk) : 0.0)
                      << "expert " << e << " tile " << t << " row " << r << " k " << kk;
                  checked += real ? 1 : 0;
                }
              }
            }
        }
      }
  return checked;
}

TEST(Mxfp8Chunks, ChunksDecodeToEveryWeightExactly) {
  // A gated w13 (I = 192: tile t pairs gate rows 64t.. with up rows 192 + 64t..), K = 256.
  const Stack s = random_stack(2, 384, 256, 192, 1);
  EXPECT_EQ(check_decodes_exactly(s), 2 * 384 * 256);
  const Stack w2 = random_stack(1, 256, 384, 0, 2);  // plain tiles
  EXPECT_EQ(check_decodes_exactly(w2), 256 * 384);
}

TEST(Mxfp8Chunks, PaddedStacksDecodeToTheWeightsAndZeros) {
  const Stack gated = random_stack(2, 96, 96, 48, 3);  // I = 48 of one 64-column tile, K = 96
  EXPECT_EQ(check_decodes_exactly(gated, {1, 1}), 2 * 96 * 96);
  const Stack partial = random_stack(1, 200, 80, 0, 4);  // two tiles, K = 2.5 scale blocks
  EXPECT_EQ(check_decodes_exactly(partial, {2, 1}), 200 * 80);
}

// trtllm_style packs gated mxfp8 stacks with the weight-only GEMM's pairing (kRowPairs): whole
// tiles and a padded one decode exactly at their places.
TEST(Mxfp8Chunks, RowPairedStacksDecodeToEveryWeightExactly) {
  const Stack whole = random_stack(2, 384, 256, 192, 31);
  EXPECT_EQ(check_decodes_exactly(whole, {}, GatePairing::kRowPairs), 2 * 384 * 256);
  const Stack padded = random_stack(2, 96, 96, 48, 32);
  EXPECT_EQ(check_decodes_exactly(padded, {1, 1}, GatePairing::kRowPairs), 2 * 96 * 96);
}

TEST(Mxfp8Chunks, EveryCodeAndEveryScaleInTheWindowIsExact) {
  Stack s = random_stack(1, 128, 256, 0, 5);
  for (size_t i = 0; i < s.codes.size(); ++i) {
    const auto c = uint8_t(i % 256);
    s.codes[i] = (c & 0x7f) == 0x7f ? 0 : c;  // every e4m3 code but NaN, subnormals included
  }
  for (size_t i = 0; i < s.scales.size(); ++i)
    s.scales[i] = uint8_t(kMx8MinCode + i % (kMx8MaxCode - kMx8MinCode + 1));
  check_decodes_exactly(s);
  // The window's two ends: the smallest subnormal at the smallest scale, 448 at the largest.
  EXPECT_EQ(bf16(mx8_placed(0x01)) * bf16(mx8_scale_pair(kMx8MinCode) & 0xffff),
            std::ldexp(1.0, -9 + kMx8MinCode - 127));
  EXPECT_EQ(bf16(mx8_placed(0x7e)) * bf16(mx8_scale_pair(kMx8MaxCode) >> 16),
            448.0 * std::ldexp(1.0, kMx8MaxCode - 127));
}

// The prepared word's two pairs come back exactly for every pair of codes in each of the four
// places, the other three codes being anything (here: every code in turn, and all ones).
TEST(Mxfp8Chunks, EveryWordGivesBackBothPairs) {
  for (uint32_t a = 0; a < 256; ++a)
    for (uint32_t b : {0u, 0x80u, 0x7eu, 0xfeu, 0x01u, a ^ 0x5au}) {
      const uint32_t w = mx8_word(a, b, b ^ 0x81u, a ^ 0x3cu);
      EXPECT_EQ(mx8_first_pair(w), mx8_placed(a) | (mx8_placed(b) << 16)) << a << " " << b;
      EXPECT_EQ(mx8_second_pair(w), mx8_placed(b ^ 0x81u) | (mx8_placed(a ^ 0x3cu) << 16))
          << a << " " << b;
    }
}

template <class Fn>
void expect_refused(Fn&& fn, const std::string& words) {
  try {
    fn();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Mxfp8Chunks, RefusesNanCodesAndScalesTheKernelCannotApplyNamingThePlace) {
  const Stack good = random_stack(2, 128, 256, 0, 6);
  auto pack = [](const Stack& s) {
    return pack_mxfp8_stack(s.codes.data(), s.scales.data(), s.experts, s.rows, s.k, s.gate_up,
                            "w2");
  };
  Stack nan_code = good;
  nan_code.codes[size_t((1 * 128 + 7) * 256 + 100)] = 0xff;  // expert 1, row 7, K 100
  expect_refused([&] { pack(nan_code); }, "w2[1, 7, 100] is an e4m3 NaN code (0xff)");
  const size_t at = size_t((1 * 128 + 5) * 8 + 3);  // expert 1, row 5, block 3
  for (auto [code, words] : {std::pair<uint8_t, std::string>{0xff, "is the ue8m0 NaN code"},
                             {kMx8MaxCode + 1, "w2_scale[1, 5, 3] = 2^8 is outside"},
                             {kMx8MinCode - 1, "2^-125 is outside the mxfp8 scales"}}) {
    Stack s = good;
    s.scales[at] = code;
    expect_refused([&] { pack(s); }, words);
  }
}

// An exporter's 2^-127 (or any out-of-window code) on a block of zero codes is taken: the block
// is zero whatever its scale.
TEST(Mxfp8Chunks, AnAllZeroBlockTakesAnyScale) {
  Stack s = random_stack(1, 128, 128, 0, 9);
  for (int64_t kk = 32; kk < 64; ++kk) s.codes[size_t(5 * 128 + kk)] = (kk % 2) ? 0x80 : 0x00;
  s.scales[size_t(5 * 4 + 1)] = 0;  // row 5, block 1: 2^-127
  const Stack checked = [&] {
    Stack c = s;
    c.scales[size_t(5 * 4 + 1)] = 127;  // what the weights mean: zeros
    return c;
  }();
  const std::vector<uint8_t> a =
      pack_mxfp8_stack(s.codes.data(), s.scales.data(), 1, 128, 128, 0, "w2");
  const std::vector<uint8_t> b =
      pack_mxfp8_stack(checked.codes.data(), checked.scales.data(), 1, 128, 128, 0, "w2");
  EXPECT_EQ(a, b);
}

// A padding that would cut the stack (too few tiles or stages) is an internal error, not a
// silently shorter matrix.
TEST(Mxfp8Chunks, APaddingThatCutsTheStackIsRefused) {
  const Stack s = random_stack(1, 200, 80, 0, 8);
  try {
    pack_mxfp8_stack(s.codes.data(), s.scales.data(), 1, 200, 80, 0, "w2", {1, 1});
    ADD_FAILURE() << "accepted 1 tile for 200 rows";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("w2: 1 tiles x 1 stages"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moe::gpu
