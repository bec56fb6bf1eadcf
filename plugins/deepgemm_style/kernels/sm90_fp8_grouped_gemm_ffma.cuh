// deepgemm_style's own grouped fp8 block-scale GEMM for sm90a (docs/design.md §3 fp8_block,
// bench/NOTES.md "deepgemm_style: own kernel"): out[r, :N] = sum over 128-wide K blocks kb of
// (rows[r, kb] . weights[g][:, kb]) * row_scale[kb][r] * w_scale[g][kb][n / 128].
//
// One CTA per SM, persistent: warpgroup 0 loads row tiles (64 x kWgs rows x 128 K) and 128x128
// weight tiles with TMA into a ring of shared-memory stages; each of the kWgs consumer warpgroups
// (2: 128-row tiles, 3: 192-row tiles) multiplies 64 rows of the tile with wgmma (e4m3 x e4m3,
// fp32 accumulate) and, after every K block, promotes the block's partial sums into a second fp32
// accumulator with FFMA, both scales applied: the tensor cores' own fp8 accumulation keeps fewer
// mantissa bits than fp32, so it never spans two K blocks. A consumer whose 64 rows hold no row
// of the group stays idle (it only releases the stages): a group of 128 + 11 rows costs 1.5
// 128-row tiles of tensor work, not 2, though the second tile still streams its whole weight tile
// (bench/NOTES.md: that, not the tensor work, is what such tiles cost). 192-row tiles exist for
// that case: groups of ~128 +- 11 rows (Mixtral at T = 512) then stream each weight tile once,
// and the third consumer only works for the groups that reach it.
//
// Ping-pong (two consumers, K at least as deep as the stage ring): a tile of at most 64 rows
// ("solo": a decode-sized group, or the remainder of a group) needs one consumer, and the two
// take such tiles in turn, so one's epilogue runs while the other multiplies the next tile; a
// tile of more rows takes both, as above. A consumer that skips a solo tile does not wait on its
// stages (it advances its ring position by K blocks) and, before its next tile, waits on a named
// barrier for the owner to have seen all of the skipped tile's stages filled, so that its own
// first waits are never two phases ahead of a barrier. The owner releases each stage for both
// consumers (two arrivals a warp).
//
// Tiles are numbered group by group, and within a group the row blocks of one weight tile
// (pair) consecutively (kernels/group_tiles.cuh, group_tile_rows_first): the CTAs working at one
// moment share weight tiles, which L2 serves, even where a group's weights outgrow L2. Every CTA
// derives the same numbering from the group row counts, which live on the device (contiguous
// offsets or masked counts), so a launch reads nothing back to the host.
//
// Out = uint8_t: GEMM1 of a gated layer with the activation and the intermediate's 1x128 e4m3
// quantisation in the epilogue (`fused` below), so the intermediate never exists in f32. Tile n
// takes gate rows 64n.. and up rows I + 64n.. of the weights (two 64-row TMA boxes, each with its
// 128x128 block's scale), so a thread holds a gate value and its up value in one accumulator set;
// the two CTAs of a cluster hold neighbouring tiles, the two halves of a 128-channel scale
// block, and trade each row's largest |value| through distributed shared memory: consumer w of
// one CTA with consumer w of the other (the two run the same tiles, as both CTAs derive the same
// owners), through two slots of their own. The exchange waits on the slower CTA of the pair once a
// tile (~7500 cycles a tile at 16 rows an expert, against a 13000-cycle main loop; bench/NOTES.md
// session 30, where one CTA computing both halves in turn measured slower still). The codes and
// scales are those of the separate activation kernel (kernels/activation.cuh), bit for bit: the
// same f32 sums, the same accurate activation and the same quantiser.
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
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include "kernels/activation.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gmma_desc.cuh"
#include "kernels/group_tiles.cuh"
#include "kernels/quantize.cuh"

