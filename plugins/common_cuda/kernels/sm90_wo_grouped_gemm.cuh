// Weight-only grouped GEMM for sm90a (docs/design.md §6): mxfp4, nvfp4 or mxfp8 weights in the
// Hopper weight-only layouts (moe_cuda/fp4_chunks.hpp, moe_cuda/mxfp8_chunks.hpp) times bf16
// token rows, f32 accumulate, bf16 out, with GEMM1's activation (and bias) in the epilogue. Its
// bf16 instance (kBf16) runs the same schedule and epilogues on bf16 weight tiles
// (moe_cuda/bf16_tiles.hpp) with nothing to dequantise: see "bf16" below. Its e4m3
// instance (kE4m3: fp8_tensor weights on e4m3 token rows, per-tensor scales) runs the bf16
// schedule on 1-byte tiles: see "e4m3" below.
//
//   out[r, c] = act(sum_k rows[r, k] * w[g][c, k] * scale(g, c, k / block) * scale_2[g] + bias)
//
// Swap AB: weight rows fill wgmma's M side (two consumer warpgroups of 64 rows: a 128-row tile
// is one prepared chunk run), tokens the N side (N = 16, 32, 64, 96, 128 or 192 per tile, bf16
// also 256, chosen per batch by the host), so a decode batch of a few tokens per expert streams its
// weights without padding them with empty rows. Each K stage is one chunk (128 K: codes and block
// scales, one bulk copy) and the tile's token rows (two 128-byte swizzled TMA boxes of 64 K). The
// consumers dequantise the chunk into A fragments in registers (kernels/fp4_fragments.cuh,
// mxfp8_fragments.cuh: exact, the scale folded into the bf16 operand, whatever the block size) and
// issue wgmma m64nNk16 with A from registers and B from shared memory.
//
// bf16: a stage is 64 K (the weight tile's 128 rows x 64 K and the token rows, each one 128-byte
// swizzled TMA box), and both wgmma operands come from shared memory (m64nNk16 SS), so the
// consumers only wait, issue and release; the stages are half as large, twice as many fit. Tall
// tiles (kMB = 2, bf16 only) give a CTA two neighbouring prepared weight tiles: each consumer
// warpgroup issues two m64 wgmmas a K step on the same token operand.
//
// e4m3: a stage is 128 K (128 bytes of a row, as bf16's 64 K), wgmma m64nNk32 SS e4m3 x e4m3. The
// tensor cores' fp8 sums are not full f32, so each stage's four wgmmas accumulate into a partial
// set that is added to the f32 accumulators once the stage completes (promotion every 128 K, as
// CUTLASS's default fp8 mainloop does; unpromoted sums over K = 2048-7168 were measured 2-4e-2
// from the reference: bench/NOTES.md, session 15). The epilogue multiplies by the group's
// weight scale times the activation scale (the shared expert's group has its own) and stores
// bf16, or f32 (`out_f32`: GEMM1 of a layer that quantises its intermediate next) straight from
// registers, or e4m3 codes (`out_e4m3`: GEMM1 of a static-scale layer, quantised as it is
// stored), from tiles of 128 tokens on staged in shared memory like bf16 and stored in 8-byte
// pieces of token rows, below that from registers.
//
// Narrow last blocks (bf16, 128-row CTA tiles, Params::narrow): only a group's last token block
// can hold fewer than N rows; one that a narrower width holds is computed at the narrowest of 16,
// 32, 64 and 128 under N that holds it (a pair: at least 32, each CTA loading half), its token
// rows loaded in 16-row boxes (rows_map_narrow), so the block costs its weight stream and its own
// rows rather than N tokens' loads and wgmma. Its accumulators past the width keep stale values,
// for tokens it does not have and never stores.
//
// One CTA per SM, persistent; warpgroup 0 produces (one thread), warpgroups 1 and 2 consume.
// Tiles are numbered group by group, and within a group the N-token blocks of a weight tile
// consecutively (kernels/group_tiles.cuh, group_tile_rows_first): CTAs running at once share
// weight tiles, which L2 then serves.
//
// Epilogues. kGated: a tile is 64 intermediate columns, each 16 chunk rows 8 gate columns and
// their up rows (moe_cuda/fp4_chunks.hpp, GatePairing::kRowPairs), so a thread's two rows of each
// 16 are a gate/up pair and it writes act(gate, up) itself (bias first); the two warpgroups write
// 32 columns each. kPlain: 128 output columns, optionally relu2 (a non-gated GEMM1). Both stage
// the bf16 tile in shared memory and store whole 16-byte pieces of token rows, in two passes of
// N / 2 tokens where the smaller staging space makes room for one more pipeline stage.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include "dependent_launch.cuh"
#include "kernels/activation.cuh"
#include "kernels/fp4_fragments.cuh"
#include "kernels/gmma_desc.cuh"
#include "kernels/group_tiles.cuh"
#include "kernels/mxfp8_fragments.cuh"
#include "kernels/narrow_width.hpp"

