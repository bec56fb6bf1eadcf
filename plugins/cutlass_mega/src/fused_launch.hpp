// The boundary between the nvcc-compiled launcher of the fused layer (fused_launch.cu) and the
// host code that checks and reports (mega_layer.cpp): plain types only, no exceptions, no fmt.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/params.hpp"  // common_cuda's plain kernel arguments (RouteParams)

namespace moe::mega::detail {

// The kernel's instances (kernels/config.cuh WeightKind): bf16 weights and activations, fp8_block
// weights with fp8_1x128 activations (kFp8BlockF16x2 where H and I allow, else kFp8BlockF16: the
// activations' codes kept as f16 values), mxfp4 or nvfp4 weights with bf16 or e4m3 activations,
// one, two (the default where H and I allow) or four chunks a stage.
enum class Kind : int {
  kBf16 = 0,
  kFp8Block = 1,
  kMxfp4 = 2,
  kNvfp4 = 3,
  kFp8BlockF16 = 4,
  kMxfp4x2 = 5,
  kNvfp4x2 = 6,
  kMxfp4x4 = 7,  // four chunks a stage (batches of 8 slots an expert or 64 tokens and more)
  kNvfp4x4 = 8,
  kBf16x2 = 9,          // bf16, two prepared chunks a stage (the default where H and I allow)
  kFp8BlockF16x2 = 10,  // fp8_block on f16 codes, two 16 KB tiles a stage (MOE_MEGA_FP8_WGMMA=0)
  kFp8BlockWgmma = 11,  // fp8_block on e4m3 codes by wgmma (MOE_MEGA_FP8_WGMMA=1, a measurement)
  kMxfp4Wgmma = 12,     // 4-bit, two chunks a stage, by wgmma (MOE_MEGA_FP4_WGMMA=1, a measurement)
  kNvfp4Wgmma = 13,
  kFp8BlockWgmma2 = 14  // fp8_block by wgmma, two tiles a stage (the default where they apply)
};
// fp8_block instances whose activation codes are kept as their f16 values (2 bytes a code).
constexpr bool has_f16_codes(Kind k) {
  return k == Kind::kFp8BlockF16 || k == Kind::kFp8BlockF16x2;
}
constexpr bool is_fp4(Kind k) {
  return k == Kind::kMxfp4 || k == Kind::kNvfp4 || k == Kind::kMxfp4x2 || k == Kind::kNvfp4x2 ||
         k == Kind::kMxfp4x4 || k == Kind::kNvfp4x4 || k == Kind::kMxfp4Wgmma ||
         k == Kind::kNvfp4Wgmma;
}

// How the kernel quantises e4m3 activations on 4-bit weights (kernels/config.cuh ActQuant): not
// at all (bf16 activations), mxfp8, e4m3 per tensor with static scales or from the batch's amax.
enum class ActQuant : int32_t { kBf16 = 0, kMxfp8 = 1, kFp8Static = 2, kFp8Dynamic = 3 };

// Params::prefetch_late's bits (kernels/config.cuh kLatePhase0, kLatePhase1b; checked equal in
// fused_launch.cu): GEMM1's first stages prefetched after phase 0, GEMM2's after phase 1b.
constexpr int32_t kLatePhase0Bit = 1, kLatePhase1bBit = 2;

// Limits the kernel holds in shared memory (kernels/config.cuh), for an instance.
struct KernelLimits {
  int max_slots;               // tokens x (top_k + virtual experts) of one batch
  int max_experts;             // routed and virtual experts of the layer
  int token_chunk;             // an expert's slots per work item
  int weight_rows;             // rows of a weight tile: H is a multiple
  int scale_block;             // fp8_block: channels per scale
  int max_k_blocks;            // fp8_block: scale blocks along H and along I
  int max_virtual;             // sink and shared experts' virtual experts
  int own_rows_elems;          // fp8_block own_rows: the largest batch (tokens x H) a CTA quantises
  int own_rows_default_elems;  // the same limit without MOE_MEGA_FP8_OWN_ROWS
};
KernelLimits kernel_limits(Kind kind);

// A pipeline stage of a format's kernel: the K elements it covers and the weight bytes it streams
// (the timeline's rates).
struct StageGeometry {
  int k;
  int weight_bytes;
};
StageGeometry stage_geometry(Kind kind);

// The TMA descriptors of the two weight stacks (CUtensorMap, opaque here), made once at prepare.
struct alignas(64) WeightMaps {
  unsigned char w13[128];
  unsigned char w2[128];
};
// w13 [rows13 = E * n1, hidden], w2 [rows2 = E * hidden, inter], elements of `elem_bytes` bytes
// (2: bf16, 1: e4m3); nullptr on success.
const char* encode_weight_maps(WeightMaps* maps, int elem_bytes, const void* w13, int64_t rows13,
                               int64_t hidden, const void* w2, int64_t rows2,
                               int64_t inter) noexcept;

struct FusedCall {
  const WeightMaps* maps;  // bf16, fp8_block
  Kind kind;
  const uint16_t* hidden;
  const int32_t* ids;
  const float* weights;
  // Routing in the launch (route.logits set, by moe_cuda/routing.hpp's fill_route_params; its
  // ids and weights are `ids` and `weights`, which the kernel then writes): route_fits must hold.
  gpu::kernels::RouteParams route;
  uint16_t* out;
  bool accumulate;  // out += the result (moe_run_args.accumulate)
  float* y;
  uint16_t* inter;  // bf16, fp4
  // The prepared chunks: mxfp4, nvfp4 (moe_cuda/fp4_chunks.hpp); bf16 and e4m3 prepared with
  // MOE_MEGA_CHUNKS=1 (kernels/chunk_layout.hpp); else null (the maps are read).
  const uint8_t* w13_chunks;
  const uint8_t* w2_chunks;
  const float* g13;  // nvfp4: scale_2 [E] of w13 and w2
  const float* g2;
  const float* b13;  // expert biases [E, n1], [E, H] f32, or nullptr
  const float* b2;
  const float* s13;  // fp8_block: the block scales, canonical order
  const float* s2;
  uint8_t* xq;  // fp8_block workspace
  float* xs;
  int32_t own_rows;       // kernels/config.cuh Params::own_rows
  int32_t prefetch_late;  // kernels/config.cuh Params::prefetch_late: the bits below
  float* inter32;
  uint8_t* iq;
  float* is;
  // width: the ids' columns; slot_width: a token's slots (top_k, then one per virtual expert);
  // routed: ids below it are routed experts; experts: routed and virtual; col_*: the virtual
  // experts' slot columns (src/virtual_experts.hpp SlotColumn), KernelLimits::max_virtual of them.
  int32_t tokens, width, slot_width, top_k, routed, experts, hidden_dim, inter_dim, n1, activation;
  // 4-bit weights with e4m3 activations (kernels/config.cuh ActQuant, 0: bf16): the static
  // scales, and the workspace's quantised hidden states [T, H] bf16 and per-CTA amax [3][ctas]
  // (the f32 intermediate is inter32).
  ActQuant act_quant;
  float a13_scale, a2_scale;
  uint16_t* xa;
  float* amax;
  int16_t col_src[32], col_expert[32], col_match[32];
  int32_t max_split2;               // copies of y the workspace holds: GEMM2's K parts at most
  int32_t split2_waves;             // Params::split2_waves
  unsigned long long* gemm2_ready;  // Params::gemm2_ready (MOE_MEGA_GEMM2=early), else null
  float limit, alpha;
  int32_t gelu_tanh;
  unsigned long long* timeline;  // measurement (kernels/timeline.hpp): null, or [ctas] records
  int32_t timeline_items;
  // MOE_MEGA_LAUNCH=pdl (a measurement): cudaLaunchKernelEx, cooperative and a programmatic
  // dependent of the stream's previous kernel; false: cudaLaunchCooperativeKernel.
  bool dependent;
  cudaStream_t stream;
};

// Routing in the launch: whether the kernel of `kind` can route a batch of `tokens` tokens of
// `width` id columns over `experts` experts in `groups` groups (its candidates in registers, the
// batch's ids and each warp's scratch in the ring's shared memory).
bool route_fits(Kind kind, int64_t experts, int64_t groups, int64_t width, int64_t tokens) noexcept;

// CTAs of one cooperative launch on this device (one per SM when the shared memory allows);
// 0 with `error` set when the kernel cannot be made resident.
int resident_ctas(Kind kind, const char** error) noexcept;

// nullptr on success, else what failed.
const char* launch_fused(const FusedCall& call, int ctas) noexcept;

}  // namespace moe::mega::detail
