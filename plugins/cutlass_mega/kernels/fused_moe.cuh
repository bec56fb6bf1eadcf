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
//   2. GEMM2 and the weighted combine: work items (128 rows of H, one of S parts of I, a 64-token
//      chunk); each walks the active experts in id order, multiplies their slots' intermediate
//      rows by its W2 rows, and adds weight x result into a [tokens x 128] tile in shared memory,
//      so each output element sums its experts in id order. The tile goes to the workspace as
//      part s of the output, in f32.
//   3. The S parts summed in order, rounded to bf16 once, written to the output (every row).
//
// Both GEMMs are swap-AB mma.sync (m16n8k16, bf16 in, f32 accumulate): weight rows fill the M
// side and tokens the N side, so a decode batch of a few tokens per expert wastes nothing of the
// weight stream; operands move through a 5-stage cp.async ring, one ring for the CTA's whole
// sequence of work items so the loads of the next item overlap the math of this one.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdint>

#include <cub/block/block_scan.cuh>

#include "kernels/activation.cuh"

namespace moe::mega::kernels {

constexpr int kThreads = 256;  // 8 warps, each 16 weight rows of a 128-row tile
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 128;   // weight rows per tile
constexpr int kK = 64;       // K per stage
constexpr int kLd = kK + 8;  // shared row stride in bf16: 144 bytes, ldmatrix without conflicts
constexpr int kTok = 64;     // token columns per tile (8 mma n-tiles)
constexpr int kStages = 5;
constexpr int kMaxSlots = 4096;   // T * top_k the schedule holds
constexpr int kMaxExperts = 512;  // 2 per thread in the block scans
constexpr int kTileLd = kTok + 1;

// Shared memory (bytes), in this order.
constexpr size_t kStageElems = size_t(kRows + kTok) * kLd;  // bf16
constexpr size_t kRingBytes = kStages * kStageElems * 2;
constexpr size_t kTileBytes = size_t(kRows) * kTileLd * 4;
constexpr size_t kScheduleBytes = kMaxSlots * (4 + 2)  // slot weight, token (int16)
                                  + (kWarps + 4) * kMaxExperts * 4 + 16;  // per-warp counts, tables
constexpr size_t kSmemBytes = kRingBytes + kTileBytes + kScheduleBytes;

struct Params {
  const uint16_t* hidden;  // [T, H] bf16
  const int32_t* ids;      // [T, W] global expert ids, -1 (or out of range) = no expert
  const float* weights;    // [T, W]
  uint16_t* out;           // [T, H] bf16
  const uint16_t* w13;     // [E, n1, H] bf16: gate rows then up rows (relu2: n1 = I)
  const uint16_t* w2;      // [E, H, I] bf16
  uint16_t* inter;         // workspace [T * W, I] bf16: a row per slot, in schedule order
  float* parts;            // workspace [S, T, H] f32
  int32_t tokens, width, experts, hidden_dim, inter_dim, n1;
  int32_t splits;  // S: parts of I in GEMM2
  int32_t activation;
  gpu::kernels::ActivationParams act;  // limit, alpha, gelu_tanh
};

// ---- small device helpers ------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; zeros when !valid (the source is then not read).
__device__ __forceinline__ void copy16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
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
  float* slot_weight;     // [slots]
  int32_t* warp_counts;   // [kWarps][kMaxExperts] scratch
  int32_t* expert_first;  // [E] first slot of expert e (active or not)
  int32_t* expert_count;  // [E]
  int32_t* active;        // [A] active experts in id order
  int32_t* item_prefix;   // [A + 1] first work item of each active expert (phase 1 chunks)
  int32_t num_active, num_slots;
};

using Scan = cub::BlockScan<int32_t, kThreads>;

