// How fast 132 SMs can stream an expert weight stack through a cutlass_mega-like ring, by access
// pattern (bench/NOTES.md, session 39: at Qwen3-30B-A3B T = 1 the fused kernel's GEMM1 reads at
// ~3.4 TB/s on 96 or 132 SMs, where larger batches reach 4.3 TB/s). Each CTA streams work items
// of 128 rows x the whole K through a 5-stage ring of 16 KB stages (one producer warp; a
// consumer warp only waits and releases), by one of:
//   tma     two 64-row x 128-byte TMA boxes a stage (the kernel's), EVICT_FIRST
//   tma_nh  the same without the cache hint
//   bulk    one contiguous 16 KB bulk copy a stage (a prepared layout, as the 4-bit chunks)
//   tma_st  tma, each CTA starting its items at a different K (staggered)
// and tma and bulk with 1 and 10 stages (how the rate follows the bytes in flight), and bulk
// copies of mxfp4's 8704-byte chunks through 9 and 5 stages (cutlass_mega's 4-bit ring: is its
// ~20 GB/s an SM at decode the stream's or the consumers'?), and the larger stages session 41 asked
// about (a 4-bit stage's time is per stage, not per byte): 32 KB bulk copies through 3 and 4
// stages (two bf16 chunks a stage), mxfp4's two chunks (17408 bytes, 4 stages) and four (34816
// bytes, 2 and 3 stages, where K allows). Each mode
// warms up for 200 ms (an idle GPU clocks low) and prints the SM clock it ran at; one CTA an SM.
// Usage: moe_stream_pattern [rows] [cols] [ctas]   (default 12288 2048 96: Qwen3's W13 of 8
// experts; 16896 2048 132: one item for every SM). Bytes rotate over 8 copies (beyond L2).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cutlass/arch/barrier.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>

#include "moe_cuda/tensor_map.hpp"

namespace {

constexpr int kStageBytes = 16384, kFp4Bytes = 8704, kRows = 128, kCopies = 8;
constexpr int kBf16x2Bytes = 2 * kStageBytes, kFp4x2Bytes = 2 * kFp4Bytes,
              kFp4x4Bytes = 4 * kFp4Bytes;
enum Mode { kTma = 0, kTmaNoHint = 1, kBulk = 2, kTmaStagger = 3 };

// kBytes: a stage's bytes (16 KB; bulk copies also mxfp4's 8704-byte chunk); steps: stages an
// item streams.
template <int M, int kStages, int kBytes>
__global__ void __launch_bounds__(64, 1)
    stream(const __grid_constant__ CUtensorMap map, const uint8_t* base, int items, int steps,
           unsigned long long* sink, unsigned long long* clk) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  // TMA's 128-byte swizzle needs 1024-byte aligned stages: aligned by hand (the launch gives 1024
  // spare bytes), as the fused kernel does.
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  uint8_t* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cutlass::arch::ClusterBarrier::init(&full[s], 1);
      cutlass::arch::ClusterBarrier::init(&empty[s], 1);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  const long long c0 = clock64();
  unsigned long long g0, g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int stage = 0;
  uint32_t phase = 0;
  unsigned long long seen = 0;
  for (int u = blockIdx.x; u < items; u += gridDim.x) {
    const int shift = M == kTmaStagger ? (blockIdx.x * 7) % steps : 0;
    for (int i = 0; i < steps; ++i) {
      const int ks = (i + shift) % steps;
      if (warp == 0) {
        cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
        if (lane == 0) {
          cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&full[stage], kBytes);
          uint8_t* dst = smem + stage * kBytes;
          if constexpr (M == kBulk) {
            const uint8_t* src = base + (size_t(u) * steps + ks) * kBytes;
            cute::SM90_BULK_COPY_G2S::copy(src, &full[stage], dst, kBytes);
          } else {
            static_assert(kBytes == kStageBytes, "two 64-row x 128-byte boxes a stage");
            const uint64_t hint = M == kTmaNoHint ? uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL)
                                                  : uint64_t(cute::TMA::CacheHintSm90::EVICT_FIRST);
            cute::SM90_TMA_LOAD_2D::copy(&map, &full[stage], hint, dst, ks * 64, u * kRows);
            cute::SM90_TMA_LOAD_2D::copy(&map, &full[stage], hint, dst + kStageBytes / 2, ks * 64,
                                         u * kRows + 64);
          }
        }
        __syncwarp();
      } else {
        cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
        seen += smem[stage * kBytes + lane * 97];
        __syncwarp();
        if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&empty[stage]);
      }
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
  }
  if (warp == 1 && seen == 0x5eed) *sink = seen;  // keeps the reads
  // CTA 0's SM cycles and nanoseconds over its stream: the clock the copies ran at.
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  if (threadIdx.x == 0 && blockIdx.x == 0) clk[0] = clock64() - c0, clk[1] = g1 - g0;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Timing {
  double us;   // a launch
  double mhz;  // CTA 0's SM clock over its stream in the last launch
};

