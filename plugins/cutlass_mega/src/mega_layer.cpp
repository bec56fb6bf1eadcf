#include "mega_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "chunk_layout.hpp"
#include "fused_launch.hpp"
#include "moe/sdk/bias_values.hpp"
#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe_cuda/device.hpp"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/routing.hpp"
#include "moe_cuda/workspace.hpp"
#include "switches.hpp"
#include "virtual_experts.hpp"

namespace moe::mega {
namespace {

bool gated(const moe_problem& p) {
  return is_gated(static_cast<moe_activation>(p.activation));
}

// The kernel instance of a supported problem's format.
detail::Kind kind_of(const moe_problem& p) {
  return p.format == MOE_FORMAT_FP8_BLOCK ? detail::Kind::kFp8Block
         : p.format == MOE_FORMAT_MXFP4   ? detail::Kind::kMxfp4
         : p.format == MOE_FORMAT_NVFP4   ? detail::Kind::kNvfp4
                                          : detail::Kind::kBf16;
}

// The kernel's quantisation of e4m3 activations on 4-bit weights (kernels/config.cuh ActQuant),
// 0 for any other input format.
detail::ActQuant act_quant_of(const moe_problem& p) {
  switch (p.input_format) {
    case MOE_INPUT_MXFP8:
      return detail::ActQuant::kMxfp8;
    case MOE_INPUT_FP8_TENSOR_STATIC:
      return detail::ActQuant::kFp8Static;
    case MOE_INPUT_FP8_TENSOR_DYNAMIC:
      return detail::ActQuant::kFp8Dynamic;
    default:
      return detail::ActQuant::kBf16;
  }
}

// Whether both GEMMs' K (H and I) hold whole stages of `k` elements: the stage rules' one test.
bool whole_stages(const moe_problem& p, int64_t k) {
  return p.hidden % k == 0 && p.intermediate % k == 0;
}

// Sinks are bf16 silu_mul experts. In a bf16 silu_mul layer they run as virtual experts of its one
// launch; in any other layer, apart: a second launch of the bf16 kernel over the sinks alone adds
// their sum into the first one's output (docs/design.md §13).
bool sinks_apart(const moe_problem& p) {
  return p.sink_experts > 0 &&
         (p.format != MOE_FORMAT_BF16 || p.activation != MOE_ACTIVATION_SILU_MUL);
}

// The second launch's problem: the sinks as a bf16 silu_mul layer's virtual experts (the routed
// experts, their biases and the shared expert stay with the first launch).
moe_problem sink_problem(moe_problem p) {
  p.format = MOE_FORMAT_BF16;
  p.input_format = MOE_INPUT_BF16;
  p.activation = MOE_ACTIVATION_SILU_MUL;
  p.expert_bias = 0;
  p.shared_intermediate = 0;
  return p;
}

// The first launch's problem: without the sinks where they run apart.
moe_problem without_sinks(moe_problem p) {
  if (sinks_apart(p)) p.sink_experts = 0, p.sink_intermediate = 0;
  return p;
}

// Rows of the largest batch the schedule holds.
int64_t slot_limited_tokens(const moe_problem& p) {
  return detail::kernel_limits(kind_of(p)).max_slots / std::max<int64_t>(1, slots_per_token(p));
}

// Whether `stream` is being captured into a CUDA graph (the query is legal during a capture).
bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  gpu::check_cuda(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

bool bf16_two_chunks(const moe_problem& p) {
  return p.format == MOE_FORMAT_BF16 && whole_stages(p, 128);
}

int64_t four_chunk_tokens(const moe_problem& p) {
  const bool fp4 = p.format == MOE_FORMAT_MXFP4 || p.format == MOE_FORMAT_NVFP4;
  if (!fp4 || act_quant_of(p) != detail::ActQuant::kBf16 || !whole_stages(p, 512) || p.top_k < 1)
    return 0;
  // 8 slots an expert on average, or 64 tokens where that comes first (DeepSeek-V3: 0.85-0.88x
  // two chunks' time at T = 64 and 128 with 2 and 4 slots an expert; H200, session 44)
  return std::min<int64_t>((8 * p.experts + p.top_k - 1) / p.top_k, 64);
}

bool fp8_two_tiles(const moe_problem& p) {
  return p.format == MOE_FORMAT_FP8_BLOCK && whole_stages(p, 256);
}

KindChoice choose_kinds(const moe_problem& p) {
  using detail::Kind;
  KindChoice c{kind_of(p), Kind::kBf16, 0};
  switch (p.format) {
    case MOE_FORMAT_BF16:
      // Two prepared 16 KB chunks a stage (kBf16x2W: 32 KB by one bulk copy, 3 stages) where both
      // GEMMs' K hold whole pairs: 0.89-1.0x the time of one TMA tile a stage at every point
      // measured (Qwen3-30B-A3B, Mixtral, Inkling-like, T = 1..512; H100, session 42).
      // MOE_MEGA_BF16_STAGE=64 keeps one.
      if (bf16_two_chunks(p) && !env_is("MOE_MEGA_BF16_STAGE", "64")) c.kind = Kind::kBf16x2;
      return c;
    case MOE_FORMAT_FP8_BLOCK:
      // Where both GEMMs' K hold whole pairs of 128-deep tiles (fp8_two_tiles): the e4m3 codes
      // multiplied by wgmma from shared memory, two 16 KB tiles a stage (kFp8Wg2W: 32-slot
      // items, by TMA, or as prepared chunks with MOE_MEGA_CHUNKS=1): 0.963-0.994x the time of
      // the mma.sync two-tile stage at every point measured (Mixtral, Qwen3-30B-A3B at T = 1, 8,
      // 64, two runs; H100, session 46). Elsewhere, and with MOE_MEGA_FP8_WGMMA=0: mma.sync on
      // the activation codes kept as their f16 values (kFp8F16W: 0.95-0.97x the time of e4m3
      // codes, H100, session 41), two tiles a stage where they apply (kFp8F16x2W: 0.87-1.0x one
      // tile's time, H100, session 44). Measurement switches: MOE_MEGA_FP8_STAGE=128 keeps one
      // tile by mma.sync, MOE_MEGA_FP8_TOKENS=e4m3 multiplies e4m3 codes by mma.sync, and
      // MOE_MEGA_FP8_WGMMA=1 takes wgmma with one tile a stage (=2: the default's instance where
      // two tiles apply, one tile elsewhere), whatever the other two say.
      if (env_is("MOE_MEGA_FP8_WGMMA", "1") || env_is("MOE_MEGA_FP8_WGMMA", "2"))
        c.kind = env_is("MOE_MEGA_FP8_WGMMA", "2") && fp8_two_tiles(p) ? Kind::kFp8BlockWgmma2
                                                                       : Kind::kFp8BlockWgmma;
      else if (env_is("MOE_MEGA_FP8_TOKENS", "e4m3"))
        c.kind = Kind::kFp8Block;
      else if (!fp8_two_tiles(p) || env_is("MOE_MEGA_FP8_STAGE", "128"))
        c.kind = Kind::kFp8BlockF16;
      else
        c.kind = env_is("MOE_MEGA_FP8_WGMMA", "0") ? Kind::kFp8BlockF16x2 : Kind::kFp8BlockWgmma2;
      return c;
    case MOE_FORMAT_MXFP4:
    case MOE_FORMAT_NVFP4:
      break;
    default:
      return c;
  }
  // 4-bit weights two prepared chunks a stage (kMxfp4x2W, kNvfp4x2W) where both GEMMs' K hold
  // whole pairs: mxfp4 0.71-0.91x the time of one chunk a stage (H100, session 41), nvfp4
  // 0.83-0.95x (session 42); MOE_MEGA_FP4_STAGE=128 keeps one. Four chunks a stage and 2 stages
  // (kMxfp4x4W, kNvfp4x4W; the same chunks) for batches of at least 8 slots an expert or 64
  // tokens: on Mixtral 0.76-0.92x the two-chunk time from T = 32, 0.98-1.07x below (H100, session
  // 42), on DeepSeek-V3 0.85-0.88x at T = 64 and 128, 0.99x at 256 and 512 (H200, session 44).
  // MOE_MEGA_FP4_STAGE=512 takes four at every batch and 256 two. MOE_MEGA_FP4_WGMMA=1 (a
  // measurement) takes the two-chunk stage by wgmma at every batch where two chunks apply.
  const bool nv = c.kind == Kind::kNvfp4;
  if (whole_stages(p, 256) && env_is("MOE_MEGA_FP4_WGMMA", "1")) {
    c.kind = nv ? Kind::kNvfp4Wgmma : Kind::kMxfp4Wgmma;
    return c;
  }
  if (!env_is("MOE_MEGA_FP4_STAGE", "128") && whole_stages(p, 256))
    c.kind = nv ? Kind::kNvfp4x2 : Kind::kMxfp4x2;
  const Kind four = nv ? Kind::kNvfp4x4 : Kind::kMxfp4x4;
  const int64_t four_from = four_chunk_tokens(p);
  if (whole_stages(p, 512) && env_is("MOE_MEGA_FP4_STAGE", "512")) {
    c.kind = four;
  } else if (four_from > 0 && !env_is("MOE_MEGA_FP4_STAGE", "256") &&
             !env_is("MOE_MEGA_FP4_STAGE", "128")) {
    c.large_kind = four;
    c.large_from = four_from;
  }
  return c;
}

int64_t own_rows_tokens(const moe_problem& p) {
  if (p.format != MOE_FORMAT_FP8_BLOCK || env_is("MOE_MEGA_FP8_OWN_ROWS", "0")) return 0;
  const detail::KernelLimits limits = detail::kernel_limits(kind_of(p));
  const int64_t elems =
      env_is("MOE_MEGA_FP8_OWN_ROWS", "1") ? limits.own_rows_elems : limits.own_rows_default_elems;
  return elems / std::max<int64_t>(1, p.hidden);
}

int32_t prefetch_late_bits(const moe_problem& p) {
  if (p.format != MOE_FORMAT_FP8_BLOCK) return 0;
  using detail::kLatePhase0Bit, detail::kLatePhase1bBit;
  if (env_is("MOE_MEGA_FP8_PREFETCH", "late")) return kLatePhase0Bit | kLatePhase1bBit;
  if (env_is("MOE_MEGA_FP8_PREFETCH", "late0")) return kLatePhase0Bit;
  return env_is("MOE_MEGA_FP8_PREFETCH", "late1") ? kLatePhase1bBit : 0;
}

int64_t route_in_launch_tokens(const moe_problem& p) {
  if (env_is("MOE_MEGA_ROUTE", "apart") || p.sink_experts > 0 || !gpu::route_limits(p).ok())
    return 0;
  const KindChoice kinds = choose_kinds(p);
  const int64_t groups = p.routing == MOE_ROUTING_GROUPED_TOPK ? p.num_groups : 1;
  const int64_t width = topk_width(p);
  const int64_t tokens = env_is("MOE_MEGA_ROUTE", "fused64") ? 64 : kRouteInLaunchTokens;
  const bool fits = detail::route_fits(kinds.kind, p.experts, groups, width, tokens) &&
                    (kinds.large_from == 0 ||
                     detail::route_fits(kinds.large_kind, p.experts, groups, width, tokens));
  return fits ? tokens : 0;
}

int64_t result_bytes(const moe_problem& p, int64_t tokens) {
  const int64_t copy = tokens * slots_per_token(p) * p.hidden * 4;
  return std::max(copy, std::min(8 * copy, int64_t(32) << 20));
}

int32_t result_copies(const moe_problem& p, int64_t tokens) {
  const int64_t copy = std::max<int64_t>(1, tokens * slots_per_token(p) * p.hidden * 4);
  return int32_t(std::clamp<int64_t>(result_bytes(p, tokens) / copy, 1, 8));
}

sdk::Verdict check_support(const moe_problem& p, bool need_device) {
  using sdk::Verdict;
  const detail::KernelLimits lim = detail::kernel_limits(kind_of(p));
  const bool fp8 = p.format == MOE_FORMAT_FP8_BLOCK;
  const bool fp4 = p.format == MOE_FORMAT_MXFP4 || p.format == MOE_FORMAT_NVFP4;
  if (p.format != MOE_FORMAT_BF16 && !fp8 && !fp4)
    return Verdict::no(MOE_REASON_FORMAT,
                       fmt::format("bf16, fp8_block, mxfp4 and nvfp4 weights only, not {}",
                                   format_name(static_cast<moe_format>(p.format))));
  if (!fp8 && p.input_format != MOE_INPUT_BF16 && p.input_format != MOE_INPUT_DEFAULT &&
      !(fp4 && act_quant_of(p) != detail::ActQuant::kBf16))
    return Verdict::no(
        MOE_REASON_INPUT_FORMAT,
        fp4 ? fmt::format("{} weights take bf16, mxfp8, fp8_tensor_static or fp8_tensor_dynamic "
                          "activations, not {} (the GEMMs are bf16 x bf16, the 4-bit weights "
                          "dequantised in the main loop and e4m3 activations kept as bf16 values; "
                          "gated, a GEMM1 item holds 64 intermediate columns, half a 1x128 block)",
                          format_name(static_cast<moe_format>(p.format)),
                          input_format_name(static_cast<moe_input_format>(p.input_format)))
            : fmt::format("{} weights take bf16 activations only, not {} (the GEMMs are bf16 x "
                          "bf16)",
                          format_name(static_cast<moe_format>(p.format)),
                          input_format_name(static_cast<moe_input_format>(p.input_format))));
  if (fp8 && p.input_format != MOE_INPUT_FP8_1X128)
    return Verdict::no(
        MOE_REASON_INPUT_FORMAT,
        fmt::format("fp8_block weights take fp8_1x128 activations only, not {} "
                    "(the GEMMs are e4m3 x e4m3)",
                    input_format_name(static_cast<moe_input_format>(p.input_format))));
  if (virtual_count(p) > lim.max_virtual)
    return Verdict::no(MOE_REASON_SHARED,
                       fmt::format("the sink and shared experts make {} virtual experts of "
                                   "intermediate={}, at most {}",
                                   virtual_count(p), p.intermediate, lim.max_virtual));
  if (p.shared_intermediate > 0 && (fp8 || fp4) && p.shared_intermediate % lim.scale_block != 0)
    return Verdict::no(MOE_REASON_SHAPE,
                       fmt::format("shared_intermediate={} must be a multiple of {} for {} (the "
                                   "shared expert runs as experts of whole scale blocks)",
                                   p.shared_intermediate, lim.scale_block,
                                   format_name(static_cast<moe_format>(p.format))));
  if (p.redundant_experts > 0)
    return Verdict::no(MOE_REASON_EP,
                       "redundant experts (EPLB) are refused: the fused schedule maps each id "
                       "to one weight slice");
  if (p.ep_size > 1)
    return Verdict::no(MOE_REASON_EP, "expert parallelism is not implemented in cutlass_mega");
  // One rank: a valid map is a permutation, which the schedule (expert e's weights at slot e)
  // would ignore.
  for (int64_t e = 0; p.ep_map != nullptr && e < p.experts; ++e)
    if (p.ep_map[e] != e)
      return Verdict::no(MOE_REASON_EP,
                         fmt::format("ep_map[{}]={}: cutlass_mega reads expert e's weights at "
                                     "local slot e and takes no other EP map",
                                     e, p.ep_map[e]));
  // fp8_block: a stage is one 128-wide scale block of K; fp4: a stage is 128 K of a prepared
  // chunk. GEMM2's K is I.
  const int64_t cols =
      fp8 || fp4 ? lim.scale_block : (gated(p) ? lim.weight_rows / 2 : lim.weight_rows);
  if (p.hidden % lim.weight_rows != 0 || p.intermediate % cols != 0)
    return Verdict::no(MOE_REASON_SHAPE,
                       fmt::format("hidden={} must be a multiple of {} and intermediate={} of {} "
                                   "(the fused kernel's {})",
                                   p.hidden, lim.weight_rows, p.intermediate, cols,
                                   fp8   ? "weight tiles and scale blocks"
                                   : fp4 ? "weight tiles and 128-deep stages"
                                         : "weight tiles"));
  const int64_t k_limit = int64_t(lim.max_k_blocks) * lim.scale_block;
  if (fp8 && std::max(p.hidden, p.intermediate) > k_limit)
    return Verdict::no(MOE_REASON_SHAPE,
                       fmt::format("hidden={} and intermediate={} must be at most {} for "
                                   "fp8_block (an item's scales live in shared memory)",
                                   p.hidden, p.intermediate, k_limit));
  if (p.experts + virtual_count(p) > lim.max_experts)
    return Verdict::no(
        MOE_REASON_SHAPE,
        fmt::format("{} experts{}, at most {} (the schedule in shared memory)",
                    p.experts + virtual_count(p),
                    virtual_count(p) > 0 ? " with the sink and shared ones" : "", lim.max_experts));
  if (p.max_tokens > slot_limited_tokens(p))
    return Verdict::no(
        MOE_REASON_MAX_TOKENS,
        fmt::format("a decode kernel: max_tokens={} x {} slots (top_k={}{}) exceeds the {} "
                    "slots its schedule holds in shared memory (max_tokens <= {})",
                    p.max_tokens, slots_per_token(p), p.top_k,
                    virtual_count(p) > 0
                        ? fmt::format(" and {} for sink and shared experts", virtual_count(p))
                        : std::string(),
                    lim.max_slots, slot_limited_tokens(p)));
  if (need_device)
    if (const std::string& why = gpu::sm90a_refusal(); !why.empty())
      return Verdict::no(MOE_REASON_ARCH, why);
  return Verdict::yes();
}

LayerOptions parse_options(const Options& options) {
  LayerOptions o;
  for (const auto& [key, value] : options) {
    MOE_CHECK(key == "sms", MOE_STATUS_CONFIG_ERROR,
              "cutlass_mega: unknown option '{}' (known: sms)", key);
    if (value == "auto") {
      o.sms = 0;
      continue;
    }
    int v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    MOE_CHECK(ec == std::errc() && end == value.data() + value.size() && v >= 1 && v <= 1024,
              MOE_STATUS_CONFIG_ERROR,
              "cutlass_mega: sms '{}' is not auto or an integer in [1, 1024]", value);
    o.sms = v;
  }
  return o;
}

namespace {

// What the bf16 mma of a 4-bit layer multiplies the weights with.
std::string fp4_activations(const moe_problem& p) {
  switch (act_quant_of(p)) {
    case detail::ActQuant::kMxfp8:
      return "mxfp8 activations (quantised inside the kernel per 32 channels, the hidden states "
             "per token and the intermediate per slot, their values exact in bf16; the "
             "intermediate's blocks in GEMM1's epilogue)";
    case detail::ActQuant::kFp8Static:
      return "e4m3 activations by the static a13_scale and a2_scale (each code's value in bf16, "
             "the scale multiplied in the GEMM's epilogue; the intermediate quantised in GEMM1's)";
    case detail::ActQuant::kFp8Dynamic:
      return "e4m3 activations per tensor from the batch's amax (hidden states, then the routed "
             "experts' intermediate and the shared expert's apart, each after a grid barrier; "
             "each code's value in bf16, the scale multiplied in the GEMM's epilogue)";
    case detail::ActQuant::kBf16:
      break;
  }
  return "bf16 activations";
}

}  // namespace

std::string describe(const moe_problem& p) {
  // The instance prepare takes (its switches included) and its limits (fp8_block's two-tile and
  // wgmma stages take 32-slot items).
  using detail::Kind;
  const Kind kind = choose_kinds(p).kind;
  const detail::KernelLimits lim = detail::kernel_limits(kind);
  const bool fp4 = p.format == MOE_FORMAT_MXFP4 || p.format == MOE_FORMAT_NVFP4;
  const bool fp4_wgmma = kind == Kind::kMxfp4Wgmma || kind == Kind::kNvfp4Wgmma;
  const int64_t four_from = four_chunk_tokens(p), own_rows = own_rows_tokens(p);
  const std::string weights =
      fp4 ? fmt::format(
                "{} weights prepared into chunks of 128 rows x 128 K (codes arranged for the "
                "mma threads, then the block scales as one byte each), {} per pipeline stage, "
                "dequantised to bf16 in registers before bf16 {} with {}{}",
                format_name(static_cast<moe_format>(p.format)),
                fp4_wgmma ? "two adjacent chunks"
                : four_from > 0
                    ? fmt::format("two adjacent chunks (four from {} tokens)", four_from)
                : whole_stages(p, 256) ? "two adjacent chunks"
                                       : "one chunk",
                fp4_wgmma ? "wgmma (A from those registers, the token rows from shared memory)"
                          : "mma",
                fp4_activations(p),
                p.format == MOE_FORMAT_NVFP4 ? ", scale_2 applied per expert in f32" : "")
      : p.format == MOE_FORMAT_FP8_BLOCK
          ? fmt::format(
                "fp8_block weights as given (e4m3 w13 [E, {}, H], w2 [E, H, I], f32 "
                "128x128 block scales) by TMA, {} a pipeline stage, activations quantised per "
                "token per 128 channels inside the kernel (hidden states first, {}; the "
                "intermediate after GEMM1); {}, each 128-deep K block promoted into f32 with both "
                "scales",
                gated(p) ? "2I" : "I",
                kind == Kind::kFp8BlockF16x2 || kind == Kind::kFp8BlockWgmma2
                    ? "two 128-deep tiles (32 KB)"
                    : "one 128-deep tile (16 KB)",
                own_rows > 0
                    ? fmt::format("by every CTA for itself in batches of up to {} token(s), "
                                  "with no grid barrier, by the grid above that",
                                  own_rows)
                    : "by the grid",
                kind == Kind::kFp8BlockWgmma || kind == Kind::kFp8BlockWgmma2
                    ? "the e4m3 codes multiplied by wgmma from shared memory"
                : kind == Kind::kFp8Block ? "the e4m3 codes multiplied by e4m3 mma.sync"
                                          : "the codes multiplied as their exact f16 values")
      : bf16_two_chunks(p)
          ? std::string(
                "bf16 weights reordered at prepare into chunks of 128 rows x 64 K (the "
                "shared-memory swizzle baked in), two adjacent chunks (32 KB) a pipeline "
                "stage by one bulk copy")
          : fmt::format("bf16 weights as given (w13 [E, {}, H], w2 [E, H, I]), by TMA",
                        gated(p) ? "2I" : "I");
  return fmt::format(
      "{}; the layer after routing in one cooperative launch{}: a schedule built in every CTA's "
      "shared memory, GEMM1 with the activation per (expert, {} slots, {} columns), GEMM2 per "
      "(expert, {} slots, {} rows of H), each token's slots summed in slot order "
      "(deterministic){}; batches up to {} tokens",
      weights, sinks_apart(p) ? " (two where the sinks run apart, below)" : "", lim.token_chunk,
      gated(p) ? lim.weight_rows / 2 : lim.weight_rows, lim.token_chunk, lim.weight_rows,
      std::string(p.expert_bias != 0 ? "; expert biases in f32, b13 before the activation, b2 on "
                                       "each slot's result"
                                     : "") +
          (virtual_count(p) > 0 && !sinks_apart(p)
               ? fmt::format("; {}{}{} as {} virtual experts of the routed shape (a slot per "
                             "token in each)",
                             p.sink_experts > 0 ? fmt::format("{} sink experts", p.sink_experts)
                                                : std::string(),
                             p.sink_experts > 0 && p.shared_intermediate > 0 ? " and " : "",
                             p.shared_intermediate > 0 ? "the shared expert" : "", virtual_count(p))
           : p.shared_intermediate > 0
               ? fmt::format("; the shared expert as {} virtual expert{} of the routed shape",
                             virtual_count(without_sinks(p)),
                             virtual_count(without_sinks(p)) == 1 ? "" : "s")
               : std::string()) +
          (sinks_apart(p)
               ? fmt::format("; {} sink experts (bf16, silu_mul) in a second launch of the bf16 "
                             "kernel, as {} virtual experts of the routed shape, adding their sum "
                             "into the first launch's output (rounded to bf16 once more)",
                             p.sink_experts, virtual_count(sink_problem(p)))
               : std::string()),
      std::min<int64_t>(p.max_tokens, slot_limited_tokens(p)));
}

DeviceLayer::DeviceLayer(const moe_problem& problem, const moe_weights& w, const Options& options)
    : problem_(problem) {
  check_switches();
  const LayerOptions o = parse_options(options);
  const moe_problem user = problem_.c();
  const sdk::Verdict v = check_support(user);
  MOE_CHECK(v.ok(), MOE_STATUS_UNSUPPORTED, "cutlass_mega: {}", v.message);
  kernel_ = without_sinks(user);
  build(w, o);
  if (sinks_apart(user)) sinks_.reset(new DeviceLayer(SinkPass{}, sink_problem(user), w, o));
}

DeviceLayer::DeviceLayer(SinkPass, const moe_problem& sinks, const moe_weights& w,
                         const LayerOptions& o)
    : problem_(sinks), kernel_(sinks), sink_pass_(true) {
  build(w, o);
}

void DeviceLayer::build(const moe_weights& w, const LayerOptions& o) {
  const moe_problem p = kernel_;
  n1_ = w13_rows(p);
  fp8_ = p.format == MOE_FORMAT_FP8_BLOCK;
  if (detail::is_fp4(kind_of(p))) act_quant_ = act_quant_of(p);
  if (p.input_format == MOE_INPUT_FP8_TENSOR_STATIC) {
    a13_scale_ = sdk::checked_tensor_scales(w.a13_scale, "a13_scale", 1)[0];
    a2_scale_ = sdk::checked_tensor_scales(w.a2_scale, "a2_scale", 1)[0];
  }
  own_rows_tokens_ = own_rows_tokens(p);
  const KindChoice kinds = choose_kinds(p);
  kind_ = kinds.kind;
  large_kind_ = kinds.large_kind;
  large_from_ = kinds.large_from;
  const char* error = nullptr;
  ctas_ = detail::resident_ctas(kind_, &error);
  if (ctas_ > 0 && large_from_ > 0)  // both instances resident: the smaller count launches
    ctas_ = std::min(ctas_, detail::resident_ctas(large_kind_, &error));
  MOE_CHECK(ctas_ > 0, MOE_STATUS_DEVICE_ERROR, "cutlass_mega: the fused kernel cannot run: {}",
            error ? error : "unknown");
  if (o.sms > 0) ctas_ = std::min(ctas_, o.sms);          // at most: a larger cap is every SM
  if (!sink_pass_) timeline_ = timeline_from_env(ctas_);  // the first launch's
  dependent_launch_ = env_is("MOE_MEGA_LAUNCH", "pdl");
  prefetch_late_ = prefetch_late_bits(p);
  // GEMM2's split: the waves model within one wave too by default (session 55, H200: Mixtral
  // bf16 0.95-0.99x at T = 2-8, mxfp4 0.89-0.97x at T = 2-5, no loss past noise elsewhere);
  // MOE_MEGA_SPLIT2=waves past one wave only, =fit k_split alone (the default before).
  split2_waves_ = env_is("MOE_MEGA_SPLIT2", "fit") ? 0 : env_is("MOE_MEGA_SPLIT2", "waves") ? 1 : 2;
  early2_ = env_is("MOE_MEGA_GEMM2", "early") && !fp8_ && act_quant_ == detail::ActQuant::kBf16;
  if (!sink_pass_) route_tokens_ = route_in_launch_tokens(problem_.c());
  // The virtual experts: the shared expert's, and the sinks' where they run in this launch (the
  // sink pass: the sinks' alone, with no routed experts before them).
  const VirtualExperts shared = virtual_experts(p, w);
  const int64_t routed = sink_pass_ ? 0 : p.experts;
  experts_ = routed + shared.count;
  if (p.expert_bias != 0) {  // b13 [E, n1] and b2 [E, H], bf16 or f32, kept as f32; 0 for shared
    std::vector<float> b13 = sdk::bias_values(w.b13, "b13", p.experts * n1_);
    std::vector<float> b2 = sdk::bias_values(w.b2, "b2", p.experts * p.hidden);
    b13.resize(size_t(experts_ * n1_), 0.0f);
    b2.resize(size_t(experts_ * p.hidden), 0.0f);
    b13_ = gpu::upload_vector(b13);
    b2_ = gpu::upload_vector(b2);
  }
  if (detail::is_fp4(kind_)) {
    prepare_fp4(p, w, shared);
    return;
  }
  // The routed experts as given, then the shared expert's virtual ones.
  const size_t elem = fp8_ ? 1 : 2;
  const size_t w13_routed = size_t(routed * n1_ * p.hidden) * elem;
  const size_t w2_routed = size_t(routed * p.hidden * p.intermediate) * elem;
  w13_ = gpu::DeviceBuffer(w13_routed + shared.w13.size());
  w2_ = gpu::DeviceBuffer(w2_routed + shared.w2.size());
  if (routed > 0) {
    w13_.upload(w.w13.data, w13_routed);
    w2_.upload(w.w2.data, w2_routed);
  }
  if (shared.count > 0) {
    w13_.upload(shared.w13.data(), shared.w13.size(), w13_routed);
    w2_.upload(shared.w2.data(), shared.w2.size(), w2_routed);
  }
  if (fp8_) {  // checked (finite, positive), floored, kept in the canonical order
    const int64_t b = detail::kernel_limits(kind_of(p)).scale_block;
    auto upload_scales = [&](const moe_tensor& t, const char* name, int64_t rows, int64_t cols,
                             const std::vector<float>& extra) {
      std::vector<float> v = sdk::checked_block_scales(t, name, p.experts, rows / b, cols / b,
                                                       sdk::BlockScaleOrder::kKMajor);
      v.insert(v.end(), extra.begin(), extra.end());
      return gpu::upload_vector(v);
    };
    s13_ = upload_scales(w.w13_scale, "w13_scale", n1_, p.hidden, shared.w13_blocks);
    s2_ = upload_scales(w.w2_scale, "w2_scale", p.hidden, p.intermediate, shared.w2_blocks);
  }
  if (env_is("MOE_MEGA_CHUNKS", "1") || kind_ == detail::Kind::kBf16x2) {
    reorder_to_chunks(p, elem);
    return;  // no tensor maps: the kernel reads the chunks
  }
  const char* map_error =
      detail::encode_weight_maps(&maps_, int(elem), w13_.as<uint8_t>(), experts_ * n1_, p.hidden,
                                 w2_.as<uint8_t>(), experts_ * p.hidden, p.intermediate);
  MOE_CHECK(map_error == nullptr, MOE_STATUS_DEVICE_ERROR, "cutlass_mega: weight tensor maps: {}",
            map_error ? map_error : "");
}

void DeviceLayer::reorder_to_chunks(const moe_problem& p, size_t elem) {
  const int64_t b = detail::kernel_limits(kind_).weight_rows;
  auto reorder = [&](gpu::DeviceBuffer& stack, const detail::ChunkShape& shape, const char* name) {
    const char* error = detail::reorder_to_chunks(stack.get(), shape, experts_);
    MOE_CHECK(error == nullptr, MOE_STATUS_DEVICE_ERROR, "cutlass_mega: {} into chunks: {}", name,
              error ? error : "");
  };
  // A W13 tile pairs 64 gate rows with the 64 up rows of the same columns (relu2: 128 rows), so
  // both have n1 / 128 slices; a W2 tile is 128 rows of H.
  reorder(w13_, {n1_, p.hidden * int64_t(elem), gated(p) ? p.intermediate : 0, n1_ / b}, "w13");
  reorder(w2_, {p.hidden, p.intermediate * int64_t(elem), 0, p.hidden / b}, "w2");
  chunked_ = true;
}

void DeviceLayer::prepare_fp4(const moe_problem& p, const moe_weights& w,
                              const VirtualExperts& shared) {
  const gpu::Fp4Scales scales =
      p.format == MOE_FORMAT_NVFP4 ? gpu::Fp4Scales::kNv : gpu::Fp4Scales::kMx;
  const int64_t gate_up = gated(p) ? p.intermediate : 0;
  // The routed experts' chunks, then the shared expert's (chunks are ordered by expert first).
  auto stack = [&](const moe_tensor& q, const moe_tensor& sc, const std::vector<uint8_t>& vq,
                   const std::vector<uint8_t>& vs, int64_t rows, int64_t k, int64_t up,
                   const char* name, const char* shared_name) {
    std::vector<uint8_t> chunks =
        gpu::pack_fp4_stack(scales, static_cast<const uint8_t*>(q.data),
                            static_cast<const uint8_t*>(sc.data), p.experts, rows, k, up, name);
    if (shared.count > 0) {
      const std::vector<uint8_t> more =
          gpu::pack_fp4_stack(scales, vq.data(), vs.data(), shared.count, rows, k, up, shared_name);
      chunks.insert(chunks.end(), more.begin(), more.end());
    }
    return gpu::upload_vector(chunks);
  };
  w13_ = stack(w.w13, w.w13_scale, shared.w13, shared.w13_scale, n1_, p.hidden, gate_up, "w13",
               "shared_w13");
  w2_ = stack(w.w2, w.w2_scale, shared.w2, shared.w2_scale, p.hidden, p.intermediate, 0, "w2",
              "shared_w2");
  if (scales == gpu::Fp4Scales::kNv) {  // finite, positive (docs/design.md §3.3)
    auto upload_scale_2 = [&](const moe_tensor& t, const char* name,
                              const std::vector<float>& shared_values) {
      const auto* v = static_cast<const float*>(t.data);
      std::vector<float> all(v, v + p.experts);
      all.insert(all.end(), shared_values.begin(), shared_values.end());
      for (int64_t e = 0; e < experts_; ++e)
        MOE_CHECK(std::isfinite(all[size_t(e)]) && all[size_t(e)] > 0, MOE_STATUS_INVALID_ARGUMENT,
                  "cutlass_mega: {}{} = {}: nvfp4's scale_2 must be finite and positive",
                  e < p.experts ? name : "shared_",
                  e < p.experts ? fmt::format("[{}]", e) : std::string(name) + "[0]",
                  all[size_t(e)]);
      return gpu::upload_vector(all);
    };
    s13_ = upload_scale_2(w.w13_scale_2, "w13_scale_2", shared.w13_scale_2);
    s2_ = upload_scale_2(w.w2_scale_2, "w2_scale_2", shared.w2_scale_2);
  }
}

int64_t DeviceLayer::slot_width() const {
  return sink_pass_ ? virtual_count(kernel_) : slots_per_token(kernel_);
}

DeviceLayer::Workspace DeviceLayer::carve(void* base, int64_t tokens, size_t* bytes) const {
  const moe_problem& p = kernel_;
  gpu::WorkspaceCarver c(base);
  Workspace ws{};
  const detail::KernelLimits lim = detail::kernel_limits(kind_of(p));
  const int64_t slots = tokens * slot_width(), b = lim.scale_block;
  ws.y = c.take<float>(size_t(result_bytes(p, tokens) / 4));
  if (fp8_) {  // codes: e4m3 bytes, or their f16 values (kFp8BlockF16, kFp8BlockF16x2)
    const size_t code = detail::has_f16_codes(kind_) ? 2 : 1;
    // With own rows, a copy of the batch's codes per CTA up to own_rows_tokens_ tokens (and as
    // many above, so a workspace sized for T covers every smaller batch).
    const int64_t rows = std::max(tokens, int64_t(ctas_) * std::min(tokens, own_rows_tokens_));
    ws.xq = c.take<uint8_t>(size_t(rows * p.hidden) * code);
    ws.xs = c.take<float>(size_t(rows * (p.hidden / b)));
    ws.inter32 = c.take<float>(size_t(slots * p.intermediate));
    ws.iq = c.take<uint8_t>(size_t(slots * p.intermediate) * code);
    ws.is = c.take<float>(size_t(slots * (p.intermediate / b)));
  } else {
    ws.inter = c.take<uint16_t>(size_t(slots * p.intermediate));
  }
  if (act_quant_ != detail::ActQuant::kBf16) {  // the hidden states quantised; per tensor from
    ws.xa = c.take<uint16_t>(size_t(tokens * p.hidden));  // the batch's amax: the f32
    if (act_quant_ == detail::ActQuant::kFp8Dynamic) {    // intermediate and each CTA's amax
      ws.inter32 = c.take<float>(size_t(slots * p.intermediate));
      ws.amax = c.take<float>(size_t(3 * ctas_));
    }
  }
  if (early2_)
    ws.gemm2_ready = c.take<unsigned long long>(
        size_t(slots * (n1_ / detail::kernel_limits(kind_).weight_rows)));
  if (bytes != nullptr) *bytes = c.used();
  return ws;
}

size_t DeviceLayer::workspace_size(int64_t tokens) const {
  if (tokens == 0) return 0;
  size_t bytes = 0;
  carve(nullptr, tokens, &bytes);
  // The sink pass runs after the first launch on the same stream: it reuses the workspace.
  return sinks_ != nullptr ? std::max(bytes, sinks_->workspace_size(tokens)) : bytes;
}

void DeviceLayer::run(const moe_run_args& a) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = a.hidden.shape[0];
  if (!validated_.known(a)) {  // the same tensors as the last validated call skip the checks
    sdk::check_run_tensors(p, a, [&](int64_t t) { return workspace_size(t); });
    MOE_CHECK(tokens == 0 || reinterpret_cast<uintptr_t>(a.hidden.data) % 16 == 0,
              MOE_STATUS_INVALID_ARGUMENT,
              "cutlass_mega: hidden at {} must be 16-byte aligned (its rows are copied 16 bytes "
              "at a time)",
              a.hidden.data);
    MOE_CHECK(tokens == 0 || reinterpret_cast<uintptr_t>(a.workspace) % 16 == 0,
              MOE_STATUS_INVALID_ARGUMENT,
              "cutlass_mega: workspace at {} must be 16-byte aligned (the kernel copies and sums "
              "its rows 16 bytes at a time)",
              a.workspace);
    validated_.remember(a);
  }
  if (tokens == 0) return;
  launch(a, tokens, sdk::run_routes(a) && routes_in_launch(a));
  if (sinks_ != nullptr) sinks_->launch(a, tokens, false);  // adds the sinks' sum into the output
}

bool DeviceLayer::routes_in_launch(const moe_run_args& a) const {
  return route_tokens_ > 0 && a.hidden.ndim == 2 && a.hidden.shape[0] >= 1 &&
         a.hidden.shape[0] <= route_tokens_;
}

void DeviceLayer::launch(const moe_run_args& a, int64_t tokens, bool route) const {
  const moe_problem& p = kernel_;
  const Workspace ws = carve(a.workspace, tokens, nullptr);
  detail::FusedCall c{};
  c.maps = &maps_;
  c.hidden = static_cast<const uint16_t*>(a.hidden.data);
  c.ids = static_cast<const int32_t*>(a.topk_ids.data);
  c.weights = static_cast<const float*>(a.topk_weights.data);
  if (route)  // the SDK checked the routing tensors (sdk::check_route_tensors), launched none
    gpu::fill_route_params(
        c.route, problem_.c(), tokens, static_cast<const float*>(a.router_logits.data),
        static_cast<const float*>(a.routing_bias.data),
        static_cast<const uint8_t*>(a.is_padding.data), static_cast<int32_t*>(a.topk_ids.data),
        static_cast<float*>(a.topk_weights.data));
  c.out = static_cast<uint16_t*>(a.output.data);
  c.accumulate = sink_pass_ || sdk::run_accumulates(a);
  const detail::Kind kind = large_from_ > 0 && tokens >= large_from_ ? large_kind_ : kind_;
  c.kind = kind;
  c.y = ws.y;
  c.inter = ws.inter;
  const bool fp4 = detail::is_fp4(kind);
  c.s13 = fp4 ? nullptr : s13_.as<float>();
  c.s2 = fp4 ? nullptr : s2_.as<float>();
  c.w13_chunks = fp4 || chunked_ ? w13_.as<uint8_t>() : nullptr;
  c.w2_chunks = fp4 || chunked_ ? w2_.as<uint8_t>() : nullptr;
  c.g13 = p.format == MOE_FORMAT_NVFP4 ? s13_.as<float>() : nullptr;
  c.g2 = p.format == MOE_FORMAT_NVFP4 ? s2_.as<float>() : nullptr;
  c.b13 = p.expert_bias != 0 ? b13_.as<float>() : nullptr;
  c.b2 = p.expert_bias != 0 ? b2_.as<float>() : nullptr;
  c.xq = ws.xq;
  c.xs = ws.xs;
  c.own_rows = tokens <= own_rows_tokens_ ? 1 : 0;
  c.prefetch_late = prefetch_late_;
  c.inter32 = ws.inter32;
  c.iq = ws.iq;
  c.is = ws.is;
  c.tokens = int32_t(tokens);
  c.width = int32_t(a.topk_ids.shape[1]);
  c.slot_width = int32_t(slot_width());
  // The sink pass has no routed slots: its slots are the sinks' columns, its experts numbered from
  // 0 (the columns still read the ids' sink columns, k + s, and match their ids, E + s).
  c.routed = sink_pass_ ? 0 : int32_t(p.experts);
  c.top_k = sink_pass_ ? 0 : int32_t(p.top_k);
  const int32_t first_virtual = sink_pass_ ? int32_t(p.experts) : 0;
  const std::vector<SlotColumn> columns = slot_columns(p);
  for (size_t i = 0; i < columns.size(); ++i) {
    c.col_src[i] = int16_t(columns[i].src);
    c.col_expert[i] = int16_t(columns[i].expert - first_virtual);
    c.col_match[i] = int16_t(columns[i].match);
  }
  c.experts = int32_t(experts_);
  c.hidden_dim = int32_t(p.hidden);
  c.inter_dim = int32_t(p.intermediate);
  c.n1 = int32_t(n1_);
  c.max_split2 = result_copies(p, tokens);
  c.split2_waves = split2_waves_;
  // The early flags' tag is the launch's %gridid mixed (kernels/gemm2_ready.cuh), which a CUDA
  // graph's replays share: a replay would find the last replay's flags already holding its tag and
  // start GEMM2 on stale rows (seen on an H100, 2026-12-06). A launch being captured takes the grid
  // barrier instead; eager launches keep the flags.
  c.gemm2_ready = ws.gemm2_ready != nullptr && stream_capturing(static_cast<cudaStream_t>(a.stream))
                      ? nullptr
                      : ws.gemm2_ready;
  c.activation = p.activation;
  c.act_quant = act_quant_;
  c.a13_scale = a13_scale_;
  c.a2_scale = a2_scale_;
  c.xa = ws.xa;
  c.amax = ws.amax;
  c.limit = p.activation_limit;
  c.alpha = p.activation_alpha;
  c.gelu_tanh = p.gelu_tanh;
  c.stream = static_cast<cudaStream_t>(a.stream);
  c.dependent = dependent_launch_;
  if (timeline_ != nullptr) {
    const detail::StageGeometry g = detail::stage_geometry(kind);
    timeline_->note_run(format_name(static_cast<moe_format>(p.format)), tokens, p.hidden / g.k,
                        p.intermediate / g.k, g.weight_bytes, int(kind), route);
    c.timeline = timeline_->records();
    c.timeline_items = timeline_->items();
  }
  const char* error = detail::launch_fused(c, ctas_);
  MOE_CHECK(error == nullptr, MOE_STATUS_DEVICE_ERROR,
            "cutlass_mega: the fused kernel (T={}) did not launch: {}", tokens, error ? error : "");
}

}  // namespace moe::mega