namespace moe::deepgemm::kernels::ffma {

constexpr int kBlockN = 128;  // one weight scale block wide
constexpr int kBlockK = 128;  // one scale block deep: 128 e4m3 = one 128-byte swizzle row
constexpr int kWgRows = 64;
constexpr int kMaxGroups = 1024;  // the tile prefix lives in shared memory
constexpr int kTileBBytes = kBlockN * kBlockK;
constexpr int kBoxBytes = kWgRows * kBlockK;     // one consumer's 64 rows of the row tile
constexpr int kAccum = kWgRows * kBlockN / 128;  // fp32 values per thread per accumulator set
// A stage is full when the TMA thread's bytes have landed and the 32 scale lanes' copies have.
constexpr int kFullArrivals = 1 + 32;
// Words of a timeline record (Params::timeline).
constexpr int kTimelineWords = 6;

// The geometry of kWgs consumer warpgroups (2 or 3) of 64 rows each; kSplit: split K over a CTA
// pair (below), 128-row tiles only.
template <int kWgs, bool kSplit = false>
struct Tile {
  static_assert(kWgs == 2 || kWgs == 3, "128- or 192-row tiles");
  static_assert(!kSplit || kWgs == 2, "split K: 128-row tiles");
  static constexpr int kBlockM = kWgs * kWgRows;
  static constexpr int kThreads = 128 * (kWgs + 1);
  static constexpr int kTileABytes = kBlockM * kBlockK;
  static constexpr int kStageBytes = kTileABytes + kTileBBytes;
  // As many as fit 227 KB (split K: beside the partial sums' exchange).
  static constexpr int kStages = kSplit ? 4 : kWgs == 2 ? 6 : 5;
  // Shared memory: the stages (1024-byte aligned for the 128-byte swizzle), the barriers (the
  // stages' full and empty, then the fused epilogue's exchange: one for each of two slots per
  // consumer, then split K's: full and empty per consumer), the prefix of row blocks per group,
  // per stage the tile's row scales and its weight scales (gate and up when fused), per consumer
  // the fused exchange's two slots of a row's largest |value|, and split K's per consumer 64 x 128
  // partial sums.
  static constexpr int kScaleStride = kBlockM + 4;  // floats per stage: row scales, weight scales
  static constexpr size_t kBarrierOffset = size_t(kStages) * kStageBytes;
  static constexpr size_t kPrefixOffset =
      kBarrierOffset + (2 * kStages + 4 * kWgs) * sizeof(uint64_t);
  static constexpr size_t kScaleOffset = kPrefixOffset + (kMaxGroups + 4) * sizeof(int);
  static constexpr size_t kSwapOffset = kScaleOffset + kStages * kScaleStride * sizeof(float);
  static constexpr size_t kPartialOffset = kSwapOffset + kWgs * 2 * kWgRows * sizeof(float);
  static constexpr size_t kPartialBytes = kSplit ? size_t(kWgs) * kWgRows * kBlockN * 4 : 0;
  static constexpr size_t kSmemBytes = kPartialOffset + kPartialBytes + 1024;
  // Registers per thread after the split: what the producers give up must cover what the
  // consumers take (65536 an SM, one CTA), or setmaxnreg.inc waits forever. Two consumers: 128 x
  // (168 - 72) = 256 x (216 - 168) (the producers spill at 40); three: 128 x 56 + 384 x 152 =
  // 65536, the consumers' 64 + 64 accumulators and their addresses within 152.
  static constexpr int kProducerRegs = kWgs == 2 ? 72 : 56;
  static constexpr int kConsumerRegs = kWgs == 2 ? 216 : 152;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  // The pool is what the launch gives each thread (65536 / kThreads, in steps of 8) times the
  // threads, not 65536: 80 / 216 with two consumers (65536) hung.
  static_assert(128 * kProducerRegs + 128 * kWgs * kConsumerRegs <=
                    kThreads * ((65536 / kThreads) & ~7),
                "registers");
};

struct Params {
  CUtensorMap rows_map;     // [R, K] e4m3, box 64 rows x 128 K, 128-byte swizzle
  CUtensorMap weights_map;  // [G * N, K] e4m3, box 128 x 128, 128-byte swizzle
  int groups = 0, n = 0, k = 0;
  const int64_t* offsets = nullptr;  // contiguous: group g has rows [offsets[g], offsets[g+1])
  const int32_t* counts = nullptr;   // masked: rows [g * max_m, g * max_m + counts[g])
  int64_t max_m = 0;
  const float* row_scales = nullptr;  // [K/128][scale_ld]
  int64_t scale_ld = 0;
  const float* w_scales = nullptr;  // [G][K/128][N/128]
  void* out = nullptr;              // [R, N], f32 or bf16; fused: [R, I] e4m3 codes
  // Fused (Out = uint8_t): weights_map's boxes are 64 rows; I = N / 2 (gate rows, then up rows).
  float* code_scales = nullptr;  // [I/128][code_scale_ld]: the scale of row r's block b
  int64_t code_scale_ld = 0;
  const float* bias = nullptr;  // [bias_groups][N] f32 in GEMM1's columns, or null
  int32_t bias_groups = 0;
  int64_t bias_ld = 0;
  // The activation's alpha, limit and gelu form (the activation itself is the instance's kAct).
  gpu::kernels::ActivationParams act{};
  // Measurement (src/fp8_gemm_launch.hpp Fp8Timeline): per CTA and consumer, `timeline_tiles`
  // records of (unit, clock at the tile's start, at its main loop's end, before and after the
  // fused exchange of row maxima, at its epilogue's end); the unit's bits 32 and 33: the fused
  // epilogue's activation and quantisation took their exact paths (somewhere in warp 0).
  unsigned long long* timeline = nullptr;
  int32_t timeline_tiles = 0;
  // The swapped-operand kernel: the group rows (offsets or counts) were settled before the
  // previous launch began, so its tile schedule and first weight boxes may come before it awaits
  // that launch (PDL; kernels/sm90_fp8_grouped_gemm_swapab.cuh).
  int32_t early_weights = 0;
};

struct GroupRows {
  int64_t first, count;
};

__device__ __forceinline__ GroupRows group_rows(const Params& p, int g) {
  if (p.counts != nullptr) {
    const int64_t c = p.counts[g];
    return {int64_t(g) * p.max_m, c < 0 ? 0 : (c > p.max_m ? p.max_m : c)};
  }
  return {p.offsets[g], p.offsets[g + 1] - p.offsets[g]};
}

// One K block's wgmma batch into `acc`, as both own kernels issue it: the accumulators fenced
// around `issue()` (its wgmma calls, one commit group), then awaited.
template <int kN, class Issue>
__device__ __forceinline__ void wgmma_batch(float (&acc)[kN], Issue&& issue) {
#pragma unroll
  for (int i = 0; i < kN; ++i) cute::warpgroup_fence_operand(acc[i]);
  cute::warpgroup_arrive();
  issue();
  cute::warpgroup_commit_batch();
#pragma unroll
  for (int i = 0; i < kN; ++i) cute::warpgroup_fence_operand(acc[i]);
  cute::warpgroup_wait<0>();
}

// K-major operands in 128-byte swizzled tiles (kernels/gmma_desc.cuh).
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  return gpu::kernels::kmajor_sw128_desc(p);
}

