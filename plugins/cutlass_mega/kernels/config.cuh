// cutlass_mega's fused layer (docs/design.md §13): the kernel's geometry, its parameters, and the
// warp-level instructions it is built from.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>

#include "kernels/activation.cuh"
#include "kernels/params.hpp"
#include "kernels/split.hpp"

namespace moe::mega::kernels {

constexpr int kThreads = 288;  // 8 consumer warps (16 weight rows each), 1 producer warp
constexpr int kConsumers = 256;
constexpr int kWarps = kConsumers / 32;
constexpr int kRows = 128;        // weight rows per tile
constexpr int kRowBytes = 128;    // bytes of a weight row per stage: 64 bf16 or 128 e4m3
constexpr int kBoxRows = 64;      // weight rows per TMA box
constexpr int kMaxSlots = 4096;   // T * slot_width (routed and virtual slots) the schedule holds
constexpr int kMaxExperts = 512;  // 2 per thread in the block scans
constexpr int kMaxVirtual = 32;   // sink and shared experts' virtual experts (slot columns)
constexpr int kScaleBlock = 128;  // fp8_block: channels per scale, along K and along rows
constexpr int kMaxKBlocks = 120;  // fp8_block: scale blocks along K an item keeps in shared memory
// fp8_block's Params::prefetch_late bits.
constexpr int32_t kLatePhase0 = 1, kLatePhase1b = 2;

// fp8_block with own_rows (Params): the largest batch, as tokens x hidden values, each CTA
// quantises itself. By default 2048 (Qwen3-30B-A3B's one token: 0.93x the grid's time, H100,
// where Mixtral's one token, 4096 values, measured 1.01x and DeepSeek-V3's 7168 1.05x);
// MOE_MEGA_FP8_OWN_ROWS=1 at prepare raises it to 16384 (Qwen3 8 tokens: 1.15x), a measurement.
constexpr int64_t kOwnRowsDefaultElems = 2048;
constexpr int64_t kOwnRowsElems = 16384;

// The weight formats the kernel is instantiated for. kFp8F16W (fp8_block's one-tile stage, the
// default where H or I is not a multiple of 256; MOE_MEGA_FP8_STAGE=128 elsewhere): activations
// kept as the f16 values of their e4m3 codes (exact), so each warp converts only its weight
// fragments and multiplies in f16 (kFp8W, MOE_MEGA_FP8_TOKENS=e4m3 at prepare: the e4m3 mma.sync
// converts both operands in every warp). kMxfp4x2W, kNvfp4x2W (the 4-bit default where H and I
// allow): two prepared chunks a stage (256 K, 17-18 KB by one bulk copy: an item's chunks are
// adjacent) and 4 ring stages, since a 4-bit stage's time at decode is per stage, not per byte
// (bench/NOTES.md, session 41); one chunk a stage: MOE_MEGA_FP4_STAGE=128.
enum WeightKind : int {
  kBf16W = 0,
  kFp8W = 1,
  kMxfp4W = 2,
  kNvfp4W = 3,
  kFp8F16W = 4,
  kMxfp4x2W = 5,
  kNvfp4x2W = 6,
  kMxfp4x4W = 7,  // four chunks a stage (512 K, 35-36 KB), 2 stages: batches of at least 8 slots
  kNvfp4x4W = 8,  // an expert or 64 tokens (the layer picks per batch; src/mega_layer.hpp)
  // bf16's default where H and I allow: two prepared 16 KB chunks a stage (128 K, 32 KB by one
  // bulk copy; the chunks of kernels/chunk_layout.hpp, adjacent), 3 stages (0.89-1.0x the time
  // of kBf16W's TMA tiles; bench/NOTES.md, session 42).
  kBf16x2W = 9,
  // fp8_block with f16 tokens, two 16 KB e4m3 tiles a stage (256 K: two scale blocks, each
  // promoted as a one-tile stage's; four TMA boxes, or with MOE_MEGA_CHUNKS=1 two adjacent
  // prepared chunks by one bulk copy), 32-slot items and 3 stages (96 KB of weights in flight
  // where kFp8F16W keeps 64): fp8_block's default where H and I are multiples of 256 in sessions
  // 44-46 (0.87-1.0x kFp8F16W's time; bench/NOTES.md, session 44), MOE_MEGA_FP8_WGMMA=0 since.
  kFp8F16x2W = 10,
  // fp8_block on e4m3 codes multiplied by wgmma (MOE_MEGA_FP8_WGMMA=1 at prepare, a measurement):
  // one 16 KB e4m3 tile a stage, each consumer warpgroup's 64 rows of it times the item's token
  // rows (e4m3, 128-byte swizzled, K-major: the B operand as TMA would lay it) by m64nNk32 wgmma
  // from shared memory, N = 8, 16 or 32 by the item's slots, one 128-deep block a stage promoted
  // with both scales as the other instances do; no conversions, no token loads to registers, no
  // mma.sync issue per n-tile (deepgemm_style's decode kernel's consumer, in the fused layer).
  // 32-slot items, 8 stages (128 KB of weights in flight).
  kFp8WgW = 11,
  // 4-bit weights by wgmma (MOE_MEGA_FP4_WGMMA=1 at prepare, a measurement): the two-chunk stage
  // of kMxfp4x2W / kNvfp4x2W (the same prepared chunks, 4 stages, 32-slot items) with each warp's
  // dequantised A fragments (kernels/fp4_fragments.cuh: mma.sync's m16n8k16 A layout, which is
  // wgmma's register A layout for the warp's 16 rows of its warpgroup's 64) fed to m64nNk16 bf16
  // wgmma whose B is the stage's token rows in shared memory (128-byte swizzled, K-major, as the
  // producer copies them), N = 8, 16 or 32: the token loads into registers and the per-n-tile
  // mma.sync issue go; the dequantisation stays.
  kMxfp4WgW = 12,
  kNvfp4WgW = 13,
  // kFp8WgW with two 16 KB e4m3 tiles a stage (fp8_block's default where H and I are multiples
  // of 256: 0.963-0.994x kFp8F16x2W's time; bench/NOTES.md, session 46): each tile its own scale
  // block, promoted after its four wgmma; 4 stages of 40 KB (the same 128 KB of weights in
  // flight), half the barrier round trips a byte.
  kFp8Wg2W = 14
};
template <int W>
constexpr bool kIsBf16 = W == kBf16W || W == kBf16x2W;
template <int W>
constexpr bool kIsNv = W == kNvfp4W || W == kNvfp4x2W || W == kNvfp4x4W || W == kNvfp4WgW;
template <int W>
constexpr bool kIsMx = W == kMxfp4W || W == kMxfp4x2W || W == kMxfp4x4W || W == kMxfp4WgW;
template <int W>
constexpr bool kIsFp4 = kIsNv<W> || kIsMx<W>;
template <int W>  // chunks a ring stage holds (4-bit: 128 K each; bf16: 64 K each; e4m3: 128 K)
constexpr int kChunksPerStage =
    W == kMxfp4x4W || W == kNvfp4x4W ? 4
    : W == kMxfp4x2W || W == kNvfp4x2W || W == kBf16x2W || W == kFp8F16x2W || W == kMxfp4WgW ||
            W == kNvfp4WgW || W == kFp8Wg2W
        ? 2
        : 1;
// Instances that read prepared chunks only (no tensor maps): 4-bit, and bf16 two chunks a stage
// (e4m3 two chunks a stage read either: four TMA boxes, or MOE_MEGA_CHUNKS=1's chunks).
template <int W>
constexpr bool kChunksOnly = kIsFp4<W> || W == kBf16x2W;
template <int W>
constexpr bool kIsFp8 =
    W == kFp8W || W == kFp8F16W || W == kFp8F16x2W || W == kFp8WgW || W == kFp8Wg2W;
template <int W>  // by wgmma (fp8_block, 4-bit): the token rows are its B (128-byte swizzle,
                  // K-major)
constexpr bool kWgmmaTokens = W == kFp8WgW || W == kFp8Wg2W || W == kMxfp4WgW || W == kNvfp4WgW;
template <int W>  // fp8_block whose activation codes are kept as their f16 values
constexpr bool kF16Tokens = W == kFp8F16W || W == kFp8F16x2W;

// e4m3 activations on 4-bit weights (Params::act_quant; docs/design.md §13 item 7), quantised
// inside the launch by the problem's input_format: none (bf16); mxfp8 (per token per 32 channels,
// ue8m0 scales: the quantised values are bf16 values, so GEMMs run on them as they are); e4m3 per
// tensor with the static scales a13 and a2, or with scales from the batch's amax (the codes'
// values in bf16, exact, and the scale multiplied in each GEMM's epilogue).
enum ActQuant : int { kActBf16 = 0, kActMxfp8 = 1, kActFp8Static = 2, kActFp8Dynamic = 3 };
constexpr int kMxBlock = 32;  // mxfp8: channels per scale

// Token columns per tile (an item's slots; 8 per mma n-tile) and the ring's stages. A 128-K fp4
// stage carries 9 KB of weights beside a token tile of bf16 rows twice as wide, so fp4 trades
// token columns for stages: 32 columns and 9 stages keep ~78 KB of weights in flight per SM, as
// bf16's 5 stages of 16 KB do (Little's law at the stream's loaded latency; bench/NOTES.md).
template <int W>
constexpr int kTok = kIsFp4<W> || W == kFp8F16x2W || W == kFp8WgW || W == kFp8Wg2W ? 32 : 64;
template <int W>  // f16 tokens, double 4-bit chunks: 4 stages (their token rows are twice as wide)
constexpr int kStages =
    kChunksPerStage<W> == 4                                                                 ? 2
    : W == kFp8WgW                                                                          ? 8
    : W == kBf16x2W || W == kFp8F16x2W                                                      ? 3
    : W == kFp8Wg2W                                                                         ? 4
    : W == kFp8F16W || W == kMxfp4x2W || W == kNvfp4x2W || W == kMxfp4WgW || W == kNvfp4WgW ? 4
    : kIsFp4<W>                                                                             ? 9
                                                                                            : 5;
template <int W>
constexpr int kTileLd = kTok<W> + 1;

// Elements of K per stage: a 128-byte weight row of bf16 (64) or e4m3 (128, one fp8 block), or
// 128 fp4 elements (64 bytes a row, prepared chunks: moe_cuda/fp4_chunks.hpp), per chunk.
template <int W>
constexpr int kStageK = (kIsBf16<W> ? kRowBytes / 2 : kRowBytes) * kChunksPerStage<W>;
// A token row's bytes per stage (bf16, f16 or e4m3 activations for kStageK elements) and its
// stride in the token tile (16 bytes of padding: ldmatrix without bank conflicts; f16 tokens are
// read 8 bytes a lane, 32 bytes of padding: the 8 rows of a load fall on distinct banks by 4s).
template <int W>
constexpr int kTokRowBytes =
    W == kFp8W || W == kFp8WgW || W == kFp8Wg2W ? kStageK<W> : 2 * kStageK<W>;  // e4m3: a byte
template <int W>  // (wgmma's token rows: 128 bytes, swizzled instead of padded)
constexpr int kTokLd = kTokRowBytes<W> + (kWgmmaTokens<W> ? 0
                                          : kF16Tokens<W> ? 32
                                                          : 16);
// fp4: a stage's chunk is 128 rows x 64 code bytes, then 4 (mx) or 8 (nv) scale bytes a row.
constexpr int kFp4CodeBytes = kRows * kStageK<kMxfp4W> / 2;
template <int W>
constexpr int kFp4ChunkBytes = kFp4CodeBytes + kRows*(kIsMx<W> ? 4 : 8);

// Shared memory (bytes), in this order: the ring (1024-byte aligned stages: the weight tile is
// 128-byte swizzled), the tile, the schedule, the barriers. fp8_block keeps an item's scales in
// the tile's space during its main loop (the tile is used only after it).
template <int W>
constexpr size_t kWeightBytes =
    (kIsFp4<W> ? size_t(9 * 1024) : size_t(kRows) * kRowBytes) * kChunksPerStage<W>;
// A stage's prepared bytes (one bulk copy): fp4's chunks of codes and scales, or a bf16 / e4m3
// stage's whole tile.
template <int W>
constexpr int kChunkBytesOf = kIsFp4<W> ? kFp4ChunkBytes<W>* kChunksPerStage<W>
                                        : int(kWeightBytes<W>);
template <int W>  // 1024-byte aligned: bf16 and e4m3 25 x 1024, fp4 18 x 1024, bf16 x2 49 x 1024,
                  // e4m3 by wgmma 20 x 1024 (32 token rows of 128 bytes, unpadded), fp4 by
                  // wgmma 34 x 1024 (two chunks, 32 token rows of 512 bytes, unpadded), two e4m3
                  // tiles by wgmma 40 x 1024 (32 token rows of 256 bytes, unpadded)
constexpr size_t kStageBytes = (kWeightBytes<W> + size_t(kTok<W>) * kTokLd<W> + 1023) / 1024 * 1024;
template <int W>
constexpr size_t kRingBytes = kStages<W>* kStageBytes<W>;
static_assert(kChunkBytesOf<kNvfp4W> <= kWeightBytes<kNvfp4W> &&
                  kChunkBytesOf<kMxfp4x2W> <= kWeightBytes<kMxfp4x2W> &&
                  kChunkBytesOf<kNvfp4x2W> <= kWeightBytes<kNvfp4x2W> &&
                  kChunkBytesOf<kNvfp4x4W> <= kWeightBytes<kNvfp4x4W> &&
                  kChunkBytesOf<kMxfp4WgW> <= kWeightBytes<kMxfp4WgW> &&
                  kChunkBytesOf<kNvfp4WgW> <= kWeightBytes<kNvfp4WgW>,
              "a stage's chunks fit it");
template <int W>
constexpr size_t kTileBytes = size_t(kRows) * kTileLd<W> * 4;
static_assert(size_t(kMaxKBlocks) * (kTok<kFp8W> + 2) * 4 <= kTileBytes<kFp8W> &&
                  size_t(kMaxKBlocks) * (kTok<kFp8F16W> + 2) * 4 <= kTileBytes<kFp8F16W> &&
                  size_t(kMaxKBlocks) * (kTok<kFp8F16x2W> + 2) * 4 <= kTileBytes<kFp8F16x2W> &&
                  size_t(kMaxKBlocks) * (kTok<kFp8WgW> + 2) * 4 <= kTileBytes<kFp8WgW> &&
                  size_t(kMaxKBlocks) * (kTok<kFp8Wg2W> + 2) * 4 <= kTileBytes<kFp8Wg2W>,
              "scales fit the tile");
constexpr size_t kScheduleBytes = kMaxSlots * (2 + 2)  // slot token, slot position (int16)
                                  + (kWarps + 4) * kMaxExperts * 4 + 16;  // per-warp counts, tables
template <int W>
constexpr size_t kBarrierBytes = 2 * kStages<W> * 8;
template <int W>
constexpr size_t kSmemBytes =
    1024 + kRingBytes<W> + kTileBytes<W> + kScheduleBytes + kBarrierBytes<W>;
// sm_90's opt-in limit of shared memory per block (227 KB), the kernel's static storage (the
// schedule's 64-bit block scan, 2.3 KB) included: checked in kernels/fused_moe.cuh.
constexpr size_t kSmemLimit = 227 * 1024;

// Routing inside the launch (Params::route): every CTA routes the whole batch, a token a warp, its
// candidates in registers (common_cuda's route_token<kRouteSlots>: E <= 32 x kRouteSlots), into
// the ring's shared memory before anything streams into it: the batch's ids [T, width] i32 from
// byte 0, then each warp's RouteSmem from kRouteScratchAt(T, width) (16-byte aligned). One slot
// count for every layer: copies with 1 and 4 slots for up to 32 and 128 experts gained nothing
// measurable (H100 session 53: 0.993-1.006 at T = 1 and 8) and cost two more copies a kernel.
constexpr int kRouteSlots = 8;
constexpr int kRouteMaxExperts = 32 * kRouteSlots;
constexpr size_t kRouteScratchAt(int64_t tokens, int64_t width) {
  return (size_t(tokens * width) * 4 + 15) / 16 * 16;
}

struct Params {
  CUtensorMap w13_map;     // w13 as [E * n1, H], 64-row x 128-byte boxes, 128-byte swizzle
  CUtensorMap w2_map;      // w2 as [E * H, I], the same boxes
  const uint16_t* hidden;  // [T, H] bf16
  const int32_t* ids;      // [T, W] global expert ids, -1 (or out of range) = no expert
  const float* weights;    // [T, W]
  // Routing in the launch (ABI 1.6's routing in the run call; route.logits null: the ids and
  // weights above are the caller's): route.ids and route.weights are ids and weights, written by
  // CTA 0 (the combine reads the weights after the grid barriers); route.warp_smem_bytes is one
  // warp's RouteSmem.
  gpu::kernels::RouteParams route;
  uint16_t* out;       // [T, H] bf16
  int32_t accumulate;  // 1: out += the layer's result (ABI 1.4), rounded once
  float* y;  // workspace [max_split2][T * W, H] f32: GEMM2's row per slot and K part, in schedule
             // order
  // bf16 and fp4 weights: the intermediate in bf16, a row per slot in schedule order.
  uint16_t* inter;  // workspace [T * slot_width, I]
  // The prepared chunks, [E][slices][K stages]: mxfp4 and nvfp4 always (moe_cuda/fp4_chunks.hpp);
  // bf16 and e4m3 with MOE_MEGA_CHUNKS=1 (kernels/chunk_layout.hpp), else null (the TMA maps).
  const uint8_t* w13_chunks;
  const uint8_t* w2_chunks;
  const float* g13;  // nvfp4: [E] scale_2 of w13, of w2
  const float* g2;
  const float* b13;  // expert biases, f32: [E, n1] added before the activation, [E, H] to each
  const float* b2;   // slot's GEMM2 result; nullptr without