// Every CTA computes the same schedule. Slot i = t * W + j of the ids is the i-th in token order;
// warp w sorts slots [w * per, (w + 1) * per) in two passes (count, then place), each expert's
// run of warps laid out in warp order: the result is stable, so token order within an expert.
__device__ void build_schedule(const Params& p, Schedule& s, Scan::TempStorage& scan) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n = p.tokens * p.width, e_count = p.experts;
  const int per = ((n + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int lo = warp * per, hi = min(n, lo + per);
  int32_t* mine = s.warp_counts + warp * kMaxExperts;
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
  if (threadIdx.x == 0) {
    s.num_active = sum >> 16;
    s.num_slots = sum & 0xffff;
  }
  __syncthreads();
  for (int base = lo; base < hi; base += 32) {  // pass 2: place, stable
    const int i = base + lane, e = expert_of(i);
    const uint32_t same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1));
    if (e >= 0) {
      const int at = mine[e] + rank;
      s.slot_token[at] = int16_t(i / p.width);
      s.slot_weight[at] = p.weights[i];
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

// ---- the tile mainloop ---------------------------------------------------------------------

// One stage: kRows weight rows and kTok token rows of kK values each.
struct Stage {
  uint16_t* w;  // [kRows][kLd]
  uint16_t* x;  // [kTok][kLd]
};

__device__ __forceinline__ Stage stage_at(uint16_t* ring, int s) {
  uint16_t* base = ring + size_t(s) * kStageElems;
  return {base, base + size_t(kRows) * kLd};
}

// Loads one stage: weight row r from w_row(r), token row n < m from x_row(n) (zeros beyond m,
// m >= 1), the kK values from column k0.
template <class WRow, class XRow>
__device__ __forceinline__ void load_stage(const Stage& st, WRow w_row, XRow x_row, int m, int k0) {
  for (int c = threadIdx.x; c < kRows * (kK / 8); c += kThreads) {
    const int r = c / (kK / 8), q = c % (kK / 8);
    copy16(st.w + r * kLd + q * 8, w_row(r) + k0 + q * 8, true);
  }
  for (int c = threadIdx.x; c < kTok * (kK / 8); c += kThreads) {
    const int r = c / (kK / 8), q = c % (kK / 8);
    const bool valid = r < m;
    copy16(st.x + r * kLd + q * 8, (valid ? x_row(r) : x_row(0)) + k0 + q * 8, valid);
  }
}

// acc[nt] += W[16 warp rows] x X[8 tokens of n-tile nt]^T over the stage's kK, for the n-tiles
// that hold tokens (m of them).
__device__ __forceinline__ void mma_stage(const Stage& st, int m, float (&acc)[kTok / 8][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int kk = 0; kk < kK; kk += 16) {
    uint32_t a[4];
    ldmatrix_x4(a, st.w + (warp * 16 + lane % 16) * kLd + kk + (lane / 16) * 8);
#pragma unroll
    for (int pair = 0; pair < kTok / 16; ++pair) {
      if (pair * 16 >= m) break;
      // Matrices: tokens 0-7 at kk, tokens 0-7 at kk + 8, tokens 8-15 at kk, at kk + 8.
      uint32_t b[4];
      const int tok = pair * 16 + (lane / 16) * 8 + lane % 8, koff = ((lane / 8) % 2) * 8;
      ldmatrix_x4(b, st.x + tok * kLd + kk + koff);
      mma(acc[2 * pair], a, b[0], b[1]);
      mma(acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

// ---- the kernel ----------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads, 1) fused_moe(const Params p) {
  extern __shared__ __align__(16) uint8_t smem[];
  auto* ring = reinterpret_cast<uint16_t*>(smem);
  auto* tile = reinterpret_cast<float*>(smem + kRingBytes);  // [kRows][kTileLd]
  uint8_t* sched = smem + kRingBytes + kTileBytes;
  __shared__ Scan::TempStorage scan;
  __shared__ int32_t num_active, num_slots;

  Schedule s;
  s.slot_weight = reinterpret_cast<float*>(sched);
  s.slot_token = reinterpret_cast<int16_t*>(sched + kMaxSlots * 4);
  s.warp_counts = reinterpret_cast<int32_t*>(sched + kMaxSlots * 6);
  s.expert_first = s.warp_counts + kWarps * kMaxExperts;
  s.expert_count = s.expert_first + kMaxExperts;
  s.active = s.expert_count + kMaxExperts;
  s.item_prefix = s.active + kMaxExperts;  // kMaxExperts + 1 entries: the 16 spare bytes
  build_schedule(p, s, scan);
  // Thread 0 wrote the totals into its own copy: share them.
  if (threadIdx.x == 0) num_active = s.num_active, num_slots = s.num_slots;
  __syncthreads();
  s.num_active = num_active;
  s.num_slots = num_slots;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, q = lane % 4;  // accumulator row g (+8), columns 2q (+1)
  const int64_t H = p.hidden_dim, I = p.inter_dim;
  const bool gated = p.activation != gpu::kernels::kRelu2;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();

  // ---- phase 1: GEMM1 and the activation ----
  {
    const int cols = gated ? kRows / 2 : kRows;  // intermediate columns per item
    const int slices = int(I / cols), steps = int(H / kK);
    const int items = s.item_prefix[s.num_active] * slices;
    const int mine = items > int(blockIdx.x) ? (items - 1 - int(blockIdx.x)) / gridDim.x + 1 : 0;
    const int total = mine * steps;
    // Item i of this CTA (u = blockIdx.x + i * gridDim.x): active expert, chunk, slice.
    struct Item {
      int expert, first, m, slice;
    };
    auto item_of = [&](int i) {
      const int u = int(blockIdx.x) + i * int(gridDim.x);
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
    auto load = [&](int step, int slot) {
      const Item it = item_of(step / steps);
      const int k0 = (step % steps) * kK;
      const uint16_t* w = p.w13 + int64_t(it.expert) * p.n1 * H;
      auto w_row = [&](int r) {
        const int64_t row = gated ? (r < 64 ? it.slice * 64 + r : I + it.slice * 64 + r - 64)
                                  : int64_t(it.slice) * kRows + r;
        return w + row * H;
      };
      auto x_row = [&](int n) { return p.hidden + int64_t(s.slot_token[it.first + n]) * H; };
      load_stage(stage_at(ring, slot), w_row, x_row, it.m, k0);
    };
    float acc[kTok / 8][4];
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < total) load(st, st);
      commit();
    }
    for (int step = 0; step < total; ++step) {
      wait_groups<kStages - 2>();
      __syncthreads();
      const Item it = item_of(step / steps);
      if (step % steps == 0)
#pragma unroll
        for (int nt = 0; nt < kTok / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
      mma_stage(stage_at(ring, step % kStages), it.m, acc);
      const int next = step + kStages - 1;
      if (next < total) load(next, next % kStages);
      commit();
      if (step % steps != steps - 1) continue;
        // The item's last K step: rows to the tile, then the activation per (column, token).
#pragma unroll
      for (int nt = 0; nt < kTok / 8; ++nt) {
        const int r = warp * 16 + g, n = nt * 8 + 2 * q;
        tile[r * kTileLd + n] = acc[nt][0];
        tile[r * kTileLd + n + 1] = acc[nt][1];
        tile[(r + 8) * kTileLd + n] = acc[nt][2];
        tile[(r + 8) * kTileLd + n + 1] = acc[nt][3];
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < cols * it.m; idx += kThreads) {
        const int c = idx % cols, n = idx / cols;
        const float gv = tile[c * kTileLd + n];
        const float uv = gated ? tile[(c + 64) * kTileLd + n] : 0.0f;
        const float y = gpu::kernels::activate(p.act, p.activation, gv, uv);
        p.inter[int64_t(it.first + n) * I + int64_t(it.slice) * cols + c] = float_to_bf16_bits(y);
      }
    }
    wait_groups<0>();
  }
  grid.sync();

  // ---- phase 2: GEMM2 and the weighted combine, into part s of the output ----
  {
    const int chunks = (p.tokens + kTok - 1) / kTok, h_tiles = int(H / kRows);
    const int64_t part_k = I / p.splits;
    const int steps = int(part_k / kK);
    const int items = h_tiles * p.splits * chunks;
    // Per item: the active experts with slots in its token chunk, as (expert, first, m), in id
    // order; built into the tables' scratch (warp_counts) at the item's start.
    int32_t* list = s.warp_counts;  // [kMaxExperts][3]
    __shared__ int32_t list_len;
    for (int u = int(blockIdx.x); u < items; u += int(gridDim.x)) {
      const int h_tile = u % h_tiles, part = (u / h_tiles) % p.splits,
                chunk = u / (h_tiles * p.splits);
      const int t_lo = chunk * kTok, t_hi = min(p.tokens, t_lo + kTok);
      // Slots of each active expert with tokens in [t_lo, t_hi): a run in token order.
      int32_t count[2], first_in[2], flag[2], index[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int a = threadIdx.x * 2 + r;
        count[r] = 0, first_in[r] = 0;
        if (a < s.num_active) {
          const int e = s.active[a], f = s.expert_first[e], c = s.expert_count[e];
          int b = f, end = f + c;  // first slot with token >= t_lo, then >= t_hi
          int lo = f, hi = end;
          while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (s.slot_token[mid] < t_lo)
              lo = mid + 1;
            else
              hi = mid;
          }
          b = lo, hi = end;
          while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (s.slot_token[mid] < t_hi)
              lo = mid + 1;
            else
              hi = mid;
          }
          first_in[r] = b, count[r] = lo - b;
        }
        flag[r] = count[r] > 0 ? 1 : 0;
      }
      int32_t len = 0;
      __syncthreads();  // the previous item is done with the list and the tile
      Scan(scan).ExclusiveSum(flag, index, len);
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (flag[r]) {
          list[index[r] * 3 + 0] = s.active[threadIdx.x * 2 + r];
          list[index[r] * 3 + 1] = first_in[r];
          list[index[r] * 3 + 2] = count[r];
        }
      if (threadIdx.x == 0) list_len = len;
      for (int i = threadIdx.x; i < kRows * kTileLd; i += kThreads) tile[i] = 0.0f;
      __syncthreads();
      const int n_experts = list_len, total = n_experts * steps;
      const int64_t k_base = int64_t(part) * part_k;
      auto load = [&](int step, int slot) {
        const int l = step / steps, k0 = int(k_base) + (step % steps) * kK;
        const int e = list[l * 3], first = list[l * 3 + 1], m = list[l * 3 + 2];
        const uint16_t* w = p.w2 + (int64_t(e) * H + int64_t(h_tile) * kRows) * I;
        load_stage(
            stage_at(ring, slot), [&](int r) { return w + int64_t(r) * I; },
            [&](int n) { return p.inter + int64_t(first + n) * I; }, m, k0);
      };
      float acc[kTok / 8][4];
      for (int st = 0; st < kStages - 1; ++st) {
        if (st < total) load(st, st);
        commit();
      }
      for (int step = 0; step < total; ++step) {
        wait_groups<kStages - 2>();
        __syncthreads();
        const int l = step / steps;
        const int first = list[l * 3 + 1], m = list[l * 3 + 2];
        if (step % steps == 0)
#pragma unroll
          for (int nt = 0; nt < kTok / 8; ++nt)
            acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
        mma_stage(stage_at(ring, step % kStages), m, acc);
        const int next = step + kStages - 1;
        if (next < total) load(next, next % kStages);
        commit();
        if (step % steps != steps - 1) continue;
          // This expert's last K step: weight x result into the tile at each slot's token. A tile
          // row (one h) is only ever touched by this warp's quad g, in program order.
#pragma unroll
        for (int nt = 0; nt < kTok / 8; ++nt) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int n = nt * 8 + 2 * q + j;
            if (n >= m) continue;
            const int t = s.slot_token[first + n] - t_lo;
            const float wt = s.slot_weight[first + n];
            const int r = warp * 16 + g;
            tile[r * kTileLd + t] += wt * acc[nt][j];
            tile[(r + 8) * kTileLd + t] += wt * acc[nt][2 + j];
          }
        }
        __syncwarp();
      }
      wait_groups<0>();
      __syncthreads();
      // The tile to part `part` of the output rows [t_lo, t_hi), columns of this h tile.
      float* dst = p.parts + (int64_t(part) * p.tokens) * H + int64_t(h_tile) * kRows;
      for (int idx = threadIdx.x; idx < (t_hi - t_lo) * kRows; idx += kThreads) {
        const int h = idx % kRows, t = idx / kRows;
        dst[int64_t(t_lo + t) * H + h] = tile[h * kTileLd + t];
      }
    }
  }
  grid.sync();

  // ---- phase 3: the parts summed in order, bf16 once ----
  const int64_t elems = int64_t(p.tokens) * H;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < elems;
       i += int64_t(gridDim.x) * kThreads) {
    float v = 0.0f;
    for (int part = 0; part < p.splits; ++part) v += p.parts[int64_t(part) * elems + i];
    p.out[i] = float_to_bf16_bits(v);
  }
}

}  // namespace moe::mega::kernels