template <size_t... I>
__device__ __forceinline__ void wgmma_64x128x32(uint64_t a, uint64_t b, float* d, bool accumulate,
                                                std::index_sequence<I...>) {
  cute::SM90::GMMA::MMA_64x128x32_F32E4M3E4M3_SS_TN<>::fma(
      a, b, d[I]...,
      accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
}

// 4-byte asynchronous copy to shared memory, zeros when !valid.
__device__ __forceinline__ void copy_float_async(float* dst, const float* src, bool valid) {
  asm volatile(
      "cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(cute::cast_smem_ptr_to_uint(dst)),
      "l"(src), "r"(valid ? 4 : 0)
      : "memory");
}

// Arrives on `bar` once this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void arrive_after_copies(uint64_t* bar) {
  asm volatile(
      "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(cute::cast_smem_ptr_to_uint(bar))
      : "memory");
}

// One warpgroup's 64 x 128 result (this thread: rows r and r + 8, columns 8j + 2q + {0, 1}).
// f32: each quad writes 32 contiguous bytes of a row per j. bf16: the quad first trades values so
// that each thread holds 4 consecutive columns, and a quad writes a whole 32-byte sector.
template <class Out>
__device__ __forceinline__ void store_tile(Out* out, int64_t ld, int64_t r, bool has_lo,
                                           bool has_hi, int col0, int q, const float* total) {
  if constexpr (::std::is_same_v<Out, float>) {
#pragma unroll
    for (int j = 0; j < kAccum / 4; ++j) {
      const int col = col0 + 8 * j + 2 * q;
      if (has_lo)
        *reinterpret_cast<float2*>(out + r * ld + col) =
            make_float2(total[4 * j + 0], total[4 * j + 1]);
      if (has_hi)
        *reinterpret_cast<float2*>(out + (r + 8) * ld + col) =
            make_float2(total[4 * j + 2], total[4 * j + 3]);
    }
  } else {
    auto pack = [](float x, float y) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
      return *reinterpret_cast<const uint32_t*>(&v);
    };
    const int lane = threadIdx.x % 32, quad = lane & ~3;
    const int src_a = quad + (2 * q) % 4, src_b = quad + (2 * q + 1) % 4;
    const bool upper = q >= 2;  // columns 8..15 of the 16-column pair
#pragma unroll
    for (int m = 0; m < kAccum / 8; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // row r, then row r + 8
        const uint32_t lo = pack(total[8 * m + 2 * h], total[8 * m + 2 * h + 1]);
        const uint32_t hi = pack(total[8 * m + 4 + 2 * h], total[8 * m + 4 + 2 * h + 1]);
        const uint32_t a_lo = __shfl_sync(0xffffffffu, lo, src_a);
        const uint32_t a_hi = __shfl_sync(0xffffffffu, hi, src_a);
        const uint32_t b_lo = __shfl_sync(0xffffffffu, lo, src_b);
        const uint32_t b_hi = __shfl_sync(0xffffffffu, hi, src_b);
        if (h == 0 ? has_lo : has_hi)
          *reinterpret_cast<uint2*>(out + (r + 8 * h) * ld + col0 + 16 * m + 4 * q) =
              make_uint2(upper ? a_hi : a_lo, upper ? b_hi : b_lo);
      }
    }
  }
}