namespace moe::gpu::kernels::wo {

constexpr int kThreads = 384;
constexpr int kRows = 128;  // weight rows per tile: two warpgroups of 64
constexpr int kWgRows = 64;
constexpr int kMaxGroups = 1024;  // the tile prefix lives in shared memory
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

enum Epilogue : int32_t { kGated = 0, kPlain = 1 };
// The weight formats (WoWeights on the host).
enum Weights : int { kMxfp4 = 0, kNvfp4 = 1, kMxfp8 = 2, kBf16 = 3, kE4m3 = 4 };
// Formats whose weight tiles come by TMA and feed wgmma from shared memory as they are.
template <int kW>
constexpr bool kSmemA = kW == kBf16 || kW == kE4m3;

// Instances that compute a group's short last block narrower (bf16 on 128-row CTA tiles).
template <int kW, int N, int kCluster, int kMB>
constexpr bool kNarrowable = kW == kBf16&& kMB == 1 && N > kNarrowBoxRows* kCluster;

// f(std::integral_constant<int, width>) for width = narrow_width's pick (kernels/narrow_width.hpp),
// each a compile-time wgmma N: w from kW0 up, N last.
template <int N, int kW0, class F>
__device__ __forceinline__ void with_token_width(int width, F&& f) {
  if constexpr (kW0 < N && kW0 <= kNarrowestMost) {
    if (width == kW0) return f(std::integral_constant<int, kW0>{});
    return with_token_width<N, kW0 * 2>(width, f);
  } else {
    f(std::integral_constant<int, N>{});
  }
}

// K per stage: one chunk (128), or for bf16 one 128-byte swizzle atom of K (64; e4m3: 128).
template <int kW>
constexpr int kStageK = kW == kBf16 ? 64 : 128;
// Bytes of a token row per stage: one 128-byte swizzled box (bf16, e4m3) or two (bf16 rows of the
// quantised formats' 128 K).
template <int kW>
constexpr int kRowBytes = kSmemA<kW> ? 128 : 256;
// A stage's weight space: 1024-byte slots (mxfp4 8704 bytes, nvfp4 9216, mxfp8 16896; bf16 128
// rows x 64 K, e4m3 128 rows x 128 K).
template <int kW>
constexpr int kChunkSlot = kSmemA<kW>     ? 16 * 1024
                           : kW == kMxfp8 ? 17 * 1024
                                          : 9 * 1024;
// The fragment reader of a chunk.
template <int kW>
using Rows = std::conditional_t<kW == kMxfp8, Mx8Rows, Fp4Rows<kW == kMxfp4>>;

// kMB: 64-row blocks of weights per consumer warpgroup: 1, or 2 for bf16's tall tiles (a CTA tile
// is kMB prepared 128-row tiles, warpgroup h taking prepared tile h, both of its halves).
template <int kW, int N, int kMB = 1>
struct Geometry {
  static_assert(N == 16 || N == 32 || N == 64 || N == 96 || N == 128 || N == 192 ||
                    (N == 256 && kW == kBf16),
                "instantiated token widths (256: bf16 only, its A operand is not in registers; "
                "e4m3's promoted accumulators double its registers)");
  static_assert(kMB == 1 || (kMB == 2 && kW == kBf16 && N <= 128),
                "tall tiles: bf16 (A from shared memory), at most 128 accumulators a thread");
  static constexpr int kTileRows = kRows * kMB;                      // weight rows of a CTA tile
  static constexpr int kSteps = kW == kE4m3 ? 4 : kStageK<kW> / 16;  // wgmma K steps a stage
  static constexpr int kTokBytes = N * kRowBytes<kW>;                // [boxes][N rows][128 bytes]
  static constexpr int kWeightBytes = kChunkSlot<kW> * kMB;
  static constexpr int kStageBytes = kWeightBytes + kTokBytes;
  // Two stages are in the consumers' hands (one group in flight, one being issued); the rest
  // let the producer run ahead: as many as fit, up to 4, 6 or 10 (bf16's half-size stages: 6,
  // 8 or 10).
  static constexpr int kMostStages = kSmemA<kW> ? (N >= 128  ? 6
                                                   : N >= 64 ? 8
                                                             : 10)
                                     : N >= 128 ? 4
                                     : N >= 64  ? 6
                                                : 10;
  static constexpr int kAccum = N / 2;          // f32 per thread and block: 64 rows x N / 128
  static constexpr int kOutLd = kTileRows + 8;  // bf16 per token row of the staged output
  // The stages that fit beside an epilogue staging N / passes token rows [N / passes][kOutLd].
  static constexpr int stages_beside(int passes) {
    const size_t fixed = size_t(N / passes) * kOutLd * 2 + 2 * 10 * sizeof(uint64_t) +
                         (kMaxGroups + 4) * sizeof(int) + 1024;
    const int fit = int((227 * 1024 - fixed) / kStageBytes);
    return fit < kMostStages ? fit : kMostStages;
  }
  // The epilogue stages and stores the tile in the fewest passes (1, 2 or 4 of N / passes
  // tokens) that leave room for the most stages (mxfp8 and bf16 at N = 128: 2; bf16 at 256: 4).
  // A pass stores whole stmatrix x4 groups of 32 tokens (gated): N = 96 takes one pass.
  static constexpr int most_passes() {
    const int s1 = stages_beside(1), s2 = N % 64 == 0 ? stages_beside(2) : 0;
    const int s4 = N % 128 == 0 ? stages_beside(4) : 0;
    const int best = s1 > s2 ? (s1 > s4 ? s1 : s4) : (s2 > s4 ? s2 : s4);
    return s1 == best ? 1 : s2 == best ? 2 : 4;
  }
  static constexpr int kPasses = most_passes();
  static constexpr int kPassN = N / kPasses;  // token rows staged at once
  static constexpr size_t kEpilogueBytes = size_t(kPassN) * kOutLd * 2;
  static constexpr int kStages = stages_beside(kPasses);
  static_assert(kStages >= 3, "two stages for the consumers, one for the producer");
  static constexpr size_t kEpilogueOffset = size_t(kStages) * kStageBytes;
  static constexpr size_t kBarrierOffset = kEpilogueOffset + kEpilogueBytes;
  static constexpr size_t kPrefixOffset = kBarrierOffset + 2 * kStages * sizeof(uint64_t);
  static constexpr size_t kSmemBytes = kPrefixOffset + (kMaxGroups + 4) * sizeof(int) + 1024;
  static_assert(kStageBytes % 1024 == 0, "stages keep the 1024-byte swizzle alignment");
  static_assert(kSmemBytes <= 227 * 1024, "fits an H100/H200 CTA");
};

struct Params {
  // [R, K] token rows (bf16, e4m3: e4m3), boxes of N rows x 128 bytes of K, 128-byte swizzle
  CUtensorMap rows_map;
  // narrow: the same rows in boxes of kNarrowBoxRows rows (a narrow last block's loads)
  CUtensorMap rows_map_narrow;
  bool narrow = false;  // narrow last blocks (kNarrowable instances only)
  // bf16, e4m3: the weight rows [R, K] viewed as [R / 16][2][8][K] (4D: K, then the row's
  // place in its 8, its half of the 16, the 16-row block), boxes of 8 x 2 x 8 rows x 128 bytes of
  // K: a box lands as 128 rows x 128 bytes (128-byte swizzle), row 16b + 8h + j. Prepared tiles
  // are viewed in order (row 16b + 8h + j of the stack); TensorRT-LLM's interleaved w13 (up row
  // 2c, gate row 2c + 1) with h picking the row of a pair, so each 16 rows of a box are the up
  // rows of 8 columns then their gate rows (up_first).
  CUtensorMap weights_map;
  int32_t weight_group_rows = 0;  // bf16, e4m3: rows of one group in the weight rows
  bool up_first = false;          // kGated: rows rloc are up rows, rloc + 8 their gate rows
  int32_t bias_col_stride = 1, gate_offset = 0;  // kGated: column c's gate bias at
                                                 // c * bias_col_stride + gate_offset
  const uint8_t* chunks;    // [groups][n_tiles][k_stages] prepared chunks, chunk_bytes each
  int32_t chunk_bytes = 0;  // 8704 (mxfp4), 9216 (nvfp4) or 16896 (mxfp8); bf16: unused
  int32_t groups = 0, n_tiles = 0;
  int32_t k_stages = 0;                  // stages of kStageK<kW> K
  const int64_t* offsets = nullptr;      // group g's rows [offsets[g], offsets[g + 1])
  int32_t skip_begin = 0, skip_end = 0;  // groups [begin, end) run no rows (sinks, run apart)
  const float* scale_2 = nullptr;        // [groups] (nvfp4's per-expert scale, e4m3's weight scale)
  // e4m3: the activation scale ([1], device), the shared expert's ([1], or null: act_scale) and
  // its group (-1: none); the epilogue multiplies scale_2[g] by the group's.
  const float* act_scale = nullptr;
  const float* act_scale_shared = nullptr;
  int32_t shared_group = -1;
  float unfold = 1.0f;  // 2^kFp4Unfold (4-bit), 1 (mxfp8): the fold of the bf16 operands taken back
  const float* bias = nullptr;  // [bias_groups][bias_ld] f32, or null
  int32_t bias_groups = 0;
  int64_t bias_ld = 0;
  int32_t up_offset = 0;  // kGated: the up columns' offset within a bias row
  int32_t epilogue = kPlain;
  int32_t activation = 0;  // kGated: the gated activation; kPlain: kRelu2 applies relu2
  bool plain_relu2 = false;
  ActivationParams act;
  uint16_t* out = nullptr;   // [R, out_ld] bf16
  float* out_f32 = nullptr;  // e4m3 only: [R, out_ld] f32 instead of `out`
  // With out_f32, or null: the largest |value| stored as float bits, [0] over the routed groups,
  // [1] over shared_group's (atomicMax, so the caller zeroes both first).
  uint32_t* out_amax = nullptr;
  uint8_t* out_e4m3 = nullptr;  // e4m3 only: codes of value / *out_e4m3_scale instead of `out`
  const float* out_e4m3_scale = nullptr;
  int64_t out_ld = 0;
  int32_t out_cols = 0;  // columns stored: [0, out_cols), a multiple of 8
};

// acc += A (64 weight rows: from registers, RS, or shared memory, SS) x B (N tokens x 16 K from
// shared memory; e4m3: 32 K, both from shared memory): CuTe's sm90 GMMA op of that shape, both
// operands K-major. (The 256-token tile is bf16 SS only: its 128 accumulators leave no room for
// register A fragments.)
template <int N>
struct Mma {
  template <int K>
  using Tile = cute::Shape<cute::_64, cute::Int<N>, cute::Int<K>>;
  static constexpr auto kK = cute::SM90::GMMA::Major::K;
  using Rs = decltype(cute::SM90::GMMA::rs_op_selector<cutlass::bfloat16_t, cutlass::bfloat16_t,
                                                       float, Tile<16>, kK, kK>());
  using Ss = decltype(cute::SM90::GMMA::ss_op_selector<cutlass::bfloat16_t, cutlass::bfloat16_t,
                                                       float, Tile<16>, kK, kK>());
  using E4m3 =
      decltype(cute::SM90::GMMA::ss_op_selector<cutlass::float_e4m3_t, cutlass::float_e4m3_t, float,
                                                Tile<32>, kK, kK>());
};

template <int N, size_t... I>
__device__ __forceinline__ void rs_mma(const uint32_t (&a)[4], uint64_t b, float* d,
                                       bool accumulate, std::index_sequence<I...>) {
  Mma<N>::Rs::fma(a[0], a[1], a[2], a[3], b, d[I]...,
                  accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
}
template <int N, size_t... I>
__device__ __forceinline__ void ss_mma(uint64_t a, uint64_t b, float* d, bool accumulate,
                                       std::index_sequence<I...>) {
  Mma<N>::Ss::fma(a, b, d[I]...,
                  accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
}

template <int N, size_t... I>
__device__ __forceinline__ void e4m3_mma(uint64_t a, uint64_t b, float* d, bool accumulate,
                                         std::index_sequence<I...>) {
  Mma<N>::E4m3::fma(
      a, b, d[I]...,
      accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
}

// The 256 consumer threads only (named barrier 1): the producer runs ahead.
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, 256;" ::: "memory");
}

// Two floats as a bf16 pair, `lo` in the low half (the lower column of an m8n8 fragment).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// stmatrix .trans of four (two) 8x8 bf16 m8n8 fragments: matrix m's column c lands, as 8
// consecutive bf16, at the row address given by lane 8m + c (16-byte aligned).
__device__ __forceinline__ void stmatrix_t4(uint16_t* row, uint32_t a, uint32_t b, uint32_t c,
                                            uint32_t d) {
  asm volatile("stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   cute::cast_smem_ptr_to_uint(row)),
               "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}
__device__ __forceinline__ void stmatrix_t2(uint16_t* row, uint32_t a, uint32_t b) {
  asm volatile("stmatrix.sync.aligned.x2.trans.m8n8.shared.b16 [%0], {%1, %2};\n" ::"r"(
                   cute::cast_smem_ptr_to_uint(row)),
               "r"(a), "r"(b)
               : "memory");
}

// Token rows and bf16 weight tiles alike: the CTAs running at once share them (the pair's
// multicast, group_tile_rows_first's order), so L2 keeps them as it would any other line.
constexpr uint64_t kCacheHint = uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL);

// kCluster = 2: the two CTAs of a cluster take the same token block and neighbouring weight
// tiles; each loads half of the token rows and multicasts them to both, so a token tile crosses
// from L2 once per pair (bf16 token tiles are most of a stage's bytes: at full wgmma rate a CTA
// alone would need more L2 bandwidth than there is). A stage is refilled only when the consumers
// of both CTAs have released it.
// kMB = 2 (bf16 only): tall tiles, each CTA tile two neighbouring prepared weight tiles (n_tiles
// even), warpgroup h issuing two wgmmas a K step over the two halves of prepared tile h: twice the
// flops per token byte, for 32 KB of weights a stage.
template <int kW, int N, int kCluster, int kMB = 1>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm(const __grid_constant__ Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  gpu::kernels::enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  using G = Geometry<kW, N, kMB>;
  extern __shared__ uint8_t smem_raw[];
  // Rounded up to 1024 bytes by pointer arithmetic on the shared array (not an integer round
  // trip, which hides the address space): the chunk reads compile to LDS, not generic loads.
  const uint32_t misalign = uint32_t(__cvta_generic_to_shared(smem_raw)) & 1023u;
  uint8_t* smem = smem_raw + ((1024u - misalign) & 1023u);
  auto* full = reinterpret_cast<uint64_t*>(smem + G::kBarrierOffset);
  uint64_t* empty = full + G::kStages;
  int* prefix = reinterpret_cast<int*>(smem + G::kPrefixOffset);
  const int wg = threadIdx.x / 128;
  const int rank = kCluster > 1 ? int(cute::block_rank_in_cluster()) : 0;
  const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;

  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(&p.rows_map);
    if constexpr (kNarrowable<kW, N, kCluster, kMB>)
      if (p.narrow) cute::prefetch_tma_descriptor(&p.rows_map_narrow);
    if constexpr (kSmemA<kW>) cute::prefetch_tma_descriptor(&p.weights_map);
    for (int s = 0; s < G::kStages; ++s) {
      cutlass::arch::ClusterBarrier::init(&full[s], 1);
      cutlass::arch::ClusterBarrier::init(&empty[s], 8 * kCluster);  // every consumer warp
    }
    cutlass::arch::fence_barrier_init();
  }
  // Ends with __syncthreads: the barriers are visible too.
  build_tile_prefix(
      p.groups, N,
      [&](int g) {
        return g >= p.skip_begin && g < p.skip_end ? int64_t(0) : p.offsets[g + 1] - p.offsets[g];
      },
      prefix);
  if constexpr (kCluster > 1) cute::cluster_sync();  // the peer's barriers exist
  const int n_units = p.n_tiles / (kCluster * kMB);
  const int units = prefix[p.groups] * n_units;
  auto tile_at = [&](int u) {
    GroupTile t = group_tile_rows_first(prefix, p.groups, n_units, u);
    t.block_n = t.block_n * kCluster + rank;
    return t;
  };

  // The unit this cluster takes in its round (round * clusters <= unit). Units go round-robin, but
  // with narrow last blocks the offset turns by one each round: a group's full and narrow blocks
  // of one weight tile are neighbouring units, so with an even cluster count a fixed offset
  // hands a cluster only full or only narrow blocks, the narrow clusters run ahead, and each
  // weight tile crosses DRAM twice where its two readers should have shared it through L2
  // (bench/NOTES.md, session 46: GEMM1 964 MB -> 1.62 GB at Qwen3 T = 4096). Turning, every
  // cluster alternates, and neighbours stay within about half a unit of each other.
  auto unit_at = [&](int round) {
    if constexpr (kNarrowable<kW, N, kCluster, kMB>) {
      if (p.narrow) return round * clusters + (cluster + round) % clusters;
    }
    return round * clusters + cluster;
  };

  // The width the block of group g starting at row block0 is computed at (Params::narrow): the
  // same for the producer and the consumers of every CTA of a cluster (one token block).
  auto token_width = [&](int g, int64_t block0) {
    if constexpr (kNarrowable<kW, N, kCluster, kMB>) {
      if (p.narrow) {
        const int64_t left = p.offsets[g + 1] - block0;
        return narrow_width(int(left < N ? left : N), N, kCluster);
      }
    }
    return N;
  };

  if (wg == 0) {
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int round = 0; round * clusters < units; ++round) {
        const int u = unit_at(round);
        if (u >= units) continue;  // the last round's
        const GroupTile t = tile_at(u);
        const int64_t block0 = p.offsets[t.group] + int64_t(t.block_m) * N;
        const int width = token_width(t.group, block0);
        const int part = width / kCluster;  // token rows this CTA loads for the cluster
        const int row0 = int(block0) + rank * part;
        const uint8_t* chunk =
            p.chunks + (size_t(t.group) * p.n_tiles + t.block_n) * p.k_stages * p.chunk_bytes;
        // bf16, e4m3: the CTA tile's first row (kMB tiles of 128 rows, consecutive)
        const int wrow = t.group * p.weight_group_rows + t.block_n * kMB * kRows;
        for (int ks = 0; ks < p.k_stages; ++ks) {
          cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
          uint8_t* dst = smem + size_t(stage) * G::kStageBytes;
          if constexpr (kSmemA<kW>) {
            // The CTA tile's 128 or 256 rows x 128 bytes of K, one box a prepared tile.
            cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
                &full[stage], uint32_t(G::kWeightBytes + width * kRowBytes<kW>));
            for (int b = 0; b < kMB; ++b)
              cute::SM90_TMA_LOAD_4D::copy(&p.weights_map, &full[stage], kCacheHint,
                                           dst + b * kChunkSlot<kW>, ks * kStageK<kW>, 0, 0,
                                           (wrow + b * kRows) / 16);
          } else {
            cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
                &full[stage], uint32_t(p.chunk_bytes + G::kTokBytes));
            cute::SM90_BULK_COPY_G2S::copy(chunk + size_t(ks) * p.chunk_bytes, &full[stage], dst,
                                           p.chunk_bytes);
          }
          uint8_t* tok = dst + G::kWeightBytes + rank * part * 128;
          for (int half = 0; half < kRowBytes<kW> / 128; ++half) {
            const int k0 = ks * kStageK<kW> + half * 64;
            if (kNarrowable<kW, N, kCluster, kMB> && width < N) {
              // A narrow last block: this CTA's part of its rows, 16 at a time.
              for (int r = 0; r < part; r += kNarrowBoxRows) {
                uint8_t* to = tok + half * N * 128 + r * 128;
                if constexpr (kCluster > 1)
                  cute::SM90_TMA_LOAD_MULTICAST_2D::copy(&p.rows_map_narrow, &full[stage],
                                                         uint16_t((1 << kCluster) - 1), kCacheHint,
                                                         to, k0, row0 + r);
                else
                  cute::SM90_TMA_LOAD_2D::copy(&p.rows_map_narrow, &full[stage], kCacheHint, to, k0,
                                               row0 + r);
              }
            } else if constexpr (kCluster > 1)
              cute::SM90_TMA_LOAD_MULTICAST_2D::copy(&p.rows_map, &full[stage],
                                                     uint16_t((1 << kCluster) - 1), kCacheHint,
                                                     tok + half * N * 128, k0, row0);
            else
              cute::SM90_TMA_LOAD_2D::copy(&p.rows_map, &full[stage], kCacheHint,
                                           tok + half * N * 128, k0, row0);
          }
          if (++stage == G::kStages) stage = 0, phase ^= 1;
        }
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
    const int half = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = t128 % 32;
    const int t256 = threadIdx.x - 128;
    const int rloc = warp * 16 + lane / 4;  // this thread's rows of its warpgroup: rloc, rloc + 8
    const int q = lane % 4;
    auto* staged = reinterpret_cast<uint16_t*>(smem + G::kEpilogueOffset);
    // e4m3 codes staged a token row per kOutLd bf16 (272 bytes: a row two tokens on starts 8
    // banks on, so a warp's bytes of four token pairs land in distinct banks), from tiles of
    // kStagedCodesN tokens on; smaller tiles store them from registers, one byte a thread (the
    // staging's two barriers a tile cost them 1-2%: bench/NOTES.md, session 27).
    constexpr int kCodeLd = G::kOutLd * 2;
    constexpr int kStagedCodesN = 128;
    // Block s (kMB of them) of kAccum values: this warpgroup's 64-row slice half * kMB + s of the
    // CTA tile.
    constexpr int kAcc = G::kAccum * kMB;
    float acc[kAcc];
    int stage = 0;
    uint32_t phase = 0;
    // This warp is done with stage `s`, in every CTA whose producer fills it.
    auto release = [&](int s) {
      __syncwarp();
      if (lane == 0)
        for (int c = 0; c < kCluster; ++c)
          cutlass::arch::ClusterBarrier::arrive(&empty[s], uint32_t(c), 1u);
    };
    // The current stage's K steps (8; bf16: 4), one wgmma each, committed as one group: A
    // fragments dequantised into `a` (kept until the group completes), or for bf16 read from
    // shared memory as B is. `first`: the tile's first stage. `width`: the tokens computed
    // (std::integral_constant; N but for a narrow last block, bf16 only).
    auto issue = [&](uint32_t(&a)[8][4], bool first, auto width) {
      constexpr int NN = decltype(width)::value;
      const uint8_t* w = smem + size_t(stage) * G::kStageBytes;
      const uint64_t desc = kmajor_sw128_desc(w + G::kWeightBytes);
      cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
      if constexpr (kW == kBf16) {
        // This warpgroup's 64-row slices of the swizzled tile (8 KB each), 32 bytes a K step.
        uint64_t da[kMB];
#pragma unroll
        for (int b = 0; b < kMB; ++b)
          da[b] = kmajor_sw128_desc(w + (half * kMB + b) * kWgRows * 128);
        cute::warpgroup_arrive();
#pragma unroll
        for (int j = 0; j < G::kSteps; ++j)
#pragma unroll
          for (int b = 0; b < kMB; ++b)
            ss_mma<NN>(desc_advance(da[b], j * 32), desc_advance(desc, j * 32), acc + b * G::kAccum,
                       !(first && j == 0), std::make_index_sequence<NN / 2>{});
        cute::warpgroup_commit_batch();
      } else {
        static_assert(NN == N, "narrow blocks are bf16's");
        const Rows<kW> rows(w, half * kWgRows + rloc, q);
        // All 8 K steps' fragments first (independent chains the scheduler can interleave), then
        // one fence for the registers they wrote, then the 8 wgmmas back to back.
#pragma unroll
        for (int j = 0; j < 8; ++j) rows.fragments(j, a[j]);
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) cute::warpgroup_fence_operand(a[j][i]);
        cute::warpgroup_arrive();
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          // K step j: K half j / 4 (N rows of 128 bytes), 32 bytes per step within it.
          const uint64_t db = desc_advance(desc, (j / 4) * N * 128 + (j % 4) * 32);
          rs_mma<N>(a[j], db, acc, !(first && j == 0), std::make_index_sequence<G::kAccum>{});
        }
        cute::warpgroup_commit_batch();
      }
    };
    // After the group that read `a` completed: its registers may be reused from here on.
    auto retire = [](uint32_t(&a)[8][4]) {
      if constexpr (kW != kBf16)  // bf16: nothing in registers
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) cute::warpgroup_fence_operand(a[j][i]);
    };
    auto advance = [&] {
      if (++stage == G::kStages) stage = 0, phase ^= 1;
    };
    // e4m3: one stage at a time into `part`, promoted into `acc` when it completes (the other
    // warpgroup's wgmmas keep the tensor cores busy meanwhile).
    auto e4m3_tile = [&] {
      if constexpr (kW == kE4m3) {
        // acc starts at zero and every stage adds (a select of the first stage's sums would
        // double the promotion's instructions: SASS showed an FSEL beside every FADD).
#pragma unroll
        for (int i = 0; i < G::kAccum; ++i) acc[i] = 0.0f;
        float part[G::kAccum];
        for (int ks = 0; ks < p.k_stages; ++ks) {
          const uint8_t* w = smem + size_t(stage) * G::kStageBytes;
          const uint64_t db = kmajor_sw128_desc(w + G::kWeightBytes);
          const uint64_t da = kmajor_sw128_desc(w + half * kWgRows * 128);
          cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
#pragma unroll
          for (int i = 0; i < G::kAccum; ++i) cute::warpgroup_fence_operand(part[i]);
          cute::warpgroup_arrive();
#pragma unroll
          for (int j = 0; j < G::kSteps; ++j)  // 32 K (bytes) a step
            e4m3_mma<N>(desc_advance(da, j * 32), desc_advance(db, j * 32), part, j != 0,
                        std::make_index_sequence<G::kAccum>{});
          cute::warpgroup_commit_batch();
          cute::warpgroup_wait<0>();
#pragma unroll
          for (int i = 0; i < G::kAccum; ++i) cute::warpgroup_fence_operand(part[i]);
          release(stage);
          advance();
#pragma unroll
          for (int i = 0; i < G::kAccum; ++i) acc[i] += part[i];
        }
      }
    };
    uint32_t a0[8][4], a1[8][4];
    // The largest |value| this thread stored as f32 (e4m3 with out_amax): routed groups, shared.
    float amax_routed = 0.0f, amax_shared = 0.0f;
    for (int round = 0; round * clusters < units; ++round) {
      const int u = unit_at(round);
      if (u >= units) continue;  // the last round's
      const GroupTile t = tile_at(u);
      const int64_t first = p.offsets[t.group] + int64_t(t.block_m) * N;
      const int64_t left = p.offsets[t.group + 1] - first;
      const int count = int(left < N ? left : N);  // >= 1
      if constexpr (kW == kE4m3) {
        e4m3_tile();
      } else {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(acc[i]);
        // Two stages in flight: stage ks's group is issued while stage ks - 1's still runs, then
        // ks - 1 is waited for and released. Even stages use a0, odd ones a1.
        auto main_loop = [&](auto width) {
          int prev = -1;
          for (int ks = 0; ks < p.k_stages; ks += 2) {
            issue(a0, ks == 0, width);
            const int s0 = stage;
            advance();
            if (prev >= 0) {
              cute::warpgroup_wait<1>();
              retire(a1);
              release(prev);
            }
            prev = s0;
            if (ks + 1 < p.k_stages) {
              issue(a1, false, width);
              const int s1 = stage;
              advance();
              cute::warpgroup_wait<1>();
              retire(a0);
              release(prev);
              prev = s1;
            }
          }
          cute::warpgroup_wait<0>();
          retire(a0);
          retire(a1);
          release(prev);
        };
        if constexpr (kNarrowable<kW, N, kCluster, kMB>)
          with_token_width<N, kNarrowBoxRows * kCluster>(token_width(t.group, first), main_loop);
        else
          main_loop(std::integral_constant<int, N>{});
#pragma unroll
        for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(acc[i]);
      }

      // Epilogue. Accumulator value 4j + {0, 1}: chunk row rloc, tokens 8j + 2q + {0, 1};
      // 4j + {2, 3}: chunk row rloc + 8, the same tokens: per j, two 8x8 m8n8 fragments (weight
      // rows x tokens) that stmatrix .trans stores token-major into the staged tile, a 16-byte
      // row piece per token. Lane l gives the address of row l % 8 of matrix l / 8. Tall tiles
      // (kMB = 2): block b of the accumulators is the tile's 64-row slice half * 2 + b, whose
      // columns follow those of slice half * 2 + b - 1 in the staged tile and in the output.
      float mul = p.unfold * (p.scale_2 != nullptr ? p.scale_2[t.group] : 1.0f);
      if constexpr (kW == kE4m3)
        mul *= t.group == p.shared_group && p.act_scale_shared != nullptr ? *p.act_scale_shared
                                                                          : *p.act_scale;
      const bool has_bias = p.bias != nullptr && t.group < p.bias_groups;
      const float* bias = has_bias ? p.bias + int64_t(t.group) * p.bias_ld : nullptr;
      const int mat = lane / 8, mrow = lane % 8;
      const bool gated = p.epilogue == kGated;
      // One value of an f32 output (e4m3 GEMM1), or its e4m3 code (tiles under kStagedCodesN
      // tokens), and its share of the thread's amax; the tile's amax then enters the thread's of
      // its kind.
      auto put = [&](int64_t at, float y, float& amax, float scale, float inv) {
        if (p.out_e4m3 != nullptr)
          p.out_e4m3[at] = to_e4m3(y, scale, inv);
        else
          p.out_f32[at] = y;
        amax = fmaxf(amax, fabsf(y));
      };
      // e4m3 codes: the static scale and its correctly rounded inverse, as the quantiser takes
      // them (read per tile, so that they hold no registers through the main loop).
      auto out_scale = [&] { return p.out_e4m3 != nullptr ? *p.out_e4m3_scale : 1.0f; };
      auto keep_amax = [&](float amax) {
        if (t.group == p.shared_group)
          amax_shared = fmaxf(amax_shared, amax);
        else
          amax_routed = fmaxf(amax_routed, amax);
      };
      // Stores staged token rows pass * kPassN.. of the tile (those it has): 64 (gated) or 128
      // columns a prepared tile, 16 bytes per store.
      auto store = [&](int pass) {
        consumers_sync();  // the staged rows are complete
        const int cols = (gated ? kWgRows : kRows) * kMB, pieces = cols / 8;
        const int out0 = t.block_n * cols;
        const int t0 = pass * G::kPassN;
        const int rows = count - t0 < G::kPassN ? count - t0 : G::kPassN;
        for (int idx = t256; idx < rows * pieces; idx += 256) {
          const int tok = idx / pieces, c = (idx % pieces) * 8;
          if (out0 + c >= p.out_cols) continue;
          const uint4 v = *reinterpret_cast<const uint4*>(staged + tok * G::kOutLd + c);
          *reinterpret_cast<uint4*>(p.out + (first + t0 + tok) * p.out_ld + out0 + c) = v;
        }
      };
      // e4m3 codes: the staged token rows hold bytes (kCodeLd a row), and the tile's 64 (gated)
      // or 128 columns leave in 8-byte pieces (out_ld and out_cols are multiples of 8): a warp
      // store writes whole 32-byte sectors of four rows, where one byte a thread wrote an eighth
      // of four sectors.
      uint8_t* const codes = reinterpret_cast<uint8_t*>(staged);
      auto store_codes = [&](int pass) {
        consumers_sync();  // the staged codes are complete
        const int cols = gated ? kWgRows : kRows, pieces = cols / 8;
        const int out0 = t.block_n * cols;
        const int t0 = pass * G::kPassN;
        const int rows = count - t0 < G::kPassN ? count - t0 : G::kPassN;
        for (int idx = t256; idx < rows * pieces; idx += 256) {
          const int tok = idx / pieces, c = (idx % pieces) * 8;
          if (out0 + c >= p.out_cols) continue;
          *reinterpret_cast<uint2*>(p.out_e4m3 + (first + t0 + tok) * p.out_ld + out0 + c) =
              *reinterpret_cast<const uint2*>(codes + tok * kCodeLd + c);
        }
      };
      // The codes a pass of kPassN tokens at a time: write(pass) fills the staging space once the
      // previous pass's (or tile's) codes have left it, then they are stored.
      auto stage_codes = [&](auto write) {
#pragma unroll
        for (int pass = 0; pass < G::kPasses; ++pass) {
          if (pass * G::kPassN >= count) break;  // no tokens left (uniform)
          consumers_sync();  // the staged codes were stored (previous pass or tile)
          write(pass);
          store_codes(pass);
        }
      };
      if (gated) {
        // TensorRT-LLM's interleaved rows land up rows first (weights_map): put each gate value
        // where the prepared tiles' would be.
        if (p.up_first) {
#pragma unroll
          for (int i = 0; i < kAcc; i += 4) {
            const float u0 = acc[i], u1 = acc[i + 1];
            acc[i] = acc[i + 2], acc[i + 1] = acc[i + 3];
            acc[i + 2] = u0, acc[i + 3] = u1;
          }
        }
        // Rows rloc and rloc + 8 are a gate column and its up row (GatePairing::kRowPairs): the
        // thread applies the activation to its own pairs. The warp's 8 columns of the tile's 64:
        // slice half * kMB + b's 32, warp w's 8; one 8x8 output matrix per j.
        int cbase[kMB];
        float bg[kMB], bu[kMB];
#pragma unroll
        for (int b = 0; b < kMB; ++b) {
          cbase[b] = (half * kMB + b) * 32 + warp * 8;
          const int col = t.block_n * kWgRows * kMB + cbase[b] + lane / 4;
          bg[b] = has_bias ? bias[int64_t(col) * p.bias_col_stride + p.gate_offset] : 0.0f;
          bu[b] = has_bias ? bias[int64_t(col) * p.bias_col_stride + p.up_offset] : 0.0f;
        }
        // One unrolled loop per activation, chosen once per tile (no switch per value).
        auto gated_tile = [&](auto kind) {
          constexpr int32_t kAct = decltype(kind)::value;
          if constexpr (kW == kE4m3) {
            if (N >= kStagedCodesN && p.out_e4m3 != nullptr) {
              // e4m3 codes into the staged rows, one pass of kPassN tokens at a time: the
              // thread's column of the tile's 64, its two tokens of each 8.
              const int c = cbase[0] + lane / 4;
              const float sc = out_scale(), inv = e4m3_inverse(sc);
              stage_codes([&](int pass) {
#pragma unroll
                for (int jj = 0; jj < G::kPassN / 8; ++jj) {
                  const float* v = acc + 4 * (pass * (G::kPassN / 8) + jj);
                  const int tok = 8 * jj + 2 * q;
                  codes[tok * kCodeLd + c] = to_e4m3(
                      activate<true>(p.act, kAct, fmaf(v[0], mul, bg[0]), fmaf(v[2], mul, bu[0])),
                      sc, inv);
                  codes[(tok + 1) * kCodeLd + c] = to_e4m3(
                      activate<true>(p.act, kAct, fmaf(v[1], mul, bg[0]), fmaf(v[3], mul, bu[0])),
                      sc, inv);
                }
              });
              return;
            }
            if (p.out_f32 != nullptr || p.out_e4m3 != nullptr) {
              // f32 or e4m3 from registers: 8 columns x 4 tokens a warp store
              const int col = t.block_n * kWgRows + cbase[0] + lane / 4;
              if (col >= p.out_cols) return;
              const int64_t at = first * p.out_ld + col;
              const float sc = out_scale(), inv = e4m3_inverse(sc);
              float amax = 0.0f;
#pragma unroll
              for (int j = 0; j < N / 8; ++j) {
                const float* v = acc + 4 * j;
                const int tok = 8 * j + 2 * q;
                if (tok < count)
                  put(at + tok * p.out_ld,
                      activate<true>(p.act, kAct, fmaf(v[0], mul, bg[0]), fmaf(v[2], mul, bu[0])),
                      amax, sc, inv);
                if (tok + 1 < count)
                  put(at + (tok + 1) * p.out_ld,
                      activate<true>(p.act, kAct, fmaf(v[1], mul, bg[0]), fmaf(v[3], mul, bu[0])),
                      amax, sc, inv);
              }
              keep_amax(amax);
              return;
            }
          }
          auto out = [&](int b, int j) {
            const float* v = acc + b * G::kAccum + 4 * j;
            const float g0 = fmaf(v[0], mul, bg[b]), u0 = fmaf(v[2], mul, bu[b]);
            const float g1 = fmaf(v[1], mul, bg[b]), u1 = fmaf(v[3], mul, bu[b]);
            return pack_bf16x2(activate<true>(p.act, kAct, g0, u0),
                               activate<true>(p.act, kAct, g1, u1));
          };
          if constexpr (N >= 32) {
            constexpr int kPer = N / 32 / G::kPasses;  // stmatrix x4 a pass
#pragma unroll
            for (int pass = 0; pass < G::kPasses; ++pass) {
              if (pass * G::kPassN >= count) break;  // no tokens left (uniform)
              consumers_sync();  // the staged rows were stored (previous pass or tile)
#pragma unroll
              for (int b = 0; b < kMB; ++b)
#pragma unroll
                for (int k = 0; k < kPer; ++k) {  // j = 4K .. 4K + 3, K = pass * kPer + k
                  const int kk = pass * kPer + k;
                  stmatrix_t4(staged + (8 * (4 * k + mat) + mrow) * G::kOutLd + cbase[b],
                              out(b, 4 * kk), out(b, 4 * kk + 1), out(b, 4 * kk + 2),
                              out(b, 4 * kk + 3));
                }
              store(pass);
            }
          } else {
            consumers_sync();
#pragma unroll
            for (int b = 0; b < kMB; ++b)
              stmatrix_t2(staged + (8 * (mat % 2) + mrow) * G::kOutLd + cbase[b], out(b, 0),
                          out(b, 1));
            store(0);
          }
        };
        switch (p.activation) {
          case kSiluMulClamp:
            gated_tile(std::integral_constant<int32_t, kSiluMulClamp>{});
            break;
          case kSwigluOai:
            gated_tile(std::integral_constant<int32_t, kSwigluOai>{});
            break;
          case kGeluMul:
            gated_tile(std::integral_constant<int32_t, kGeluMul>{});
            break;
          default:
            gated_tile(std::integral_constant<int32_t, kSiluMul>{});
        }
      } else {
        // 128 output columns a prepared tile: slice half * kMB + b's 64 rows, the thread's rloc
        // and rloc + 8; per j a matrix of the warp's first 8 rows and one of the next 8.
        float b_lo[kMB], b_hi[kMB];
#pragma unroll
        for (int b = 0; b < kMB; ++b) {
          const int col0 = t.block_n * G::kTileRows + (half * kMB + b) * kWgRows;
          b_lo[b] = has_bias ? bias[col0 + rloc] : 0.0f;
          b_hi[b] = has_bias ? bias[col0 + rloc + 8] : 0.0f;
        }
        auto plain_tile = [&](auto relu2) {
          auto value = [&](int b, int i) {
            const float v = fmaf(acc[b * G::kAccum + i], mul, (i % 4) < 2 ? b_lo[b] : b_hi[b]);
            if constexpr (decltype(relu2)::value) return activate<true>(p.act, kRelu2, v, 0.0f);
            return v;
          };
          if constexpr (kW == kE4m3) {
            if (N >= kStagedCodesN && p.out_e4m3 != nullptr) {  // staged, as the gated tile
              const int c = half * kWgRows + rloc;  // and c + 8, of the tile's 128 columns
              const float sc = out_scale(), inv = e4m3_inverse(sc);
              stage_codes([&](int pass) {
#pragma unroll
                for (int ii = 0; ii < G::kPassN / 2; ++ii) {
                  const int i = pass * (G::kPassN / 2) + ii;
                  const int tok = 8 * (ii / 4) + 2 * q + ii % 2, dc = (ii % 4) < 2 ? 0 : 8;
                  codes[tok * kCodeLd + c + dc] = to_e4m3(value(0, i), sc, inv);
                }
              });
              return;
            }
            if (p.out_f32 != nullptr || p.out_e4m3 != nullptr) {  // as the gated tile does
              const int col = t.block_n * kRows + half * kWgRows + rloc;
              const int64_t at = first * p.out_ld + col;
              const float sc = out_scale(), inv = e4m3_inverse(sc);
              float amax = 0.0f;
#pragma unroll
              for (int i = 0; i < G::kAccum; ++i) {
                const int tok = 8 * (i / 4) + 2 * q + i % 2, dc = (i % 4) < 2 ? 0 : 8;
                if (tok < count && col + dc < p.out_cols)
                  put(at + tok * p.out_ld + dc, value(0, i), amax, sc, inv);
              }
              keep_amax(amax);
              return;
            }
          }
          auto pair = [&](int b, int i) { return pack_bf16x2(value(b, i), value(b, i + 1)); };
          constexpr int kPer = N / 16 / G::kPasses;  // stmatrix x4 a pass
#pragma unroll
          for (int pass = 0; pass < G::kPasses; ++pass) {
            if (pass * G::kPassN >= count) break;  // no tokens left (uniform)
            consumers_sync();  // the staged rows were stored (previous pass or tile)
#pragma unroll
            for (int b = 0; b < kMB; ++b)
#pragma unroll
              for (int k = 0; k < kPer; ++k) {  // j = 2K, 2K + 1, K = pass * kPer + k
                const int kk = pass * kPer + k;
                stmatrix_t4(staged + (8 * (2 * k + mat / 2) + mrow) * G::kOutLd +
                                (half * kMB + b) * kWgRows + warp * 16 + (mat % 2) * 8,
                            pair(b, 8 * kk), pair(b, 8 * kk + 2), pair(b, 8 * kk + 4),
                            pair(b, 8 * kk + 6));
              }
            store(pass);
          }
        };
        if (p.plain_relu2)
          plain_tile(std::true_type{});
        else
          plain_tile(std::false_type{});
      }
    }
    // One atomic a warp and kind for the whole persistent loop (non-negative floats order like
    // their bits; fmaxf has dropped NaN, as the amax kernel's reduction does).
    if constexpr (kW == kE4m3) {
      if (p.out_amax != nullptr) {
        const uint32_t routed = __reduce_max_sync(0xffffffffu, __float_as_uint(amax_routed));
        const uint32_t shared = __reduce_max_sync(0xffffffffu, __float_as_uint(amax_shared));
        if (lane == 0 && routed != 0) atomicMax(p.out_amax, routed);
        if (lane == 0 && shared != 0) atomicMax(p.out_amax + 1, shared);
      }
    }
  }
  // A CTA leaves only when its peer no longer arrives on its barriers or writes its stages.
  if constexpr (kCluster > 1) cute::cluster_sync();
#endif
}

}  // namespace moe::gpu::kernels::wo
