// cutlass_mega's layer in one cooperative launch (docs/design.md §13): bf16 weights and hidden
// states, every activation of §5, routing given as top-k ids and weights.
//
// Every CTA (one per SM) first builds the same schedule in shared memory from the ids: the
// slots grouped by expert, in token order within an expert (a stable counting sort, warp by warp,
// no atomics), so every CTA agrees and two runs give the same bits. Then three phases, separated
// by grid-wide barriers:
//   1. GEMM1 and the activation: work items (expert, 64-token chunk of its slots, 64 intermediate
//      columns), each streaming its 64 gate and 64 up rows of W13 (128 rows of relu2's W13) once
//      for its tokens, gathered straight from the hidden states. The activation runs on the
//      accumulators; the intermediate goes to the workspace in bf16, one row per slot.
//   2. GEMM2: work items (expert, 64-token chunk of its slots, 128 rows of H), each streaming
//      its W2 rows once for its slots' intermediate rows; each slot's f32 result goes to the
//      workspace.
//   3. The combine: each output element sums its token's slots in slot order (weight x
//      result), rounded to bf16 once; every row is written (a token without experts gets 0).
//
// Both GEMMs are swap-AB mma.sync (m16n8k16, bf16 in, f32 accumulate): weight rows fill the M
// side and tokens the N side, so a decode batch of a few tokens per expert wastes nothing of the
// weight stream. A producer warp feeds a 5-stage ring in shared memory: the weight tile by TMA
// (two 64-row x 64-column boxes, 128-byte swizzle) and each token row by a 128-byte bulk copy,
// both completing on the stage's mbarrier; eight consumer warps multiply and release the stage.
// The ring runs across the CTA's whole sequence of work items, so the next item's weights load
// while this one's epilogue runs.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include <cutlass/arch/barrier.h>
#include <cub/block/block_scan.cuh>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>

#include "kernels/activation.cuh"

namespace moe::mega::kernels {

constexpr int kThreads = 288;  // 8 consumer warps (16 weight rows each), 1 producer warp
constexpr int kConsumers = 256;
constexpr int kWarps = kConsumers / 32;
constexpr int kRows = 128;    // weight rows per tile
constexpr int kK = 64;        // K per stage: one 128-byte row per weight row and token
constexpr int kLd = kK + 8;   // token rows' stride in bf16: 144 bytes, ldmatrix without conflicts
constexpr int kBoxRows = 64;  // weight rows per TMA box
constexpr int kTok = 64;      // token columns per tile (8 mma n-tiles)
constexpr int kStages = 5;
constexpr int kMaxSlots = 4096;   // T * top_k the schedule holds
constexpr int kMaxExperts = 512;  // 2 per thread in the block scans
constexpr int kTileLd = kTok + 1;

// Shared memory (bytes), in this order: the ring (1024-byte aligned stages: the weight tile is
// 128-byte swizzled), the tile, the schedule, the barriers.
constexpr size_t kWeightBytes = size_t(kRows) * kK * 2;     // 16 KB, swizzled, no padding
constexpr size_t kTokenBytes = size_t(kTok) * kLd * 2;      // 9 KB, padded rows
constexpr size_t kStageBytes = kWeightBytes + kTokenBytes;  // 25 x 1024
constexpr size_t kRingBytes = kStages * kStageBytes;
constexpr size_t kTileBytes = size_t(kRows) * kTileLd * 4;
constexpr size_t kScheduleBytes = kMaxSlots * (2 + 2)  // slot token, slot position (int16)
                                  + (kWarps + 4) * kMaxExperts * 4 + 16;  // per-warp counts, tables
constexpr size_t kBarrierBytes = 2 * kStages * 8;
constexpr size_t kSmemBytes = 1024 + kRingBytes + kTileBytes + kScheduleBytes + kBarrierBytes;

struct Params {
  CUtensorMap w13_map;     // w13 as [E * n1, H], 64 x 64 boxes, 128-byte swizzle
  CUtensorMap w2_map;      // w2 as [E * H, I], the same boxes
  const uint16_t* hidden;  // [T, H] bf16
  const int32_t* ids;      // [T, W] global expert ids, -1 (or out of range) = no expert
  const float* weights;    // [T, W]
  uint16_t* out;           // [T, H] bf16
  const uint16_t* w13;     // [E, n1, H] bf16: gate rows then up rows (relu2: n1 = I)
  const uint16_t* w2;      // [E, H, I] bf16
  uint16_t* inter;         // workspace [T * W, I] bf16: a row per slot, in schedule order
  float* y;                // workspace [T * W, H] f32: GEMM2's row per slot, in schedule order
  int32_t tokens, width, experts, hidden_dim, inter_dim, n1;
  int32_t activation;
  gpu::kernels::ActivationParams act;  // limit, alpha, gelu_tanh
};

// ---- small device helpers ------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// D += A (16x16, row) * B (16x8, col), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float(uint32_t(b) << 16);
}
__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<const uint16_t*>(&h);
}