template <int M, int kStages, int kBytes = kStageBytes>
Timing time_mode(const CUtensorMap* maps, uint8_t* const* copies, int items, int steps, int ctas,
                 unsigned long long* sink, unsigned long long* clk) {
  if (steps == 0) return Timing{};  // K is not a whole number of this mode's stages
  // The stages, the alignment's slack, and at least 120 KB: one CTA an SM, as the fused kernel.
  const size_t smem = std::max<size_t>(size_t(kStages) * kBytes + 1024, 120 * 1024);
  check(cudaFuncSetAttribute(stream<M, kStages, kBytes>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
        "smem");
  // Warm up for 200 ms at least: an idle GPU's clocks take a while to rise, and a short warm-up
  // timed the copies at a fraction of the SM clock.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200); ++i) {
    stream<M, kStages, kBytes>
        <<<ctas, 64, smem>>>(maps[i % kCopies], copies[i % kCopies], items, steps, sink, clk);
    if (i % 64 == 63) check(cudaDeviceSynchronize(), "warm-up");
  }
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  constexpr int kReps = 64;
  cudaEventRecord(a);
  for (int r = 0; r < kReps; ++r)
    stream<M, kStages, kBytes>
        <<<ctas, 64, smem>>>(maps[r % kCopies], copies[r % kCopies], items, steps, sink, clk);
  cudaEventRecord(b);
  check(cudaEventSynchronize(b), "timed runs");
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  unsigned long long c[2] = {0, 1};
  check(cudaMemcpy(c, clk, sizeof(c), cudaMemcpyDeviceToHost), "clock");
  return {ms * 1e3 / kReps, c[1] > 0 ? c[0] * 1e3 / c[1] : 0.0};
}

// One mode's row of the table: its name, timing, the stages an item streams and a stage's bytes.
struct Row {
  const char* name;
  Timing t;
  int steps, stage_bytes;
};
// What every mode streams from: the stacks, the items and CTAs, the kernel's outputs.
struct Stream {
  const CUtensorMap* maps;
  uint8_t* const* copies;
  int items, ctas;
  unsigned long long *sink, *clk;
};
template <int M, int kStages, int kBytes = kStageBytes>
Row mode_row(const char* name, const Stream& s, int steps) {
  return {name,
          time_mode<M, kStages, kBytes>(s.maps, s.copies, s.items, steps, s.ctas, s.sink, s.clk),
          steps, kBytes};
}

}  // namespace