// A fused epilogue's 32 activated values of a 64-channel half (v[4j + e]: row `row`, channel
// 8j + 2q + e; v[4j + 2 + e]: row `row` + 8) as e4m3 codes under their rows' scales, at
// codes[row * ld + 8j] (`codes` offset by the half's first channel and 2q): the products'
// codes without a branch, and the rare pair a product does not decide (or a scale outside the
// fast reciprocal's range) redone by to_e4m3, the same codes. Returns whether the values were
// redone (measurement).
__device__ __forceinline__ bool store_codes(const float (&v)[kAccum / 2], uint8_t* codes,
                                            int64_t ld, int64_t row, bool has_lo, bool has_hi,
                                            float sc_lo, float sc_hi) {
  constexpr int kPairs = kAccum / 8;
  bool redo = false;
  const float inv_lo = gpu::kernels::rcp_rn_fast(sc_lo, redo);
  bool redo_hi = false;
  const float inv_hi = gpu::kernels::rcp_rn_fast(sc_hi, redo_hi);
  redo |= redo_hi;
  uint16_t lo[kPairs], hi[kPairs];
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    lo[j] = gpu::kernels::to_e4m3x2_product(v[4 * j], v[4 * j + 1], inv_lo, redo);
    hi[j] = gpu::kernels::to_e4m3x2_product(v[4 * j + 2], v[4 * j + 3], inv_hi, redo);
  }
  if (redo) {
    const float e_lo = gpu::kernels::e4m3_inverse(sc_lo), e_hi = gpu::kernels::e4m3_inverse(sc_hi);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      lo[j] = uint16_t(gpu::kernels::to_e4m3(v[4 * j], sc_lo, e_lo) |
                       (gpu::kernels::to_e4m3(v[4 * j + 1], sc_lo, e_lo) << 8));
      hi[j] = uint16_t(gpu::kernels::to_e4m3(v[4 * j + 2], sc_hi, e_hi) |
                       (gpu::kernels::to_e4m3(v[4 * j + 3], sc_hi, e_hi) << 8));
    }
  }
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    if (has_lo) *reinterpret_cast<uint16_t*>(codes + row * ld + 8 * j) = lo[j];
    if (has_hi) *reinterpret_cast<uint16_t*>(codes + (row + 8) * ld + 8 * j) = hi[j];
  }
  return redo;
}

constexpr uint64_t kHint = uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL);

