// moe_deepgemm_gemm_bench [--iterations N] [--only SUBSTRING] [--pause-ms P] [--own] [--fused]
// [--timeline]: times the grouped
// fp8 block-scale GEMMs of deepgemm_style, every tiling, on the model shapes' GEMM1 and GEMM2 at
// prefill batch sizes (contiguous rows) and at decode (one row for each expert a token's slots
// reach): every group with the mean count ("balanced"), and counts (past 2 rows a group)
// spread as random routing spreads them ("routed": mean +- sqrt(mean), fixed seed), where tiles
// that fit the mean exactly run a second, nearly empty tile for half the experts. One JSON line
// per (shape, tiling): time, TFLOP/s, and the weight bytes read per second against the H200's
// measured read bandwidth. Values are codes of a real layer's spread (fill_codes: the fused
// epilogue's rare exact paths depend on them; the tensor cores' time does not). With --pause-ms,
// each launch is timed alone after the GPU idled P ms (the median is reported): a kernel that runs
// slower back to back than alone shows it there. --own: the own kernel's tilings only; --fused:
// GEMM1 shapes also with the activation (silu_mul) and the intermediate's quantisation fused into
// the own kernel's epilogue; --timeline: for the own 128-row tiles, one more launch that records
// each tile's clocks (Fp8Timeline) and the record's means: main loop, the fused epilogue's
// activation, exchange wait and stores, and the gap before a consumer's next tile, in SM cycles.
// Not a test: run it by hand on an H200 (bench/NOTES.md).
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "moe_cuda/check.hpp"
#include "src/fp8_gemm.hpp"

namespace {

using namespace moe;
using namespace moe::deepgemm;

constexpr double kReadBandwidth = 4.6e12;  // H200, measured read (docs/design.md §8)
constexpr double kPeakFp8 = 1297e12;       // cuBLASLt's dense block-scaled fp8 GEMM on an H200

struct GemmShape {
  const char* name;
  int groups, m, n, k;  // m rows per group
  bool f32_out;         // GEMM1 writes f32 for the re-quantisation
};

// T * top_k / E rows per expert (balanced) at the grid's prefill points.
const GemmShape kShapes[] = {
    {"deepseek_v3 T=4096 gemm1", 256, 128, 4096, 7168, true},
    {"deepseek_v3 T=4096 gemm2", 256, 128, 7168, 2048, false},
    {"deepseek_v3 T=16384 gemm1", 256, 512, 4096, 7168, true},
    {"deepseek_v3 T=16384 gemm2", 256, 512, 7168, 2048, false},
    {"mixtral_8x7b T=4096 gemm1", 8, 1024, 28672, 4096, true},
    {"mixtral_8x7b T=4096 gemm2", 8, 1024, 4096, 14336, false},
    {"qwen3_30b_a3b T=4096 gemm1", 128, 256, 1536, 2048, true},
    {"qwen3_30b_a3b T=4096 gemm2", 128, 256, 2048, 768, false},
    // Mid-range, where the own kernel runs (16-176 rows an expert).
    {"qwen3_30b_a3b T=256 gemm1", 128, 16, 1536, 2048, true},
    {"qwen3_30b_a3b T=256 gemm2", 128, 16, 2048, 768, false},
    {"mixtral_8x7b T=256 gemm1", 8, 64, 28672, 4096, true},
    {"deepseek_v3 T=512 gemm1", 256, 16, 4096, 7168, true},
    // Decode (bench/NOTES.md session 32): the experts of one or two tokens, one row each.
    {"mixtral_8x7b T=1 gemm1", 2, 1, 28672, 4096, true},
    {"mixtral_8x7b T=1 gemm2", 2, 1, 4096, 14336, false},
    {"mixtral_8x7b T=2 gemm1", 4, 1, 28672, 4096, true},
    {"mixtral_8x7b T=2 gemm2", 4, 1, 4096, 14336, false},
    {"deepseek_v3 T=1 gemm1", 8, 1, 4096, 7168, true},
    {"deepseek_v3 T=1 gemm2", 8, 1, 7168, 2048, false},
    {"qwen3_30b_a3b T=1 gemm1", 8, 1, 1536, 2048, true},
    {"qwen3_30b_a3b T=1 gemm2", 8, 1, 2048, 768, false},
};

struct Options {
  int iterations = 10, pause_ms = 0;
  bool own_only = false, fused = false, timeline = false;
};

// Means over a timeline's records (SM cycles): each tile's main loop, its epilogue before the
// fused exchange (the activation and the row maxima), the exchange's wait, the rest of the
// epilogue (quantisation and stores; all of it when not fused), and the gap from a consumer's
// previous tile's end to its next tile's start.
std::string timeline_summary(const std::vector<unsigned long long>& rec, int slots, int tiles) {
  constexpr int kW = Fp8Timeline::kWords;
  double loop = 0, act = 0, wait = 0, rest = 0, gap = 0;
  int64_t n = 0, gaps = 0, act_exact = 0, codes_exact = 0;
  for (int s = 0; s < slots; ++s) {
    const unsigned long long* r = rec.data() + size_t(s) * tiles * kW;
    for (int i = 0; i < tiles && r[kW * i + 1] != 0; ++i) {
      const unsigned long long* t = r + kW * i;
      loop += double(t[2] - t[1]);
      act += double(t[3] - t[2]);
      wait += double(t[4] - t[3]);
      rest += double(t[5] - t[4]);
      act_exact += (t[0] >> 32) & 1;
      codes_exact += (t[0] >> 33) & 1;
      ++n;
      if (i > 0) {
        gap += double(t[1] - r[kW * (i - 1) + 5]);
        ++gaps;
      }
    }
  }
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "{\"tiles\": %lld, \"mainloop_cycles\": %.0f, \"activation_cycles\": %.0f, "
                "\"exchange_wait_cycles\": %.0f, \"store_cycles\": %.0f, \"gap_cycles\": %.0f, "
                "\"exact_activation_share\": %.3f, \"exact_codes_share\": %.3f}",
                static_cast<long long>(n), n ? loop / n : 0.0, n ? act / n : 0.0,
                n ? wait / n : 0.0, n ? rest / n : 0.0, gaps ? gap / gaps : 0.0,
                n ? double(act_exact) / n : 0.0, n ? double(codes_exact) / n : 0.0);
  return buf;
}