int main(int argc, char** argv) {
  const long rows = argc > 1 ? std::atol(argv[1]) : 12288,
             cols = argc > 2 ? std::atol(argv[2]) : 2048;
  const int ctas = argc > 3 ? std::atoi(argv[3]) : 96;
  if (rows % kRows != 0 || cols % 64 != 0 || ctas < 1) {
    std::fprintf(stderr, "rows must be a multiple of 128, cols of 64, ctas positive\n");
    return 2;
  }
  const size_t bytes = size_t(rows) * cols * 2;
  const int items = int(rows / kRows), steps = int(cols / 64);
  uint8_t* copies[kCopies];
  CUtensorMap maps[kCopies];
  for (int i = 0; i < kCopies; ++i) {
    check(cudaMalloc(&copies[i], bytes), "cudaMalloc");
    check(cudaMemset(copies[i], i + 1, bytes), "cudaMemset");
    if (!moe::gpu::encode_tensor_map_2d(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, copies[i], rows,
                                        cols, 2, 64, 64)) {
      std::fprintf(stderr, "tensor map refused\n");
      return 1;
    }
  }
  unsigned long long *sink = nullptr, *clk = nullptr;
  check(cudaMalloc(&sink, 8), "sink");
  check(cudaMalloc(&clk, 16), "clock");
  const double floor_us = bytes / 4.6e6;  // the H200's read rate (an H100's is ~3.35 TB/s)
  std::printf("rows %ld cols %ld (%.1f MB), %d items of %d stages on %d CTAs; floor %.2f us\n",
              rows, cols, bytes / 1e6, items, steps, ctas, floor_us);
  // The 4-bit modes stream the same rows x cols at 4 bits with mxfp4's scales (128 K a stage:
  // 8704-byte chunks, as cutlass_mega's 4-bit ring with its 9 stages, and with bf16's 5).
  // Stages an item streams: 4-bit 128 K (s4), bf16 128 K (s2, two 16 KB chunks), 4-bit 256 and
  // 512 K (s8, s16); 0 where K is not a whole number of them.
  const int s4 = steps / 2, s2 = steps % 2 == 0 ? steps / 2 : 0,
            s8 = steps % 4 == 0 ? steps / 4 : 0, s16 = steps % 8 == 0 ? steps / 8 : 0;
  const Stream st{maps, copies, items, ctas, sink, clk};
  const Row rows_out[] = {
      mode_row<kTma, 5>("tma", st, steps),
      mode_row<kTmaNoHint, 5>("tma_nh", st, steps),
      mode_row<kBulk, 5>("bulk", st, steps),
      mode_row<kTmaStagger, 5>("tma_st", st, steps),
      mode_row<kTma, 1>("tma_s1", st, steps),
      mode_row<kBulk, 1>("bulk_s1", st, steps),
      mode_row<kTma, 10>("tma_s10", st, steps),
      mode_row<kBulk, 10>("bulk_s10", st, steps),
      mode_row<kBulk, 9, kFp4Bytes>("fp4_s9", st, s4),
      mode_row<kBulk, 5, kFp4Bytes>("fp4_s5", st, s4),
      mode_row<kBulk, 3, kBf16x2Bytes>("bulk32_s3", st, s2),
      mode_row<kBulk, 4, kBf16x2Bytes>("bulk32_s4", st, s2),
      mode_row<kBulk, 4, kFp4x2Bytes>("fp4x2_s4", st, s8),
      mode_row<kBulk, 2, kFp4x4Bytes>("fp4x4_s2", st, s16),
      mode_row<kBulk, 3, kFp4x4Bytes>("fp4x4_s3", st, s16),
  };
  for (const Row& r : rows_out) {
    if (r.steps == 0) {  // K is not a whole number of these stages
      std::printf("%-9s (K %ld is not a whole number of its stages)\n", r.name, cols);
      continue;
    }
    const double moved = double(items) * r.steps * r.stage_bytes;
    const int per_cta = (items + ctas - 1) / ctas * r.steps;  // stages the busiest CTA streams
    std::printf(
        "%-9s %8.2f us  %6.2f TB/s  %5.2fx its floor  %.2f us a stage  %5.1f GB/s an SM  SM %4.0f "
        "MHz\n",
        r.name, r.t.us, moved / r.t.us / 1e6, r.t.us / (moved / 4.6e6), r.t.us / per_cta,
        r.stage_bytes / (r.t.us / per_cta) / 1e3, r.t.mhz);
  }
  return 0;
}
