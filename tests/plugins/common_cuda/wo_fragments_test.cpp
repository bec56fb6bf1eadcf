// The fragment readers of the weight-only GEMM and cutlass_mega (kernels/mxfp8_fragments.cuh,
// kernels/fp4_fragments.cuh) on a GPU: a chunk packed from every code (NaN excepted) at scales
// across the window decodes, in every thread's registers, to the canonical weights' bf16 bits
// exactly (4-bit: times the fold 2^(kFp4FoldExp - 126)), signed zeros included, at the places
// wgmma's m64nNk16 A fragment layout gives them. Skips without a device.
#include <cstring>
#include <vector>

#include <cmath>
#include "cuda_test_env.hpp"
#include "moe/sdk/formats.hpp"

#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/fp4_decode.hpp"
#include "moe_cuda/mxfp8_chunks.hpp"
#include "moe_cuda/mxfp8_decode.hpp"
#include "wo_fragments_kernel.hpp"

namespace moe::gpu::test {
namespace {

using WoFragments = CudaTest;

// Checks every register of the 256 threads' 8 K steps against expected(row, k) (bf16 bits) for
// the low and high element; returns how many elements it checked.
template <class Expected>
int64_t check_fragments(const std::vector<uint32_t>& out, Expected expected) {
  int64_t checked = 0;
  for (int t = 0; t < 256; ++t) {
    const int lane = t % 32, q = lane % 4;
    const int64_t r0 = (t / 128) * 64 + ((t % 128) / 32) * 16 + lane / 4;
    const int64_t row = fp4_source_row(0, r0, 0, GatePairing::kHalves);
    const int64_t row8 = fp4_source_row(0, r0 + 8, 0, GatePairing::kHalves);
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 4; ++i) {
        const uint32_t got = out[size_t((t * 8 + j) * 4 + i)];
        const int64_t r = i % 2 == 0 ? row : row8;            // a[1], a[3]: the row 8 below
        const int64_t k = 16 * j + 2 * q + (i >= 2 ? 8 : 0);  // a[2], a[3]: 8 further along K
        EXPECT_EQ(got & 0xffffu, expected(r, k)) << "thread " << t << " step " << j << " reg " << i;
        EXPECT_EQ(got >> 16, expected(r, k + 1)) << "thread " << t << " step " << j << " reg " << i;
        checked += 2;
      }
  }
  return checked;
}

TEST_F(WoFragments, Mxfp8ChunkDecodesToTheCanonicalWeightsInEveryRegister) {
  constexpr int64_t kRows = kFp4TileRows, kK = kFp4StageK, kBlocks = kK / 32;
  std::vector<uint8_t> codes(size_t(kRows * kK)), scales(size_t(kRows * kBlocks));
  const int64_t shift = randint(0, 255);
  for (size_t i = 0; i < codes.size(); ++i) {
    const auto c = uint8_t((i + size_t(shift)) % 256);
    codes[i] = (c & 0x7f) == 0x7f ? 0x80 : c;  // every code but NaN (-0 twice)
  }
  for (auto& s : scales) s = uint8_t(randint(kMx8MinCode, kMx8MaxCode));
  const std::vector<uint8_t> chunk =
      pack_mxfp8_stack(codes.data(), scales.data(), 1, kRows, kK, 0, "w2");
  ASSERT_EQ(int64_t(chunk.size()), kMx8ChunkBytes);

  DeviceBuffer<uint8_t> d_chunk(chunk);
  DeviceBuffer<uint32_t> d_out(size_t(256 * 8 * 4));
  d_out.poison();
  MOE_CUDA_CHECK(decode_mx8_fragments(d_chunk.get(), d_out.get(), stream_));
  sync();
  const std::vector<uint32_t> out = d_out.download();

  auto expected = [&](int64_t row, int64_t k) {
    return double_to_bf16(e4m3_to_double(codes[size_t(row * kK + k)]) *
                          ue8m0_to_double(scales[size_t(row * kBlocks + k / 32)]));
  };
  EXPECT_EQ(check_fragments(out, expected), kRows * kK);
}

TEST_F(WoFragments, Fp4ChunksDecodeToTheCanonicalWeightsInEveryRegister) {
  constexpr int64_t kRows = kFp4TileRows, kK = kFp4StageK;
  for (const Fp4Scales kind : {Fp4Scales::kMx, Fp4Scales::kNv}) {
    const bool mx = kind == Fp4Scales::kMx;
    const int64_t group = mx ? 32 : 16, blocks = kK / group;
    std::vector<uint8_t> codes(size_t(kRows * kK / 2)), scales(size_t(kRows * blocks));
    const int64_t shift = randint(0, 255);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t((i + size_t(shift)) % 256);
    for (auto& s : scales)  // nvfp4: every positive e4m3 scale but NaN (a zero one zeroes codes)
      s = uint8_t(mx ? randint(kMxMinCode, kMxMaxCode) : randint(1, 0x7e));
    const std::vector<uint8_t> chunk =
        pack_fp4_stack(kind, codes.data(), scales.data(), 1, kRows, kK, 0, "w2");
    ASSERT_EQ(int64_t(chunk.size()), fp4_chunk_bytes(kind));

    DeviceBuffer<uint8_t> d_chunk(chunk);
    DeviceBuffer<uint32_t> d_out(size_t(256 * 8 * 4));
    d_out.poison();
    MOE_CUDA_CHECK(decode_fp4_fragments(mx, d_chunk.get(), d_out.get(), stream_));
    sync();
    const double fold = std::ldexp(1.0, kFp4FoldExp - 126);
    auto expected = [&](int64_t row, int64_t k) {
      const uint8_t s = scales[size_t(row * blocks + k / group)];
      const double scale = mx ? ue8m0_to_double(s) : e4m3_to_double(s);
      return double_to_bf16(e2m1_to_double(fp4_get(codes.data() + row * (kK / 2), k)) * scale *
                            fold);
    };
    EXPECT_EQ(check_fragments(d_out.download(), expected), kRows * kK) << (mx ? "mx" : "nv");
  }
}

}  // namespace
}  // namespace moe::gpu::test