// ---- the schedule --------------------------------------------------------------------------

struct Schedule {
  int16_t* slot_token;    // [slots] token of each slot, grouped by expert, token order within
  int16_t* slot_pos;      // [T * W] where slot t * W + j sits in that order, -1 if no expert
  int32_t* warp_counts;   // [kWarps][kMaxExperts] scratch
  int32_t* expert_first;  // [E] first slot of expert e (active or not)
  int32_t* expert_count;  // [E]
  int32_t* active;        // [A] active experts in id order
  int32_t* item_prefix;   // [A + 1] first work item of each active expert (phase 1 chunks)
  int32_t num_active;
};

using Scan = cub::BlockScan<int32_t, kThreads>;

// Every CTA computes the same schedule. Slot i = t * W + j of the ids is the i-th in token order;
// warp w sorts slots [w * per, (w + 1) * per) in two passes (count, then place), each expert's
// run of warps laid out in warp order: the result is stable, so token order within an expert.
__device__ void build_schedule(const Params& p, Schedule& s, Scan::TempStorage& scan) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n = p.tokens * p.width, e_count = p.experts;
  const int per = ((n + kWarps - 1) / kWarps + 31) / 32 * 32;
  const bool sorter = warp < kWarps;  // the producer warp only joins the block-wide steps
  const int lo = sorter ? warp * per : 0, hi = sorter ? min(n, lo + per) : 0;
  int32_t* mine = s.warp_counts + (sorter ? warp : 0) * kMaxExperts;
  if (sorter)
    for (int e = lane; e < e_count; e += 32) mine[e] = 0;
  __syncwarp();
  auto expert_of = [&](int i) {
    const int32_t id = i < hi ? p.ids[i] : -1;
    return (id >= 0 && id < e_count) ? id : -1;
  };
  for (int base = lo; base < hi; base += 32) {  // pass 1: this warp's count per expert
    const int e = expert_of(base + lane);
    const uint32_t same = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && lane == __ffs(same) - 1) mine[e] += __popc(same);
    __syncwarp();
  }
  __syncthreads();
  // Per expert: total, first slot (exclusive scan), and each warp's start within it.
  int32_t total[2], flag_and_count[2], first[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = threadIdx.x * 2 + r;
    int32_t c = 0;
    if (e < e_count)
      for (int w = 0; w < kWarps; ++w) c += s.warp_counts[w * kMaxExperts + e];
    total[r] = c;
    flag_and_count[r] = (c > 0 ? (1 << 16) : 0) | c;  // active index and first slot in one scan
  }
  int32_t sum = 0;
  Scan(scan).ExclusiveSum(flag_and_count, first, sum);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = threadIdx.x * 2 + r;
    if (e >= e_count) continue;
    const int32_t slot0 = first[r] & 0xffff, index = first[r] >> 16;
    s.expert_first[e] = slot0;
    s.expert_count[e] = total[r];
    if (total[r] > 0) s.active[index] = e;
    int32_t at = slot0;  // warp w's slots of e start after those of warps < w
    for (int w = 0; w < kWarps; ++w) {
      const int32_t c = s.warp_counts[w * kMaxExperts + e];
      s.warp_counts[w * kMaxExperts + e] = at;
      at += c;
    }
  }
  if (threadIdx.x == 0) s.num_active = sum >> 16;
  __syncthreads();
  for (int base = lo; base < hi; base += 32) {  // pass 2: place, stable
    const int i = base + lane, e = expert_of(i);
    const uint32_t same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1));
    if (e >= 0) {
      const int at = mine[e] + rank;
      s.slot_token[at] = int16_t(i / p.width);
      s.slot_pos[i] = int16_t(at);
    } else if (i < hi) {
      s.slot_pos[i] = -1;
    }
    __syncwarp();
    if (e >= 0 && lane == __ffs(same) - 1) mine[e] += __popc(same);
    __syncwarp();
  }
  __syncthreads();
  // Phase 1 items: ceil(count / 64) token chunks per active expert, times the column slices.
  if (threadIdx.x == 0) {
    int32_t acc = 0;
    for (int a = 0; a < s.num_active; ++a) {
      s.item_prefix[a] = acc;
      acc += (s.expert_count[s.active[a]] + kTok - 1) / kTok;
    }
    s.item_prefix[s.num_active] = acc;
  }
  __syncthreads();
}