  // fp8_block weights (e4m3, fp8_1x128 activations): the block scales and the quantised rows.
  const float* s13;  // [E, n1 / 128, H / 128]
  const float* s2;   // [E, H / 128, I / 128]
  uint8_t* xq;       // workspace [T, H] e4m3 (or f16 values): the hidden states quantised
  float* xs;         // workspace [T, H / 128] (with own_rows: a [T, H] and [T, H / 128] per CTA)
  // 1 for batches of T x H <= kOwnRowsDefaultElems (kOwnRowsElems with MOE_MEGA_FP8_OWN_ROWS=1
  // at prepare; never with =0): each CTA quantises the whole batch's hidden states into its own
  // copy, xq + the CTA's index x T x H codes and xs + that x H / 128 scales, so GEMM1 waits on no
  // grid barrier.
  int32_t own_rows;
  // fp8_block, MOE_MEGA_FP8_PREFETCH at prepare (a measurement; bits): kLatePhase0 (late0), the
  // producer issues its prefetch of GEMM1's first stages after phase 0's quantisation instead of
  // before it, so the hidden states' loads do not queue behind ~100 KB of weights an SM (Mixtral
  // T = 8 on an H100: GEMM1 starts 9 us after the schedule, bench/NOTES.md session 45);
  // kLatePhase1b (late1), GEMM2's prefetch after phase 1b's quantisation of the intermediate
  // instead of before its first barrier (Mixtral T = 64: 16.8 us between GEMM1 and GEMM2);
  // late: both.
  int32_t prefetch_late;
  float* inter32;  // workspace [T * slot_width, I] f32: the intermediate before quantisation
  uint8_t* iq;     // workspace [T * slot_width, I] e4m3
  float* is;       // workspace [T * W, I / 128]
  // width: the ids' columns (top_k routed, then the sinks'); slot_width: a token's slots (top_k,
  // then one per virtual expert, src/virtual_experts.hpp); routed: ids in [0, routed) are routed
  // experts; experts: routed and virtual (the weight stacks' experts).
  int32_t tokens, width, slot_width, top_k, routed, experts, hidden_dim, inter_dim, n1;
  // Slot column top_k + c: the ids column it reads (-1: none, weight 1), its virtual expert, and
  // the id that column must hold for it to run.
  int16_t col_src[kMaxVirtual], col_expert[kMaxVirtual], col_match[kMaxVirtual];
  int32_t max_split2;  // GEMM2 K parts the workspace holds (k_split chooses up to this many)
  // GEMM2's split: 2 (the default) k_split_waves within one wave too, 1 past one wave only
  // (MOE_MEGA_SPLIT2=waves), 0 k_split alone (=fit; measurements)
  int32_t split2_waves;
  // MOE_MEGA_GEMM2=early (a measurement; bf16 and 4-bit weights on bf16 activations, else null):
  // no grid barrier between GEMM1 and GEMM2. Word u of this workspace is GEMM1 item u's flag (item
  // = the schedule's chunk c, an expert's kTok slots, x slices1 + slice): the item stores the run's
  // tag there once its intermediate rows are written, and a GEMM2 item of chunk c starts once
  // flags [c x slices1, (c + 1) x slices1) hold the tag. GEMM2's items continue GEMM1's round robin
  // (item v on the CTA that item items1 + v would have had), so CTAs idle in GEMM1's last wave
  // start GEMM2 on the chunks finished earlier. The tag mixes the launch's %gridid with run_salt
  // (kernels/gemm2_ready.cuh): no flag an earlier launch left equals it, so nothing is zeroed.
  unsigned long long* gemm2_ready;
  unsigned long long run_salt;
  // 4-bit weights with e4m3 activations (ActQuant; 0 otherwise): the static scales (a13 for the
  // hidden states, a2 for the intermediate), and the workspace: xa [T, H] bf16, the hidden states
  // quantised (mxfp8: their values; e4m3 per tensor: their codes' values); with kActFp8Dynamic,
  // the intermediate in f32 before its quantisation (inter32) and amax [3][gridDim.x], each CTA's
  // of the hidden states, of the routed experts' intermediate and of the shared expert's.
  int32_t act_quant;
  float a13_scale, a2_scale;
  uint16_t* xa;
  float* amax;
  int32_t activation;
  gpu::kernels::ActivationParams act;  // limit, alpha, gelu_tanh
  // Measurement (kernels/timeline.hpp): [gridDim.x] records of timeline_items items; null: off.
  unsigned long long* timeline;
  int32_t timeline_items;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// D += A (16 rows x 32 bytes of K, row) * B (32 bytes of K x 8, col), f32 accumulate: bf16
// m16n8k16 or e4m3 m16n8k32. Both take their fragments in the same byte layout, so one ldmatrix
// sequence feeds either.
template <bool kFp8>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (kFp8) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// D += A (16 rows x 16 K, row) * B (16 K x 8, col), f16 operands, f32 accumulate.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two e4m3 codes (the low 16 bits; the lower byte first) as their f16 values, exact (every e4m3
// value is an f16), lower into the low half.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(codes & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

// The timeline's stamp (kernels/timeline.hpp): %globaltimer (ns, one clock for all SMs) and this
// SM's clock64.
__device__ __forceinline__ void timeline_stamp(unsigned long long* at) {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  at[0] = ns;
  at[1] = static_cast<unsigned long long>(clock64());
}

__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<const uint16_t*>(&h);
}

}  // namespace moe::mega::kernels