// e4m3 codes from a hash of the index, as a quantised layer holds them: rows (activations) from
// a normal distribution whose 128-channel block maxima land near 448 (N(0, 160), saturating),
// weights uniform over [-448, 448] (uniform weights of amax 1 / sqrt(K) at scale amax / 448).
// GEMM1's sums then have the spread of a real layer's (~N(0, 0.6) for N(0, 1) hidden states),
// which the fused epilogue's data-dependent paths see.
__device__ __forceinline__ float hash_unit(size_t i, uint32_t salt) {  // (0, 1)
  uint32_t h = uint32_t(i) * 2654435761u ^ salt ^ uint32_t(i >> 32) * 40503u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (float(h >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

__global__ void fill_codes(uint8_t* p, size_t n, uint32_t salt, bool normal) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float v;
    if (normal) {  // Box-Muller
      const float u1 = hash_unit(i, salt), u2 = hash_unit(i, salt ^ 0x9e3779b9u);
      v = 160.0f * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    } else {
      v = 448.0f * (2.0f * hash_unit(i, salt) - 1.0f);
    }
    p[i] = uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
}

__global__ void fill_floats(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

template <class T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  MOE_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  return static_cast<T*>(p);
}

template <class T>
T* device_copy(const std::vector<T>& v) {
  T* p = device_alloc<T>(v.size());
  MOE_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// Rows per group: the mean, or a normal spread of it (random routing sends each of T*k slots to
// one of E experts: a binomial count, std ~ sqrt(mean)).
std::vector<int64_t> group_offsets(const GemmShape& s, bool routed) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> spread(0.0, std::sqrt(double(s.m)));
  std::vector<int64_t> offsets = {0};
  for (int g = 0; g < s.groups; ++g)
    offsets.push_back(offsets.back() +
                      (routed ? std::max<int64_t>(0, std::llround(s.m + spread(rng))) : s.m));
  return offsets;
}

void bench(const GemmShape& s, bool routed, const Options& o, int sm_count) {
  const int iterations = o.iterations, pause_ms = o.pause_ms;
  const std::vector<int64_t> offsets = group_offsets(s, routed);
  const size_t rows = size_t(offsets.back()), kb = size_t(s.k / 128), nb = size_t(s.n / 128);
  const size_t w_group = size_t(s.n) * s.k, sw_group = kb * nb;
  auto* a = device_alloc<uint8_t>(rows * s.k);
  auto* sa = device_alloc<float>(kb * rows);
  auto* w = device_alloc<uint8_t>(w_group * s.groups);
  auto* sw = device_alloc<float>(sw_group * s.groups);
  void* out = device_alloc<uint8_t>(rows * s.n * (s.f32_out ? 4 : 2));
  fill_codes<<<1024, 256>>>(a, rows * s.k, 1, true);
  fill_codes<<<4096, 256>>>(w, w_group * s.groups, 2, false);
  // Scales: N(0, 1) rows' block maxima (~2.8) / 448, and (1 / sqrt(K)) / 448.
  fill_floats<<<256, 256>>>(sa, kb * rows, 2.8f / 448.0f);
  fill_floats<<<256, 256>>>(sw, sw_group * s.groups, float(1.0 / std::sqrt(double(s.k)) / 448.0));
  MOE_CUDA_CHECK(cudaGetLastError());
  std::vector<const void*> w_ptrs;
  std::vector<const float*> sw_ptrs;
  for (int g = 0; g < s.groups; ++g) {
    w_ptrs.push_back(w + size_t(g) * w_group);
    sw_ptrs.push_back(sw + size_t(g) * sw_group);
  }
  int64_t* d_offsets = device_copy(offsets);
  const void** d_w_ptrs = device_copy(w_ptrs);
  const float** d_sw_ptrs = device_copy(sw_ptrs);
  const size_t ws_bytes = fp8_gemm_workspace_bytes(s.groups, sm_count);
  void* ws = device_alloc<uint8_t>(ws_bytes);

  Fp8GemmArgs args;
  args.groups = s.groups;
  args.offsets = d_offsets;
  args.n = s.n;
  args.k = s.k;
  args.rows = a;
  args.row_scales = sa;
  args.scale_ld = int64_t(rows);
  args.weights = d_w_ptrs;
  args.w_scales = d_sw_ptrs;
  args.weight_stack = w;
  args.w_scale_stack = sw;
  args.out = out;
  args.f32_out = s.f32_out;
  args.workspace = ws;
  args.workspace_bytes = ws_bytes;
  args.sm_count = sm_count;

  cudaEvent_t start, stop;
  MOE_CUDA_CHECK(cudaEventCreate(&start));
  MOE_CUDA_CHECK(cudaEventCreate(&stop));
  const double flops = 2.0 * double(rows) * s.n * s.k;
  const double weight_bytes = double(w_group + sw_group * 4) * s.groups;
  const double floor_s = std::max(weight_bytes / kReadBandwidth, flops / kPeakFp8);
  // Fused GEMM1 (--fused): silu_mul codes and their 1x128 scales instead of the f32 output.
  const int64_t inter = s.n / 2;
  uint8_t* codes = nullptr;
  float* code_scales = nullptr;
  Fp8FusedGemm1 fused;
  if (o.fused && s.f32_out) {
    codes = device_alloc<uint8_t>(rows * size_t(inter));
    code_scales = device_alloc<float>(size_t(inter / 128) * rows);
    fused.activation = 0;  // MOE_ACTIVATION_SILU_MUL
    fused.codes = codes;
    fused.scales = code_scales;
    fused.scale_ld = int64_t(rows);
  }
  // --timeline: room for 512 tiles a consumer (two consumers a CTA).
  constexpr int kTimelineTiles = 512;
  const size_t timeline_words = size_t(sm_count) * 2 * kTimelineTiles * Fp8Timeline::kWords;
  auto* timeline = o.timeline ? device_alloc<unsigned long long>(timeline_words) : nullptr;
  struct Variant {
    Fp8Tiles tiles;
    bool fused;
  };
  std::vector<Variant> variants;
  for (Fp8Tiles t : {Fp8Tiles::kTokens, Fp8Tiles::kTokensPaired, Fp8Tiles::kTokensFfma,
                     Fp8Tiles::kTokensFfma192, Fp8Tiles::kTokensFfmaSplitK, Fp8Tiles::kWeights,
                     Fp8Tiles::kWeightsFfma, Fp8Tiles::kWeightsFfmaSplitK}) {
    const bool own = is_own_kernel(t);
    if (o.own_only && !own) continue;
    if ((t == Fp8Tiles::kWeights || swaps_operands(t)) && s.m > 256) continue;  // decode tilings
    variants.push_back({t, false});
    // Split K and swapped operands fuse nothing (a fused epilogue needs a token tile's whole K).
    if (codes != nullptr && can_fuse_gemm1(t)) variants.push_back({t, true});
  }
  for (const Variant& v : variants) {
    const Fp8Tiles tiles = v.tiles;
    args.fused = v.fused ? &fused : nullptr;
    args.timeline = {};
    for (int i = 0; i < 3; ++i) run_fp8_grouped_gemm(tiles, args, nullptr);
    double sec = 0;
    if (pause_ms > 0) {
      std::vector<float> each(iterations);
      for (float& ms : each) {
        MOE_CUDA_CHECK(cudaDeviceSynchronize());
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        MOE_CUDA_CHECK(cudaEventRecord(start));
        run_fp8_grouped_gemm(tiles, args, nullptr);
        MOE_CUDA_CHECK(cudaEventRecord(stop));
        MOE_CUDA_CHECK(cudaEventSynchronize(stop));
        MOE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      }
      std::sort(each.begin(), each.end());
      sec = each[each.size() / 2] / 1e3;
    } else {
      MOE_CUDA_CHECK(cudaEventRecord(start));
      for (int i = 0; i < iterations; ++i) run_fp8_grouped_gemm(tiles, args, nullptr);
      MOE_CUDA_CHECK(cudaEventRecord(stop));
      MOE_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      MOE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      sec = ms / 1e3 / iterations;
    }
    std::string timed = "null";
    if (timeline != nullptr && tiles == Fp8Tiles::kTokensFfma) {
      MOE_CUDA_CHECK(cudaMemset(timeline, 0, timeline_words * sizeof(unsigned long long)));
      args.timeline = {timeline, kTimelineTiles, timeline_words};
      run_fp8_grouped_gemm(tiles, args, nullptr);
      args.timeline = {};
      std::vector<unsigned long long> rec(timeline_words);
      MOE_CUDA_CHECK(
          cudaMemcpy(rec.data(), timeline, rec.size() * sizeof(rec[0]), cudaMemcpyDeviceToHost));
      timed = timeline_summary(rec, sm_count * 2, kTimelineTiles);
    }
    std::printf(
        "{\"shape\": \"%s\", \"rows\": \"%s\", \"tiles\": \"%s\", \"fused\": %s, "
        "\"groups\": %d, \"pause_ms\": %d, \"m\": %d, \"n\": %d, "
        "\"k\": %d, \"ms\": %.4f, \"tflops\": %.1f, \"weight_tb_s\": %.2f, \"x_floor\": "
        "%.2f, \"timeline\": %s}\n",
        s.name, routed ? "routed" : "balanced", fp8_tiles_name(tiles), v.fused ? "true" : "false",
        s.groups, pause_ms, s.m, s.n, s.k, sec * 1e3, flops / sec / 1e12, weight_bytes / sec / 1e12,
        sec / floor_s, timed.c_str());
    std::fflush(stdout);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (void* p :
       {static_cast<void*>(a), static_cast<void*>(sa), static_cast<void*>(w),
        static_cast<void*>(sw), out, static_cast<void*>(d_offsets), static_cast<void*>(d_w_ptrs),
        static_cast<void*>(d_sw_ptrs), ws, static_cast<void*>(codes),
        static_cast<void*>(code_scales), static_cast<void*>(timeline)})
    cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      o.iterations = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--pause-ms") == 0 && i + 1 < argc) {
      o.pause_ms = std::max(0, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--own") == 0) {
      o.own_only = true;
    } else if (std::strcmp(argv[i], "--fused") == 0) {
      o.fused = true;
    } else if (std::strcmp(argv[i], "--timeline") == 0) {
      o.timeline = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--iterations N] [--only SUBSTRING] [--pause-ms P] [--own] "
                   "[--fused] [--timeline]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    int sm_count = 0;
    MOE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
    for (const GemmShape& s : kShapes)
      if (only.empty() || std::string(s.name).find(only) != std::string::npos)
        for (bool routed : {false, true})
          if (!routed || s.m > 2) bench(s, routed, o, sm_count);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_deepgemm_gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