// ---- the ring -------------------------------------------------------------------------------

// Stage s: the weight tile [kRows][kK] (two 64-row TMA boxes, 128-byte swizzle: the 16-byte chunk
// c of row r sits at chunk c ^ (r % 8)), then the token rows [kTok][kLd].
__device__ __forceinline__ uint8_t* weight_tile(uint8_t* ring, int s) {
  return ring + size_t(s) * kStageBytes;
}
__device__ __forceinline__ uint16_t* token_tile(uint8_t* ring, int s) {
  return reinterpret_cast<uint16_t*>(ring + size_t(s) * kStageBytes + kWeightBytes);
}

// Producer: fills stage `stage` once the consumers released it: weight rows [row0, row0 + 64)
// and [row1, row1 + 64) of `map` at column k0, token rows x_row(n) for n < m.
template <class XRow>
__device__ __forceinline__ void produce(const CUtensorMap* map, int row0, int row1, int k0,
                                        XRow x_row, int m, uint8_t* ring, uint64_t* full,
                                        uint64_t* empty, int stage, uint32_t phase) {
  const int lane = threadIdx.x % 32;
  cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
  if (lane == 0) {
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
        &full[stage], uint32_t(kWeightBytes + size_t(m) * kK * 2));
    constexpr uint64_t hint = uint64_t(cute::TMA::CacheHintSm90::EVICT_FIRST);  // read once
    uint8_t* w = weight_tile(ring, stage);
    cute::SM90_TMA_LOAD_2D::copy(map, &full[stage], hint, w, k0, row0);
    cute::SM90_TMA_LOAD_2D::copy(map, &full[stage], hint, w + kWeightBytes / 2, k0, row1);
  }
  __syncwarp();
  uint16_t* x = token_tile(ring, stage);
  for (int n = lane; n < m; n += 32)
    cute::SM90_BULK_COPY_G2S::copy(x_row(n) + k0, &full[stage], x + n * kLd, kK * 2);
}