// A float into the shared memory of CTA `peer` of the cluster, at the address `local` has here.
__device__ __forceinline__ void store_to_peer(float* local, uint32_t peer, float v) {
  const uint32_t remote = cute::set_block_rank(cute::cast_smem_ptr_to_uint(local), peer);
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

// Four floats into the shared memory of CTA `peer` of the cluster, at the address `local` has
// here (16-byte aligned).
__device__ __forceinline__ void store4_to_peer(float* local, uint32_t peer, float4 v) {
  const uint32_t remote = cute::set_block_rank(cute::cast_smem_ptr_to_uint(local), peer);
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

// Orders this thread's shared-memory accesses against the other CTA of the cluster's.
__device__ __forceinline__ void fence_cluster() {
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
}

// Named barrier `id` of `threads` threads: arrive without waiting, or arrive and wait.
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// kCluster = 2: the two CTAs of a cluster take the same row block and neighbouring N tiles;
// each loads every other 64-row box of the row tile and multicasts it to both, so the row tile
// crosses from L2 once per pair (a 128x128 tile's operands otherwise need more L2 bandwidth than
// the H200 has at full wgmma rate). A stage is refilled only when the consumers of both CTAs have
// released it.
// kAct: the fused epilogue's gated activation (a gpu::kernels kind; unused unless Out = uint8_t).
//
// kSplit (split K, kCluster = 2, 128-row tiles, not fused): the two CTAs of a cluster take the
// same tile, the first the first half of its K blocks and the second the rest, so a GEMM of few
// tiles keeps twice the SMs streaming weights and a last round of tiles costs half as much
// (bench/NOTES.md session 32). Each CTA loads its own row boxes (no multicast: their K differ).
// At the end of a tile the second CTA's consumer writes its partial sums into the first's shared
// memory (its slot: a consumer's 64 x 128 floats), which adds them to its own, first half first,
// and stores: deterministic. Per consumer a full barrier in the first CTA (the peer's four warps)
// and an empty one in the second (the first's four warps, once read).
template <class Out, int kCluster, int kWgs, int kAct = 0, bool kSplit = false>
__global__ void __launch_bounds__(Tile<kWgs, kSplit>::kThreads, 1)
    grouped_gemm(const __grid_constant__ Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  gpu::kernels::enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  using T = Tile<kWgs, kSplit>;
  constexpr bool kFused = ::std::is_same_v<Out, uint8_t>;
  static_assert(!kFused || kCluster == 2, "a fused tile's 64 channels pair with its peer's");
  static_assert(!kSplit || (kCluster == 2 && !kFused), "split K: a CTA pair, not fused");
  // The CTAs that read each stage's row tile (multicast) and release it.
  constexpr int kShare = kSplit ? 1 : kCluster;
  constexpr int kBlockM = T::kBlockM, kStages = T::kStages, kStageBytes = T::kStageBytes;
  constexpr int kTileABytes = T::kTileABytes, kScaleStride = T::kScaleStride;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  auto* full = reinterpret_cast<uint64_t*>(smem + T::kBarrierOffset);
  uint64_t* empty = full + kStages;
  // Fused, [consumer][slot]: the peer's same consumer's maxima have landed.
  uint64_t* swap_full = full + 2 * kStages;
  // Split K, per consumer: the peer's partial sums have landed (first CTA), have been read
  // (second).
  uint64_t* part_full = swap_full + 2 * kWgs;
  uint64_t* part_empty = part_full + kWgs;
  auto* partial = reinterpret_cast<float*>(smem + T::kPartialOffset);  // [consumer][16][128][4]
  auto* swap = reinterpret_cast<float*>(smem + T::kSwapOffset);        // [consumer][slot][64 rows]
  int* prefix = reinterpret_cast<int*>(smem + T::kPrefixOffset);
  auto* scales = reinterpret_cast<float*>(smem + T::kScaleOffset);  // [kStages][kScaleStride]
  const int wg = threadIdx.x / 128;
  const int rank = kCluster > 1 ? int(cute::block_rank_in_cluster()) : 0;
  const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;

  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(&p.rows_map);
    cute::prefetch_tma_descriptor(&p.weights_map);
    for (int s = 0; s < kStages; ++s) {
      cutlass::arch::ClusterBarrier::init(&full[s], kFullArrivals);
      cutlass::arch::ClusterBarrier::init(&empty[s], 4 * kWgs * kShare);  // every consumer warp
    }
    if constexpr (kFused)
      for (int s = 0; s < 2 * kWgs; ++s)  // the peer's same consumer's four warps, once a tile
        cutlass::arch::ClusterBarrier::init(&swap_full[s], 4);
    if constexpr (kSplit)
      for (int c = 0; c < kWgs; ++c) {  // the other CTA's four warps of the same consumer
        cutlass::arch::ClusterBarrier::init(&part_full[c], 4);
        cutlass::arch::ClusterBarrier::init(&part_empty[c], 4);
      }
    cutlass::arch::fence_barrier_init();
  }
  // Ends with __syncthreads: the barriers are visible too.
  gpu::kernels::build_tile_prefix(
      p.groups, kBlockM, [&](int g) { return group_rows(p, g).count; }, prefix);
  if constexpr (kCluster > 1) cute::cluster_sync();  // the peer's barriers exist

  const int n_tiles = p.n / kBlockN, n_units = kSplit ? n_tiles : n_tiles / kCluster;
  const int k_blocks = p.k / kBlockK;
  // This CTA's K blocks of every tile (split K: the pair's halves, the launcher ensures two).
  const int kb_begin = kSplit && rank == 1 ? k_blocks / 2 : 0;
  const int kb_end = kSplit && rank == 0 ? k_blocks / 2 : k_blocks;
  const int k_mine = kb_end - kb_begin;
  const int units = prefix[p.groups] * n_units;
  auto tile_at = [&](int u) {
    gpu::kernels::GroupTile t = gpu::kernels::group_tile_rows_first(prefix, p.groups, n_units, u);
    if constexpr (!kSplit) t.block_n = t.block_n * kCluster + rank;
    return t;
  };

  if (wg == 0) {  // producers: one thread issues TMA, one warp copies the scales
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (threadIdx.x / 32 == 1) {
      const int lane = threadIdx.x % 32;
      int stage = 0;
      uint32_t phase = 0;
      for (int u = cluster; u < units; u += clusters) {
        const gpu::kernels::GroupTile tile = tile_at(u);
        const GroupRows gr = group_rows(p, tile.group);
        const int64_t row0 = gr.first + int64_t(tile.block_m) * kBlockM;
        const int64_t rows_here = gr.count - int64_t(tile.block_m) * kBlockM;
        // Fused: the gate rows' block, and the up rows' I / 128 blocks on.
        const float* sw =
            p.w_scales + (int64_t(tile.group) * k_blocks) * n_tiles +
            (kFused ? tile.block_n / 2 + (lane == 1 ? n_tiles / 2 : 0) : tile.block_n);
        for (int kb = kb_begin; kb < kb_end; ++kb) {
          cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
          float* dst = scales + stage * kScaleStride;
          const float* src = p.row_scales + int64_t(kb) * p.scale_ld + row0;
#pragma unroll
          for (int i = lane; i < kBlockM; i += 32)
            copy_float_async(dst + i, i < rows_here ? src + i : p.row_scales, i < rows_here);
          if (lane < (kFused ? 2 : 1))
            copy_float_async(dst + kBlockM + lane, sw + int64_t(kb) * n_tiles, true);
          arrive_after_copies(&full[stage]);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
    } else if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int u = cluster; u < units; u += clusters) {
        const gpu::kernels::GroupTile tile = tile_at(u);
        const GroupRows gr = group_rows(p, tile.group);
        const int row0 = int(gr.first + int64_t(tile.block_m) * kBlockM);
        // Fused: 64 gate rows and their 64 up rows, half a tile each.
        const int wrow0 = tile.group * p.n + tile.block_n * (kFused ? kBlockN / 2 : kBlockN);
        // Only the 64-row boxes that hold rows of the group are loaded (the others' consumers
        // idle): the kernel is bound by the bytes each stage moves into shared memory.
        const int64_t rows_here = gr.count - int64_t(tile.block_m) * kBlockM;
        const int boxes = int(rows_here >= kBlockM ? kWgs : (rows_here + kWgRows - 1) / kWgRows);
        const uint32_t bytes = uint32_t(boxes * kBoxBytes + kTileBBytes);
        for (int kb = kb_begin; kb < kb_end; ++kb) {
          cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
          uint8_t* a = smem + size_t(stage) * kStageBytes;
          cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&full[stage], bytes);
          // Box j goes to every CTA that shares the stage, loaded by CTA j % kShare.
          for (int j = kShare > 1 ? rank : 0; j < boxes; j += kShare) {
            if constexpr (kShare > 1)
              cute::SM90_TMA_LOAD_MULTICAST_2D::copy(
                  &p.rows_map, &full[stage], uint16_t((1 << kShare) - 1), kHint, a + j * kBoxBytes,
                  kb * kBlockK, row0 + j * kWgRows);
            else
              cute::SM90_TMA_LOAD_2D::copy(&p.rows_map, &full[stage], kHint, a + j * kBoxBytes,
                                           kb * kBlockK, row0 + j * kWgRows);
          }
          cute::SM90_TMA_LOAD_2D::copy(&p.weights_map, &full[stage], kHint, a + kTileABytes,
                                       kb * kBlockK, wrow0);
          if constexpr (kFused)
            cute::SM90_TMA_LOAD_2D::copy(&p.weights_map, &full[stage], kHint,
                                         a + kTileABytes + kTileBBytes / 2, kb * kBlockK,
                                         wrow0 + p.n / 2);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
    }
  } else {
    // Consumers: warpgroup 1 + h takes rows 64 h .. 64 h + 63 of the tile, or a solo tile's 64.
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
    const int part = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = t128 % 32;
    const int r_wg = warp * 16 + lane / 4;  // this thread's rows of its 64: r_wg and r_wg + 8
    const uint64_t desc_b = smem_desc(smem + kTileABytes);
    // Solo tiles alternate between two consumers only where a skipped tile's K blocks go round
    // the whole ring (the named barrier's ordering argument needs it: bench/NOTES.md session 29).
    // (Split K: both CTAs must agree, so the shorter half decides.)
    const bool pingpong = kWgs == 2 && (kSplit ? k_blocks / 2 : k_blocks) >= kStages;
    float acc[kAccum], total[kAccum];
    int stage = 0;
    uint32_t phase = 0;
    // This warp is done with the stage, in every CTA that reads it; `arrivals` = kWgs when it
    // stands for every consumer (a solo tile). Its own CTA's barrier first: the peer can then
    // complete this phase, refill and release the next fill to this CTA only after this warp's
    // arrival here has landed, so no arrival of the next fill can count towards this one.
    auto release = [&](int arrivals) {
      __syncwarp();
      if (lane == 0)
        for (int i = 0; i < kShare; ++i)
          for (int a = 0; a < arrivals; ++a)
            cutlass::arch::ClusterBarrier::arrive(&empty[stage], uint32_t((rank + i) % kCluster),
                                                  1u);
      if (++stage == kStages) stage = 0, phase ^= 1;
    };
    // Fused: this warp's rows' largest |value| (lane q == 0 of each quad writes) go into the
    // peer CTA's slot `it % 2` of this consumer, `it` counting the tiles this consumer computed;
    // returns the peer's for the same rows. The slot is free: the peer's same consumer read its
    // tile it - 2 values before arriving for tile it - 1, which this warp waited for; and it writes
    // this tile's slot again (tile it + 2) only after this warp's arrival for tile it + 1, after
    // its read here.
    auto swap_maxima = [&](int it, float lo, float hi) {
      const int slot = 2 * part + (it & 1);
      const uint32_t parity = uint32_t(it >> 1) & 1u, peer = uint32_t(rank ^ 1);
      float* buf = swap + slot * kWgRows;
      if (lane % 4 == 0) {
        store_to_peer(buf + r_wg, peer, lo);
        store_to_peer(buf + r_wg + 8, peer, hi);
      }
      __syncwarp();
      if (lane == 0) {
        fence_cluster();  // the warp's stores (ordered before by __syncwarp), then the arrival
        cutlass::arch::ClusterBarrier::arrive(&swap_full[slot], peer, 1u);
      }
      cutlass::arch::ClusterBarrier::wait(&swap_full[slot], parity);
      fence_cluster();
      return make_float2(buf[r_wg], buf[r_wg + 8]);
    };
    int solo_tiles = 0, fused_tiles = 0, split_tiles = 0, timed = 0;
    bool took_previous = true;
    // The timeline record of this consumer's next computed tile, if one is kept (thread 0; 128-row
    // tiles only: the 192-row instances have no registers to spare).
    unsigned long long* record = kWgs == 2 && p.timeline != nullptr && t128 == 0
                                     ? p.timeline + size_t(blockIdx.x * kWgs + part) *
                                                        size_t(p.timeline_tiles) * kTimelineWords
                                     : nullptr;
    for (int u = cluster; u < units; u += clusters) {
      const gpu::kernels::GroupTile tile = tile_at(u);
      const GroupRows gr = group_rows(p, tile.group);
      const int64_t row0 = gr.first + int64_t(tile.block_m) * kBlockM;
      const int64_t rows_here = gr.count - int64_t(tile.block_m) * kBlockM;  // >= 1
      const bool solo = pingpong && rows_here <= kWgRows;
      if (solo && (solo_tiles++ & 1) != part) {  // the other consumer's: skip its stages
        const int next = stage + k_mine;
        phase ^= uint32_t(next / kStages) & 1u;
        stage = next % kStages;
        took_previous = false;
        continue;
      }
      // After a skipped tile: its owner has waited on every one of its stages (so all stages
      // before this tile's are filled, and this consumer's waits are at most a phase ahead).
      if (!took_previous) named_sync(1 + part, 2 * 128);
      took_previous = true;
      const int half = solo ? 0 : part;   // the tile's 64 rows this consumer computes
      if (rows_here <= half * kWgRows) {  // no rows in this part: only release the stages
        for (int kb = kb_begin; kb < kb_end; ++kb) {
          cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
          release(1);
        }
        continue;
      }
      const bool timing = record != nullptr && timed < p.timeline_tiles;
      if (timing) {
        record[kTimelineWords * timed] = static_cast<unsigned long long>(u);
        record[kTimelineWords * timed + 1] = clock64();
      }
      const int r_lo = half * kWgRows + r_wg;  // and r_lo + 8
      const uint64_t desc_a = smem_desc(smem + half * kBoxBytes);
      const bool has_lo = r_lo < rows_here, has_hi = r_lo + 8 < rows_here;
#pragma unroll
      for (int i = 0; i < kAccum; ++i) total[i] = 0.0f;
      for (int kb = kb_begin; kb < kb_end; ++kb) {
        // Descriptors: the stage's offset added to the start-address field.
        const uint64_t da = gpu::kernels::desc_advance(desc_a, uint32_t(stage) * kStageBytes);
        const uint64_t db = gpu::kernels::desc_advance(desc_b, uint32_t(stage) * kStageBytes);
        cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
        const float* sc = scales + stage * kScaleStride;
        const float s_w = sc[kBlockM], s_lo = sc[r_lo], s_hi = sc[r_lo + 8];
        const float s_wu = kFused ? sc[kBlockM + 1] : s_w;  // the up rows' (fused)
        wgmma_batch(acc, [&] {
#pragma unroll
          for (int kk = 0; kk < kBlockK / 32; ++kk)
            wgmma_64x128x32(gpu::kernels::desc_advance(da, kk * 32),
                            gpu::kernels::desc_advance(db, kk * 32), acc, kk > 0,
                            std::make_index_sequence<kAccum>{});
        });
        const float f_lo = s_lo * s_w, f_hi = s_hi * s_w;  // read before the stage is released
        const float fu_lo = s_lo * s_wu, fu_hi = s_hi * s_wu;
        release(solo ? kWgs : 1);
        // Accumulator layout (m64nNk32): value 4j + {0,1} is row r_lo, columns 8j + 2(lane%4)
        // + {0,1}; 4j + {2,3} the same columns of row r_lo + 8.
        // Fused: columns 64.. (j >= 8) are the up rows, with their own weight scale.
#pragma unroll
        for (int j = 0; j < kAccum / 4; ++j) {
          const bool up = kFused && j >= kAccum / 8;
          total[4 * j + 0] = fmaf(acc[4 * j + 0], up ? fu_lo : f_lo, total[4 * j + 0]);
          total[4 * j + 1] = fmaf(acc[4 * j + 1], up ? fu_lo : f_lo, total[4 * j + 1]);
          total[4 * j + 2] = fmaf(acc[4 * j + 2], up ? fu_hi : f_hi, total[4 * j + 2]);
          total[4 * j + 3] = fmaf(acc[4 * j + 3], up ? fu_hi : f_hi, total[4 * j + 3]);
        }
      }
      // A solo tile's stages are all seen: the other consumer, which skipped it, may start the
      // next tile (it always takes part in it: solo tiles alternate).
      if (solo && u + clusters < units) named_arrive(1 + (part ^ 1), 2 * 128);
      if (timing) {
        const unsigned long long now = clock64();
        for (int w = 2; w < 5; ++w) record[kTimelineWords * timed + w] = now;
      }
      if constexpr (kFused) {
        // Outputs 8j + 2q + {0, 1} (j < 8) of the tile's 64 channels, rows r_lo and r_lo + 8:
        // act(gate + bias, up + bias) as the activation kernel computes it, written over the
        // gate values; then each row's 128-channel maximum (the quad's, then the peer's half).
        const int q = lane % 4, inter = p.n / 2, c0 = tile.block_n * (kBlockN / 2);
        const float* bias = p.bias != nullptr && tile.group < p.bias_groups
                                ? p.bias + int64_t(tile.group) * p.bias_ld
                                : nullptr;
        // g: the thread's 32 gate values, [4j + e] row r_lo and [4j + 2 + e] row r_lo + 8 of
        // channel 8j + 2q + e; u: their up values.
        constexpr int kPairs = kAccum / 2;
        float g[kPairs], u[kPairs];
#pragma unroll
        for (int i = 0; i < kPairs; ++i) {
          g[i] = total[i];
          u[i] = total[i + kPairs];
        }
        if (bias != nullptr) {
          // The bias is added only where there is one (x + 0 would turn -0 into +0).
#pragma unroll
          for (int i = 0; i < kPairs; ++i) {
            const int ch = c0 + 8 * (i / 4) + 2 * q + i % 2;
            g[i] += bias[ch];
            u[i] += bias[inter + ch];
          }
        }
        // The activation is the instance's (kAct): one kind's unrolled code, not four, so the
        // epilogue does not push the main loop out of the instruction cache (bench/NOTES.md,
        // session 29); and a batch without branches (session 30: one call-guarded division after
        // another cost more than the other consumer's whole main loop).
        const bool act_redone = gpu::kernels::activate_batch<kAct>(p.act, g, u);
        float m_lo = 0.0f, m_hi = 0.0f;
#pragma unroll
        for (int i = 0; i < kPairs; ++i) {
          if (i % 4 < 2)
            m_lo = fmaxf(m_lo, fabsf(g[i]));
          else
            m_hi = fmaxf(m_hi, fabsf(g[i]));
        }
        m_lo = gpu::kernels::group_max<4>(m_lo);
        m_hi = gpu::kernels::group_max<4>(m_hi);
        if (timing) record[kTimelineWords * timed + 3] = clock64();
        const float2 theirs = swap_maxima(fused_tiles++, m_lo, m_hi);
        if (timing) record[kTimelineWords * timed + 4] = clock64();
        const float sc_lo = gpu::kernels::fp8_scale_from_amax(fmaxf(m_lo, theirs.x));
        const float sc_hi = gpu::kernels::fp8_scale_from_amax(fmaxf(m_hi, theirs.y));
        const bool redone = store_codes(g, static_cast<uint8_t*>(p.out) + c0 + 2 * q, inter,
                                        row0 + r_lo, has_lo, has_hi, sc_lo, sc_hi);
        if (p.timeline != nullptr) {  // which of the warp's batches took the exact paths
          const bool a = __any_sync(0xffffffffu, act_redone);
          const bool c = __any_sync(0xffffffffu, redone);
          if (timing) record[kTimelineWords * timed] |= (uint64_t(a) << 32) | (uint64_t(c) << 33);
        }
        // The block's scale, once: by the pair's first CTA (even tiles), lane 0 of each quad.
        float* block_scales = p.code_scales + int64_t(c0 / 128) * p.code_scale_ld + row0 + r_lo;
        if (rank == 0 && q == 0) {
          if (has_lo) block_scales[0] = sc_lo;
          if (has_hi) block_scales[8] = sc_hi;
        }
      } else {
        if constexpr (kSplit) {
          // Value 4j + e of this thread at partial[part][j][t128][e]: a warp's 16-byte stores and
          // loads are contiguous.
          float* slot = partial + size_t(part) * kWgRows * kBlockN;
          const uint32_t parity = uint32_t(split_tiles++) & 1u;
          if (rank == 1) {  // the second half's sums go to the first CTA
            cutlass::arch::ClusterBarrier::wait(&part_empty[part], parity ^ 1u);
#pragma unroll
            for (int j = 0; j < kAccum / 4; ++j)
              store4_to_peer(
                  slot + (j * 128 + t128) * 4, 0u,
                  make_float4(total[4 * j], total[4 * j + 1], total[4 * j + 2], total[4 * j + 3]));
            __syncwarp();
            if (lane == 0) {
              fence_cluster();
              cutlass::arch::ClusterBarrier::arrive(&part_full[part], 0u, 1u);
            }
          } else {
            cutlass::arch::ClusterBarrier::wait(&part_full[part], parity);
            fence_cluster();
#pragma unroll
            for (int j = 0; j < kAccum / 4; ++j) {
              const float4 v = *reinterpret_cast<const float4*>(slot + (j * 128 + t128) * 4);
              total[4 * j] += v.x;
              total[4 * j + 1] += v.y;
              total[4 * j + 2] += v.z;
              total[4 * j + 3] += v.w;
            }
            __syncwarp();
            if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&part_empty[part], 1u, 1u);
          }
        }
        if (!kSplit || rank == 0)
          store_tile(static_cast<Out*>(p.out), p.n, row0 + r_lo, has_lo, has_hi,
                     tile.block_n * kBlockN, lane % 4, total);
      }
      if (timing) record[kTimelineWords * timed++ + 5] = clock64();
    }
  }
  // A CTA leaves only when its peer no longer arrives on its barriers or writes its stages.
  if constexpr (kCluster > 1) cute::cluster_sync();
#endif
}

}  // namespace moe::deepgemm::kernels::ffma
