// Launcher of the fused layer (kernels/fused_moe.cuh): shared-memory opt-in, residency, one
// cooperative launch on the caller's stream.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>

#include "../kernels/chunk_layout.hpp"
#include "../kernels/fused_moe.cuh"
#include "fused_launch.hpp"
#include "kernels/dependent_launch.cuh"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/tensor_map.hpp"

namespace moe::mega::detail {
namespace {

// MOE_MEGA_GEMM2=early's salt of the flags' tags (kernels/gemm2_ready.cuh), random once per load
// of this plugin; where the system has no random device, the clock and an address instead.
unsigned long long run_salt() noexcept {
  static const unsigned long long salt = []() noexcept {
    try {
      std::random_device rd;
      return (static_cast<unsigned long long>(rd()) << 32) ^ rd();
    } catch (...) {
      static int here = 0;
      return static_cast<unsigned long long>(
                 std::chrono::steady_clock::now().time_since_epoch().count()) ^
             reinterpret_cast<uintptr_t>(&here);
    }
  }();
  return salt;
}

// [rows, cols] row-major, read as 64-row x 128-byte boxes.
bool encode(CUtensorMap* map, int elem_bytes, const void* base, int64_t rows, int64_t cols) {
  const CUtensorMapDataType dtype =
      elem_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return gpu::encode_tensor_map_2d(map, dtype, base, rows, cols, elem_bytes, kernels::kBoxRows,
                                   kernels::kRowBytes / elem_bytes);
}

// f(std::integral_constant<int, W>{}) for the kernel instance W of a weight kind: the one switch
// from the host's Kind to the kernel's WeightKind.
template <class F>
auto with_instance(Kind kind, F&& f) {
  switch (kind) {
    case Kind::kFp8Block:
      return f(std::integral_constant<int, kernels::kFp8W>{});
    case Kind::kFp8BlockF16:
      return f(std::integral_constant<int, kernels::kFp8F16W>{});
    case Kind::kMxfp4:
      return f(std::integral_constant<int, kernels::kMxfp4W>{});
    case Kind::kNvfp4:
      return f(std::integral_constant<int, kernels::kNvfp4W>{});
    case Kind::kMxfp4x2:
      return f(std::integral_constant<int, kernels::kMxfp4x2W>{});
    case Kind::kNvfp4x2:
      return f(std::integral_constant<int, kernels::kNvfp4x2W>{});
    case Kind::kMxfp4x4:
      return f(std::integral_constant<int, kernels::kMxfp4x4W>{});
    case Kind::kNvfp4x4:
      return f(std::integral_constant<int, kernels::kNvfp4x4W>{});
    case Kind::kBf16x2:
      return f(std::integral_constant<int, kernels::kBf16x2W>{});
    case Kind::kFp8BlockF16x2:
      return f(std::integral_constant<int, kernels::kFp8F16x2W>{});
    case Kind::kFp8BlockWgmma:
      return f(std::integral_constant<int, kernels::kFp8WgW>{});
    case Kind::kMxfp4Wgmma:
      return f(std::integral_constant<int, kernels::kMxfp4WgW>{});
    case Kind::kNvfp4Wgmma:
      return f(std::integral_constant<int, kernels::kNvfp4WgW>{});
    case Kind::kFp8BlockWgmma2:
      return f(std::integral_constant<int, kernels::kFp8Wg2W>{});
    default:
      return f(std::integral_constant<int, kernels::kBf16W>{});
  }
}

// The kernel instance of a weight kind and the dynamic shared memory it needs.
struct Instance {
  const void* fn;
  size_t smem;
};
Instance instance(Kind kind) {
  return with_instance(kind, [](auto w) {
    constexpr int W = decltype(w)::value;
    return Instance{reinterpret_cast<const void*>(kernels::fused_moe<W>), kernels::kSmemBytes<W>};
  });
}

static_assert(int(ActQuant::kBf16) == kernels::kActBf16 &&
              int(ActQuant::kMxfp8) == kernels::kActMxfp8 &&
              int(ActQuant::kFp8Static) == kernels::kActFp8Static &&
              int(ActQuant::kFp8Dynamic) == kernels::kActFp8Dynamic);

// The host's packer and the kernel agree on the chunk geometry.
static_assert(gpu::kFp4CodeBytes == kernels::kFp4CodeBytes);
static_assert(gpu::fp4_chunk_bytes(gpu::Fp4Scales::kMx) ==
              kernels::kFp4ChunkBytes<kernels::kMxfp4W>);
static_assert(gpu::fp4_chunk_bytes(gpu::Fp4Scales::kNv) ==
              kernels::kFp4ChunkBytes<kernels::kNvfp4W>);
static_assert(kernels::kTok<kernels::kFp8W> == kernels::kTok<kernels::kBf16W> &&
              kernels::kTok<kernels::kFp8F16W> == kernels::kTok<kernels::kBf16W> &&
              kernels::kTok<kernels::kNvfp4W> == kernels::kTok<kernels::kMxfp4W> &&
              kernels::kTok<kernels::kMxfp4x2W> == kernels::kTok<kernels::kMxfp4W>);
// Two chunks a stage: the host's chunk, twice, by one bulk copy.
static_assert(kernels::kFp4ChunkBytes<kernels::kMxfp4x2W> ==
                  gpu::fp4_chunk_bytes(gpu::Fp4Scales::kMx) &&
              kernels::kChunkBytesOf<kernels::kMxfp4x2W> ==
                  2 * kernels::kFp4ChunkBytes<kernels::kMxfp4W>);
// The wgmma 4-bit stages read the two-chunk stages' prepared chunks.
static_assert(kernels::kChunkBytesOf<kernels::kMxfp4WgW> ==
                  kernels::kChunkBytesOf<kernels::kMxfp4x2W> &&
              kernels::kChunkBytesOf<kernels::kNvfp4WgW> ==
                  kernels::kChunkBytesOf<kernels::kNvfp4x2W> &&
              kernels::kStageK<kernels::kMxfp4WgW> == kernels::kStageK<kernels::kMxfp4x2W>);
static_assert(gpu::kFp4StageK == kernels::kStageK<kernels::kMxfp4W> &&
              gpu::kFp4TileRows == kernels::kRows);
// bf16 and e4m3 chunks are a stage's weight tile as the two TMA boxes lay it out.
static_assert(kernels::kChunkBytesOf<kernels::kBf16W> == kernels::kChunkBytes &&
              kernels::kChunkBytesOf<kernels::kFp8W> == kernels::kChunkBytes &&
              kernels::kChunkBytesOf<kernels::kFp8F16W> == kernels::kChunkBytes &&
              kernels::kChunkBytesOf<kernels::kFp8WgW> == kernels::kChunkBytes &&
              kernels::kChunkRows == kernels::kRows &&
              kernels::kChunkRowBytes == kernels::kRowBytes);
// Two e4m3 tiles a stage: two chunks of the layout (MOE_MEGA_CHUNKS=1), each one scale block.
static_assert(kernels::kChunkBytesOf<kernels::kFp8F16x2W> == 2 * kernels::kChunkBytes &&
              kernels::kChunkBytesOf<kernels::kFp8Wg2W> == 2 * kernels::kChunkBytes &&
              kernels::kStageK<kernels::kFp8Wg2W> == 2 * kernels::kScaleBlock &&
              kernels::kStageK<kernels::kFp8F16x2W> == 2 * kernels::kScaleBlock);
// Two bf16 chunks a stage: two adjacent chunks of the layout (a K stage of 128 elements is chunks
// 2k and 2k + 1 of the item), by one bulk copy; tokens as wide.
static_assert(kernels::kChunkBytesOf<kernels::kBf16x2W> == 2 * kernels::kChunkBytes &&
              kernels::kStageK<kernels::kBf16x2W> == 2 * kernels::kStageK<kernels::kBf16W> &&
              kernels::kTok<kernels::kBf16x2W> == kernels::kTok<kernels::kBf16W>);

}  // namespace

const char* encode_weight_maps(WeightMaps* maps, int elem_bytes, const void* w13, int64_t rows13,
                               int64_t hidden, const void* w2, int64_t rows2,
                               int64_t inter) noexcept {
  static_assert(sizeof(CUtensorMap) == sizeof(maps->w13));
  CUtensorMap a, b;
  if (!encode(&a, elem_bytes, w13, rows13, hidden) || !encode(&b, elem_bytes, w2, rows2, inter))
    return "cuTensorMapEncodeTiled failed (or the driver lacks it)";
  std::memcpy(maps->w13, &a, sizeof(a));
  std::memcpy(maps->w2, &b, sizeof(b));
  return nullptr;
}

// A Kind's value is its instance's WeightKind (the timeline's "instance").
static_assert(
    int(Kind::kBf16) == kernels::kBf16W && int(Kind::kFp8Block) == kernels::kFp8W &&
    int(Kind::kMxfp4) == kernels::kMxfp4W && int(Kind::kNvfp4) == kernels::kNvfp4W &&
    int(Kind::kFp8BlockF16) == kernels::kFp8F16W && int(Kind::kMxfp4x2) == kernels::kMxfp4x2W &&
    int(Kind::kNvfp4x2) == kernels::kNvfp4x2W && int(Kind::kMxfp4x4) == kernels::kMxfp4x4W &&
    int(Kind::kNvfp4x4) == kernels::kNvfp4x4W && int(Kind::kBf16x2) == kernels::kBf16x2W &&
    int(Kind::kFp8BlockF16x2) == kernels::kFp8F16x2W &&
    int(Kind::kFp8BlockWgmma) == kernels::kFp8WgW && int(Kind::kMxfp4Wgmma) == kernels::kMxfp4WgW &&
    int(Kind::kNvfp4Wgmma) == kernels::kNvfp4WgW &&
    int(Kind::kFp8BlockWgmma2) == kernels::kFp8Wg2W);

static_assert(kLatePhase0Bit == kernels::kLatePhase0 && kLatePhase1bBit == kernels::kLatePhase1b,
              "the prefetch bits the host sets are the kernel's");

KernelLimits kernel_limits(Kind kind) {
  using namespace kernels;
  const int tok = with_instance(kind, [](auto w) { return kTok<decltype(w)::value>; });
  return {kMaxSlots,   kMaxExperts,        tok,
          kRows,       kScaleBlock,        kMaxKBlocks,
          kMaxVirtual, int(kOwnRowsElems), int(kOwnRowsDefaultElems)};
}

StageGeometry stage_geometry(Kind kind) {
  return with_instance(kind, [](auto w) {
    constexpr int W = decltype(w)::value;  // a stage: its K and its prepared bytes
    return StageGeometry{kernels::kStageK<W>, kernels::kChunkBytesOf<W>};
  });
}

bool route_fits(Kind kind, int64_t experts, int64_t groups, int64_t width,
                int64_t tokens) noexcept {
  using namespace kernels;
  if (experts < 1 || experts > kRouteMaxExperts || groups < 1 || groups > experts || width < 1 ||
      width > gpu::kernels::kWarpSize || tokens < 0)  // a lane per id column
    return false;
  const size_t bytes =
      kRouteScratchAt(tokens, width) +
      size_t(kThreads / 32) * size_t(gpu::kernels::RouteSmem::bytes(int(experts), int(groups)));
  const size_t ring = with_instance(kind, [](auto w) { return kRingBytes<decltype(w)::value>; });
  return bytes <= ring;
}

int resident_ctas(Kind kind, const char** error) noexcept {
  const Instance k = instance(kind);
  const void* f = k.fn;
  if (cudaError_t e =
          cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(k.smem));
      e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  int device = 0, sms = 0, per_sm = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  if (cudaError_t e =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, kernels::kThreads, k.smem);
      e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  if (per_sm < 1) return *error = "the kernel's shared memory does not fit one SM", 0;
  return sms;  // one CTA per SM: each streams its own weight tiles
}

const char* launch_fused(const FusedCall& c, int ctas) noexcept {
  kernels::Params p{};
  std::memcpy(&p.w13_map, c.maps->w13, sizeof(p.w13_map));
  std::memcpy(&p.w2_map, c.maps->w2, sizeof(p.w2_map));
  p.hidden = c.hidden;
  p.ids = c.ids;
  p.weights = c.weights;
  p.route = c.route;
  if (p.route.logits != nullptr) {
    if (!route_fits(c.kind, p.route.experts, p.route.num_groups, c.width, c.tokens) ||
        p.route.top_k + p.route.sinks != c.width || p.route.tokens != c.tokens)
      return "the batch's routing does not fit the kernel's shared memory (route_fits)";
    p.route.warps_per_block = kernels::kThreads / 32;
    p.route.warp_smem_bytes = gpu::kernels::RouteSmem::bytes(p.route.experts, p.route.num_groups);
  }
  p.out = c.out;
  p.accumulate = c.accumulate ? 1 : 0;
  p.y = c.y;
  p.inter = c.inter;
  p.w13_chunks = c.w13_chunks;
  p.w2_chunks = c.w2_chunks;
  p.g13 = c.g13;
  p.g2 = c.g2;
  p.b13 = c.b13;
  p.b2 = c.b2;
  p.s13 = c.s13;
  p.s2 = c.s2;
  p.xq = c.xq;
  p.xs = c.xs;
  p.own_rows = c.own_rows;
  p.prefetch_late = c.prefetch_late;
  p.inter32 = c.inter32;
  p.iq = c.iq;
  p.is = c.is;
  p.tokens = c.tokens;
  p.width = c.width;
  p.slot_width = c.slot_width;
  p.routed = c.routed;
  p.top_k = c.top_k;
  static_assert(sizeof(c.col_src) == sizeof(p.col_src), "slot column tables agree");
  std::memcpy(p.col_src, c.col_src, sizeof(p.col_src));
  std::memcpy(p.col_expert, c.col_expert, sizeof(p.col_expert));
  std::memcpy(p.col_match, c.col_match, sizeof(p.col_match));
  p.experts = c.experts;
  p.hidden_dim = c.hidden_dim;
  p.inter_dim = c.inter_dim;
  p.n1 = c.n1;
  p.max_split2 = c.max_split2;
  p.split2_waves = c.split2_waves;
  p.gemm2_ready = c.gemm2_ready;
  p.run_salt = c.gemm2_ready != nullptr ? run_salt() : 0;
  p.activation = c.activation;
  p.act_quant = int32_t(c.act_quant);
  p.a13_scale = c.a13_scale;
  p.a2_scale = c.a2_scale;
  p.xa = c.xa;
  p.amax = c.amax;
  p.act.limit = c.limit;
  p.act.alpha = c.alpha;
  p.act.gelu_tanh = c.gelu_tanh;
  p.timeline = c.timeline;
  p.timeline_items = c.timeline_items;
  void* args[] = {&p};
  const Instance k = instance(c.kind);
  if (!c.dependent) {
    const cudaError_t e = cudaLaunchCooperativeKernel(k.fn, dim3(ctas), dim3(kernels::kThreads),
                                                      args, k.smem, c.stream);
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
  }
  // The kernel's first statement waits for the previous kernel (kernels/fused_moe.cuh), so it may
  // be launched before that one ends.
  cudaLaunchAttribute attrs[2] = {{}, gpu::kernels::dependent_launch_attribute()};
  attrs[0].id = cudaLaunchAttributeCooperative;
  attrs[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(kernels::kThreads);
  cfg.dynamicSmemBytes = k.smem;
  cfg.stream = c.stream;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  const cudaError_t e = cudaLaunchKernelExC(&cfg, k.fn, args);
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace moe::mega::detail