// Consumers: acc[nt] += W[16 rows of this warp] x X[8 tokens of n-tile nt]^T over the stage's
// kK, for the n-tiles that hold tokens (m of them).
__device__ __forceinline__ void mma_stage(const uint8_t* w, const uint16_t* x, int m,
                                          float (&acc)[kTok / 8][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row = warp * 16 + lane % 16;  // this lane's ldmatrix row of the weight tile
#pragma unroll
  for (int kk = 0; kk < kK; kk += 16) {
    uint32_t a[4];
    const int chunk = kk / 8 + lane / 16;
    ldmatrix_x4(a, w + row * (kK * 2) + ((chunk ^ (row % 8)) << 4));
#pragma unroll
    for (int pair = 0; pair < kTok / 16; ++pair) {
      if (pair * 16 >= m) break;
      // Matrices: tokens 0-7 at kk, tokens 0-7 at kk + 8, tokens 8-15 at kk, at kk + 8.
      uint32_t b[4];
      const int tok = pair * 16 + (lane / 16) * 8 + lane % 8, koff = ((lane / 8) % 2) * 8;
      ldmatrix_x4(b, x + tok * kLd + kk + koff);
      mma(acc[2 * pair], a, b[0], b[1]);
      mma(acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

// The 256 consumer threads only (named barrier 1): the producer warp runs ahead.
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

// ---- the kernel ----------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads, 1) fused_moe(const __grid_constant__ Params p) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* ring = smem;
  auto* tile = reinterpret_cast<float*>(smem + kRingBytes);  // [kRows][kTileLd]
  uint8_t* sched = smem + kRingBytes + kTileBytes;
  auto* full = reinterpret_cast<uint64_t*>(sched + kScheduleBytes);
  uint64_t* empty = full + kStages;
  __shared__ Scan::TempStorage scan;
  __shared__ int32_t num_active;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool producer = warp == kWarps;
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      cutlass::arch::ClusterBarrier::init(&full[st], 1);
      cutlass::arch::ClusterBarrier::init(&empty[st], kWarps);
    }
    cutlass::arch::fence_barrier_init();
  }
  if (producer && lane == 0) {
    cute::prefetch_tma_descriptor(&p.w13_map);
    cute::prefetch_tma_descriptor(&p.w2_map);
  }
  Schedule s;
  s.slot_token = reinterpret_cast<int16_t*>(sched);
  s.slot_pos = reinterpret_cast<int16_t*>(sched + kMaxSlots * 2);
  s.warp_counts = reinterpret_cast<int32_t*>(sched + kMaxSlots * 4);
  s.expert_first = s.warp_counts + kWarps * kMaxExperts;
  s.expert_count = s.expert_first + kMaxExperts;
  s.active = s.expert_count + kMaxExperts;
  s.item_prefix = s.active + kMaxExperts;  // kMaxExperts + 1 entries: the 16 spare bytes
  build_schedule(p, s, scan);              // its __syncthreads also publish the barriers
  if (threadIdx.x == 0) num_active = s.num_active;
  __syncthreads();
  s.num_active = num_active;

  const int g = lane / 4, q = lane % 4;  // accumulator row g (+8), columns 2q (+1)
  const int64_t H = p.hidden_dim, I = p.inter_dim;
  const bool gated = p.activation != gpu::kernels::kRelu2;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  int stage = 0;  // the ring's position, the same in producer and consumers throughout
  uint32_t phase = 0;
  auto advance = [&] {
    if (++stage == kStages) stage = 0, phase ^= 1;
  };
  float acc[kTok / 8][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int nt = 0; nt < kTok / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
  };
  // Consumers: the accumulators to the tile ([weight row][token]), for all consumers to read.
  auto acc_to_tile = [&] {
#pragma unroll
    for (int nt = 0; nt < kTok / 8; ++nt) {
      const int r = warp * 16 + g, n = nt * 8 + 2 * q;
      tile[r * kTileLd + n] = acc[nt][0];
      tile[r * kTileLd + n + 1] = acc[nt][1];
      tile[(r + 8) * kTileLd + n] = acc[nt][2];
      tile[(r + 8) * kTileLd + n + 1] = acc[nt][3];
    }
    consumers_sync();
  };
  // Consumers: wait for the stage, multiply, release it.
  auto consume = [&](int m) {
    cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
    mma_stage(weight_tile(ring, stage), token_tile(ring, stage), m, acc);
    __syncwarp();
    if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&empty[stage]);
    advance();
  };

  // Item u of a phase with `slices` column slices: active expert, 64-slot chunk, slice.
  struct Item {
    int expert, first, m, slice;
  };
  auto item_of = [&](int u, int slices) {
    const int chunk_global = u / slices, slice = u % slices;
    int lo = 0, hi = s.num_active;  // last a with item_prefix[a] <= chunk_global
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (s.item_prefix[mid] <= chunk_global)
        lo = mid;
      else
        hi = mid;
    }
    const int e = s.active[lo], chunk = chunk_global - s.item_prefix[lo];
    const int first = s.expert_first[e] + chunk * kTok;
    return Item{e, first, min(kTok, s.expert_count[e] - chunk * kTok), slice};
  };

  // ---- phase 1: GEMM1 and the activation ----
  {
    const int cols = gated ? kRows / 2 : kRows;  // intermediate columns per item
    const int slices = int(I / cols), steps = int(H / kK);
    const int items = s.item_prefix[s.num_active] * slices;
    for (int u = int(blockIdx.x); u < items; u += int(gridDim.x)) {
      const Item it = item_of(u, slices);
      if (producer) {
        // Gate rows slice*64.. and up rows I + slice*64.. (relu2: rows slice*128.., two boxes).
        const int base = it.expert * p.n1;
        const int row0 = gated ? base + it.slice * 64 : base + it.slice * kRows;
        const int row1 = gated ? base + int(I) + it.slice * 64 : row0 + kBoxRows;
        auto x_row = [&](int n) { return p.hidden + int64_t(s.slot_token[it.first + n]) * H; };
        for (int ks = 0; ks < steps; ++ks) {
          produce(&p.w13_map, row0, row1, ks * kK, x_row, it.m, ring, full, empty, stage, phase);
          advance();
        }
        continue;
      }
      zero_acc();
      for (int ks = 0; ks < steps; ++ks) consume(it.m);
      // Rows to the tile, then the activation per (column, token) into the intermediate.
      acc_to_tile();
      for (int idx = threadIdx.x; idx < cols * it.m; idx += kConsumers) {
        const int c = idx % cols, n = idx / cols;
        const float gv = tile[c * kTileLd + n];
        const float uv = gated ? tile[(c + 64) * kTileLd + n] : 0.0f;
        const float y = gpu::kernels::activate(p.act, p.activation, gv, uv);
        p.inter[int64_t(it.first + n) * I + int64_t(it.slice) * cols + c] = float_to_bf16_bits(y);
      }
      consumers_sync();  // the tile is free for the next item
    }
  }
  grid.sync();
  // The intermediate was written by ordinary stores; the bulk copies below read it through the
  // async proxy.
  if (producer) asm volatile("fence.proxy.async.global;" ::: "memory");

  // ---- phase 2: GEMM2, a row of f32 results per slot ----
  {
    const int slices = int(H / kRows), steps = int(I / kK);
    const int items = s.item_prefix[s.num_active] * slices;
    for (int u = int(blockIdx.x); u < items; u += int(gridDim.x)) {
      const Item it = item_of(u, slices);
      if (producer) {
        const int row0 = it.expert * int(H) + it.slice * kRows;
        auto x_row = [&](int n) { return p.inter + int64_t(it.first + n) * I; };
        for (int ks = 0; ks < steps; ++ks) {
          produce(&p.w2_map, row0, row0 + kBoxRows, ks * kK, x_row, it.m, ring, full, empty, stage,
                  phase);
          advance();
        }
        continue;
      }
      zero_acc();
      for (int ks = 0; ks < steps; ++ks) consume(it.m);
      // Through the tile so that each slot's 128 results go out as contiguous rows.
      acc_to_tile();
      for (int idx = threadIdx.x; idx < kRows * it.m; idx += kConsumers) {
        const int r = idx % kRows, n = idx / kRows;
        p.y[int64_t(it.first + n) * H + int64_t(it.slice) * kRows + r] = tile[r * kTileLd + n];
      }
      consumers_sync();  // the tile is free for the next item
    }
  }
  grid.sync();

  // ---- phase 3: each token's slots summed in slot order, bf16 once ----
  const int64_t elems = int64_t(p.tokens) * H;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < elems;
       i += int64_t(gridDim.x) * kThreads) {
    const int64_t t = i / H, h = i % H;
    float v = 0.0f;
    for (int j = 0; j < p.width; ++j) {
      const int at = s.slot_pos[t * p.width + j];
      if (at >= 0) v += p.weights[t * p.width + j] * p.y[int64_t(at) * H + h];
    }
    p.out[i] = float_to_bf16_bits(v);
  }
}

}  // namespace moe::mega::kernels
