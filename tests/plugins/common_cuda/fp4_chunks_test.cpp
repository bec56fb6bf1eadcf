// The Hopper fp4 layout on any machine: the prepared chunks decoded with the kernels' own
// integer steps (moe_cuda/fp4_decode.hpp) and a bf16 multiply give every canonical weight exactly
// (element x scale, times the fold 2^(kFoldExp - 126)), through gate/up tile pairing, every e4m3
// block scale and the whole mx window; the scales the kernel cannot take are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expected_chunk_row.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/fp4_decode.hpp"

namespace moe::gpu {
namespace {

struct Stack {
  Fp4Scales kind;
  int64_t experts, rows, k, gate_up;
  std::vector<uint8_t> codes, scales;  // [E, rows, k/2], [E, rows, k/group]
  int64_t group() const { return kind == Fp4Scales::kMx ? 32 : 16; }
  int64_t blocks() const { return (k + group() - 1) / group(); }
  double weight(int64_t e, int64_t row, int64_t kk) const {
    const int64_t r = e * rows + row;
    const double s = kind == Fp4Scales::kMx ? ue8m0_to_double(scales[r * blocks() + kk / 32])
                                            : e4m3_to_double(scales[r * blocks() + kk / 16]);
    return e2m1_to_double(fp4_get(codes.data() + r * (k / 2), kk)) * s;
  }
};

Stack random_stack(Fp4Scales kind, int64_t experts, int64_t rows, int64_t k, int64_t gate_up,
                   uint32_t seed) {
  Stack s{kind, experts, rows, k, gate_up, {}, {}};
  std::mt19937 rng(seed);
  s.codes.resize(size_t(experts * rows * k / 2));
  for (auto& b : s.codes) b = uint8_t(rng());
  s.scales.resize(size_t(experts * rows * s.blocks()));
  for (auto& c : s.scales)
    c = kind == Fp4Scales::kMx ? uint8_t(kMxMinCode + rng() % (kMxMaxCode - kMxMinCode + 1))
                               : uint8_t(rng() % 0x7f);  // every non-negative e4m3 but NaN
  return s;
}

double bf16(uint32_t bits) {
  return double(bf16_to_float(uint16_t(bits)));
}

// The bf16 product the kernel forms, which must be exact.
double exact_product(uint32_t a_bits, uint32_t b_bits) {
  const double prod = bf16(a_bits) * bf16(b_bits);
  EXPECT_EQ(bf16(double_to_bf16(prod)), prod) << "not exact in bf16: " << a_bits << " x " << b_bits;
  return prod;
}

// Decodes every element of the prepared chunks the way the consumer threads do and compares it
// with the canonical weight; returns how many elements it checked.
// With `pad`, the padding (rows or columns past the stack's, K past k) must decode to zero.
int64_t check_decodes_exactly(const Stack& s, Fp4Padding pad = {},
                              GatePairing pairing = GatePairing::kHalves) {
  const std::vector<uint8_t> packed =
      pack_fp4_stack(s.kind, s.codes.data(), s.scales.data(), s.experts, s.rows, s.k, s.gate_up,
                     "w13", pad, pairing);
  const int64_t tiles = pad.tiles > 0 ? pad.tiles : s.rows / kFp4TileRows;
  const int64_t stages = pad.stages > 0 ? pad.stages : s.k / kFp4StageK;
  const int64_t chunk_bytes = fp4_chunk_bytes(s.kind), sbytes = fp4_scale_bytes(s.kind);
  EXPECT_EQ(int64_t(packed.size()), s.experts * tiles * stages * chunk_bytes);
  const double unfold = std::ldexp(1.0, kFp4Unfold);
  int64_t checked = 0;
  for (int64_t e = 0; e < s.experts; ++e)
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t st = 0; st < stages; ++st) {
        const uint8_t* chunk = packed.data() + ((e * tiles + t) * stages + st) * chunk_bytes;
        for (int64_t r = 0; r < kFp4TileRows; ++r) {
          const int64_t row = expected_chunk_row(s.rows, s.gate_up, t, r, pairing);
          if (row >= 0) {
            EXPECT_EQ(fp4_source_row(t, r, s.gate_up, pairing), row);
          }
          for (int q = 0; q < 4; ++q)
            for (int i = 0; i < 4; ++i) {
              uint32_t word = 0;
              std::memcpy(&word, chunk + r * 64 + q * 16 + i * 4, 4);
              for (int out = 0; out < 4; ++out) {
                const int j = 2 * i + out / 2, half = out % 2;
                const int block = s.kind == Fp4Scales::kMx ? i : j;
                const uint32_t code = chunk[kFp4CodeBytes + r * sbytes + block];
                const uint32_t scale =
                    s.kind == Fp4Scales::kMx ? mx_scale_pair(code) : nv_scale_pair(code);
                const uint32_t pair = fp4_placed_pair(word, out);
                for (int elem = 0; elem < 2; ++elem) {
                  const int64_t kk = st * kFp4StageK + 16 * j + 2 * q + 8 * half + elem;
                  const double got =
                      exact_product(pair >> (16 * elem) & 0xffff, scale >> (16 * elem) & 0xffff) *
                      unfold;
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

TEST(Fp4Chunks, ChunksDecodeToEveryMxfp4WeightExactly) {
  // A gated w13 (I = 192: tile t pairs gate rows 64t.. with up rows 192 + 64t..), K = 256.
  const Stack s = random_stack(Fp4Scales::kMx, 2, 384, 256, 192, 1);
  EXPECT_EQ(check_decodes_exactly(s), 2 * 384 * 256);
}

TEST(Fp4Chunks, ChunksDecodeToEveryNvfp4WeightExactly) {
  const Stack s = random_stack(Fp4Scales::kNv, 2, 256, 384, 0, 2);  // w2-like: plain tiles
  EXPECT_EQ(check_decodes_exactly(s), 2 * 256 * 384);
}

// trtllm_style pads shapes that are not whole tiles: a gated w13 with I = 48 (one tile: 48 gate
// and 48 up columns of 64) over K = 96, and a plain stack of 200 rows over K = 80 (two tiles, one
// stage); every real weight decodes exactly and the padding to zero.
TEST(Fp4Chunks, PaddedStacksDecodeToTheWeightsAndZeros) {
  const Stack mx = random_stack(Fp4Scales::kMx, 2, 96, 96, 48, 11);
  EXPECT_EQ(check_decodes_exactly(mx, {1, 1}), 2 * 96 * 96);
  const Stack nv = random_stack(Fp4Scales::kNv, 2, 200, 80, 0, 12);
  EXPECT_EQ(check_decodes_exactly(nv, {2, 1}), 2 * 200 * 80);
  const Stack partial = random_stack(Fp4Scales::kMx, 1, 128, 80, 0, 13);  // K = 2.5 mx blocks
  EXPECT_EQ(check_decodes_exactly(partial, {1, 1}), 128 * 80);
}

// The weight-only GEMM's pairing (kRowPairs): the thread that accumulates chunk rows r and r + 8
// of a 16-row block gets gate column c and its up row, every column of the tile once.
TEST(Fp4Chunks, RowPairsPutAGateColumnAndItsUpRowEightRowsApart) {
  std::vector<int> gate(64, 0), up(64, 0);
  for (int64_t r = 0; r < kFp4TileRows; ++r) {
    const GatedRow g = gated_chunk_row(r, GatePairing::kRowPairs);
    ASSERT_TRUE(g.column >= 0 && g.column < 64) << r;
    ++(g.up ? up : gate)[size_t(g.column)];
    if (r % 16 < 8) {
      const GatedRow partner = gated_chunk_row(r + 8, GatePairing::kRowPairs);
      EXPECT_FALSE(g.up) << r;
      EXPECT_TRUE(partner.up) << r;
      EXPECT_EQ(partner.column, g.column) << r;
    }
  }
  for (int c = 0; c < 64; ++c) EXPECT_TRUE(gate[size_t(c)] == 1 && up[size_t(c)] == 1) << c;
}

// The same stacks packed with kRowPairs decode exactly at their places: a gated w13 over whole
// tiles, and padded (I = 48 of 64 columns, K = 96 of 128) as trtllm_style prepares them.
TEST(Fp4Chunks, RowPairedStacksDecodeToEveryWeightExactly) {
  const Stack whole = random_stack(Fp4Scales::kNv, 2, 384, 256, 192, 21);
  EXPECT_EQ(check_decodes_exactly(whole, {}, GatePairing::kRowPairs), 2 * 384 * 256);
  const Stack padded = random_stack(Fp4Scales::kMx, 2, 96, 96, 48, 22);
  EXPECT_EQ(check_decodes_exactly(padded, {1, 1}, GatePairing::kRowPairs), 2 * 96 * 96);
}

TEST(Fp4Chunks, EveryE4m3ScaleAndEveryMxCodeInTheWindowIsExact) {
  Stack nv = random_stack(Fp4Scales::kNv, 1, 128, 128, 0, 3);
  for (size_t i = 0; i < nv.scales.size(); ++i) nv.scales[i] = uint8_t(i % 0x7f);  // 0 .. 448
  check_decodes_exactly(nv);
  Stack mx = random_stack(Fp4Scales::kMx, 1, 256, 128, 0, 4);
  for (size_t i = 0; i < mx.scales.size(); ++i)
    mx.scales[i] = uint8_t(kMxMinCode + i % (kMxMaxCode - kMxMinCode + 1));
  check_decodes_exactly(mx);
}

TEST(Fp4Chunks, ZeroNvfp4ScaleZeroesItsBlock) {
  Stack s = random_stack(Fp4Scales::kNv, 1, 128, 128, 0, 5);
  for (size_t i = 0; i < s.scales.size(); i += 3) s.scales[i] = 0x80;  // -0: zero as well
  for (size_t i = 1; i < s.scales.size(); i += 3) s.scales[i] = 0x00;
  check_decodes_exactly(s);
}

void expect_refused(Stack s, size_t at, uint8_t code, const std::string& words) {
  s.scales[at] = code;
  try {
    pack_fp4_stack(s.kind, s.codes.data(), s.scales.data(), s.experts, s.rows, s.k, s.gate_up,
                   "w2");
    ADD_FAILURE() << "accepted scale code " << int(code);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Fp4Chunks, RefusesScalesTheKernelCannotTakeNamingTensorAndPlace) {
  const Stack mx = random_stack(Fp4Scales::kMx, 2, 128, 256, 0, 6);
  const size_t at = size_t((1 * 128 + 5) * 8 + 3);  // expert 1, row 5, block 3
  expect_refused(mx, at, 0xff, "w2_scale[1, 5, 3] is the ue8m0 NaN code");
  expect_refused(mx, at, kMxMaxCode + 1, "w2_scale[1, 5, 3] = 2^28 is outside");
  expect_refused(mx, at, kMxMinCode - 1, "2^-100 is outside the mxfp4 scales");
  const Stack nv = random_stack(Fp4Scales::kNv, 1, 128, 128, 0, 7);
  expect_refused(nv, 8 * 9 + 2, 0x7f, "w2_scale[0, 9, 2] = nan");
  expect_refused(nv, 0, 0x88, "w2_scale[0, 0, 0] = -0.015625 (e4m3 code 0x88)");
}

}  // namespace
}  // namespace moe::gpu
