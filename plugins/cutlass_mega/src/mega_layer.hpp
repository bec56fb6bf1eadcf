// One cutlass_mega layer on the GPU: fp8_block weights kept as given (w13 [E, n1, H], w2 [E, H, I],
// their scales in the canonical order), bf16 ones reordered into 16 KB chunks where H and I allow
// (kernels/chunk_layout.hpp; else as given), mxfp4 and nvfp4 weights prepared into the kernel's
// chunks (moe_cuda/fp4_chunks.hpp), uploaded at prepare, and the whole
// layer after routing in one cooperative launch (kernels/fused_moe.cuh, docs/design.md §13).
// Decode first: a batch's tokens x top_k slots must fit the schedule the kernel keeps in shared
// memory, so `max_tokens` is bounded at prepare. One option, `sms` (LayerOptions).
#pragma once

#include <memory>
#include <string>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/options.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/validated_runs.hpp"
#include "moe/sdk/verdict.hpp"
#include "moe_cuda/device.hpp"
#include "src/fused_launch.hpp"
#include "src/timeline.hpp"
#include "src/virtual_experts.hpp"

namespace moe::mega {

// Why this backend cannot run `p` here (reason NONE: it can). `need_device`: also ask for an
// sm_90 device (false: the problem alone, for tests on any machine).
sdk::Verdict check_support(const moe_problem& p, bool need_device = true);

// `sms: auto | N`: the fused kernel on at most N SMs (one CTA each; auto, the default: every SM
// it can hold), leaving the rest to work on other streams, as DeepGEMM's num_sms does, and a way
// to measure its per-SM stream rate. An unknown key or a value that is not auto or an integer in
// [1, 1024] is a config error naming it.
struct LayerOptions {
  int sms = 0;  // 0: auto
};
LayerOptions parse_options(const Options& options);

std::string describe(const moe_problem& p);

// Stages of several prepared chunks, by default (docs/design.md §13; bench/NOTES.md, session 42):
// bf16 two 16 KB chunks a stage where H and I are multiples of 128; 4-bit weights two chunks a
// stage where they are multiples of 256, and four for batches of `four_chunk_tokens` tokens or
// more (8 slots an expert on average or 64 tokens, whichever is fewer: consumers' work per stage
// is what four amortise) where they are multiples of 512 and the activations are bf16 (0: never
// four); fp8_block two 16 KB e4m3 tiles a stage (256 K, two scale blocks) where H and I are
// multiples of 256, multiplied by wgmma (session 46; by mma.sync on the codes' f16 values with
// MOE_MEGA_FP8_WGMMA=0, the default of session 44).
bool bf16_two_chunks(const moe_problem& p);
int64_t four_chunk_tokens(const moe_problem& p);
bool fp8_two_tiles(const moe_problem& p);

// The kernel instance a layer prepared now runs, and for 4-bit weights the four-chunk one for
// batches from `large_from` tokens (0: never; same prepared chunks): the rules above, and the
// measurement switches read at prepare (docs/design.md §13: MOE_MEGA_BF16_STAGE=64,
// MOE_MEGA_FP8_TOKENS=e4m3, MOE_MEGA_FP8_STAGE=128, MOE_MEGA_FP8_WGMMA=0|1|2,
// MOE_MEGA_FP4_STAGE=128|256|512, MOE_MEGA_FP4_WGMMA=1, which takes precedence over the stage).
struct KindChoice {
  detail::Kind kind;
  detail::Kind large_kind;
  int64_t large_from;
};
KindChoice choose_kinds(const moe_problem& p);

// The workspace's per-slot GEMM2 results for a batch of `tokens`: one f32 row of H per slot, and
// up to 8 copies (GEMM2's K parts, kernels/split.hpp) while they stay within 32 MiB, so decode
// batches can split and large ones keep one copy. Bytes grow with `tokens` (a workspace sized
// for T covers every smaller batch); copies = how many whole copies they hold, 1 to 8.
int64_t result_bytes(const moe_problem& p, int64_t tokens);
int32_t result_copies(const moe_problem& p, int64_t tokens);

// fp8_block: the largest batch whose hidden states each CTA quantises itself, into its own copy in
// the workspace, instead of the grid sharing the work behind a grid barrier: kernels/config.cuh
// kOwnRowsDefaultElems / H tokens (Qwen3-30B-A3B's one token), kOwnRowsElems / H with
// MOE_MEGA_FP8_OWN_ROWS=1 at prepare (a measurement), 0 with MOE_MEGA_FP8_OWN_ROWS=0 or another
// format.
int64_t own_rows_tokens(const moe_problem& p);

// fp8_block with MOE_MEGA_FP8_PREFETCH at prepare (a measurement): kernels/config.cuh
// Params::prefetch_late's bits, 1 (late0: GEMM1's prefetch after phase 0), 2 (late1: GEMM2's after
// phase 1b) or 3 (late: both); 0 unset or in another format.
int32_t prefetch_late_bits(const moe_problem& p);

// Routing in the launch (ABI 1.6's routing in the run call; the default since session 51,
// MOE_MEGA_ROUTE=apart at prepare turns it off): batches of up to this many tokens, a token a warp
// of each CTA (MOE_MEGA_ROUTE=fused64, a measurement: up to 64).
constexpr int64_t kRouteInLaunchTokens = 8;
// The most tokens a run that routes routes inside the fused launch (0: none; the SDK's route()
// runs first): kRouteInLaunchTokens where the kernel routes `p` (no sinks, the routing kernel's
// limits, the candidates in registers and the scratch in the ring).
int64_t route_in_launch_tokens(const moe_problem& p);

class DeviceLayer {
 public:
  DeviceLayer(const moe_problem& problem, const moe_weights& weights, const Options& options);

  size_t workspace_size(int64_t tokens) const;
  void run(const moe_run_args& args) const;
  // Whether a run of `args` that routes (sdk::run_routes) routes inside its launch
  // (route_in_launch_tokens): the SDK then launches no route() before run().
  bool routes_in_launch(const moe_run_args& args) const;

 private:
  struct Workspace {
    float* y;         // [copies][T * W, H] f32 (GEMM2 K parts, result_bytes)
    uint16_t* inter;  // bf16, fp4: [T * S, I] (S = slots_per_token)
    uint8_t* xq;      // fp8_block: [T, H] e4m3, [T, H / 128] f32
    float* xs;
    float* inter32;  // fp8_block: [T * S, I] f32, then e4m3 and [T * S, I / 128] f32
    uint8_t* iq;
    float* is;
    uint16_t* xa;  // 4-bit weights, e4m3 activations: [T, H] bf16, and with their amax per
    float* amax;   // batch [3][ctas] f32 (and inter32)
    // MOE_MEGA_GEMM2=early: a flag per GEMM1 item, [T * S] chunks (at most one per slot) x
    // n1 / weight_rows slices
    unsigned long long* gemm2_ready;
  };
  Workspace carve(void* base, int64_t tokens, size_t* bytes) const;
  // The sink pass (sinks_): the layer's sinks alone as a bf16 silu_mul layer's virtual experts.
  struct SinkPass {};
  DeviceLayer(SinkPass, const moe_problem& sinks, const moe_weights& weights,
              const LayerOptions& options);
  // Prepares kernel_'s launch: its instance, CTAs and weight stacks.
  void build(const moe_weights& weights, const LayerOptions& options);
  // One launch for a run of `tokens` (validated by run()); `route`: it routes the batch from the
  // run's router logits into its topk tensors first.
  void launch(const moe_run_args& args, int64_t tokens, bool route) const;
  int64_t slot_width() const;  // a token's slots in this launch
  // mxfp4, nvfp4: the chunks of moe_cuda/fp4_chunks.hpp into w13_, w2_; nvfp4's scale_2 into s13_,
  // s2_.
  void prepare_fp4(const moe_problem& p, const moe_weights& w, const VirtualExperts& shared);

  Problem problem_;
  // What this launch runs: problem_ without its sinks where they run apart (in sinks_, a second
  // launch of the bf16 kernel that adds their sum into this one's output); the sink pass's own.
  moe_problem kernel_{};
  bool sink_pass_ = false;
  std::unique_ptr<DeviceLayer> sinks_;
  int64_t n1_ = 0;
  int64_t experts_ = 0;  // routed, then the sink and shared experts' virtual ones
  bool fp8_ = false;
  // 4-bit weights with e4m3 activations: how the kernel quantises them (kernels/config.cuh
  // ActQuant, 0: bf16 activations), and fp8_tensor_static's scales.
  detail::ActQuant act_quant_ = detail::ActQuant::kBf16;
  float a13_scale_ = 0.0f, a2_scale_ = 0.0f;
  detail::Kind kind_ = detail::Kind::kBf16;
  // 4-bit weights: the four-chunk instance for batches from large_from_ tokens (0: never), on the
  // same prepared chunks as kind_.
  detail::Kind large_kind_ = detail::Kind::kBf16;
  int64_t large_from_ = 0;
  int64_t own_rows_tokens_ = 0;  // fp8_block: batches each CTA quantises itself (own_rows_tokens)
  int32_t prefetch_late_ = 0;    // fp8_block: MOE_MEGA_FP8_PREFETCH (Params::prefetch_late)
  int32_t split2_waves_ = 2;     // Params::split2_waves; MOE_MEGA_SPLIT2=waves 1, =fit 0
  // MOE_MEGA_GEMM2=early at prepare (a measurement; bf16 and 4-bit weights on bf16 activations):
  // the workspace holds a flag per GEMM1 item (Params::gemm2_ready), tagged per launch.
  bool early2_ = false;
  int64_t route_tokens_ = 0;  // route_in_launch_tokens at prepare (0 in the sink pass)
  // bf16, fp8_block: the weights as given (fp8_block's scales in s13_, s2_); fp4: the prepared
  // chunks (nvfp4's scale_2 in s13_, s2_).
  gpu::DeviceBuffer w13_, w2_, s13_, s2_;
  gpu::DeviceBuffer b13_, b2_;  // expert biases as f32 [E, n1], [E, H], with expert_bias
  detail::WeightMaps maps_{};
  mutable sdk::ValidatedRuns validated_;  // run() skips the checks for the last validated tensors
  int ctas_ = 0;
  // bf16 two chunks a stage (the default where H and I allow) or MOE_MEGA_CHUNKS=1 at prepare (a
  // measurement): bf16 and e4m3 stacks reordered in place into prepared chunks
  // (kernels/chunk_layout.hpp), streamed by one bulk copy a stage.
  bool chunked_ = false;
  // MOE_MEGA_LAUNCH=pdl at prepare (a measurement, off by default): the kernel launched as a
  // programmatic dependent of the stream's previous kernel (cudaLaunchKernelEx).
  bool dependent_launch_ = false;
  void reorder_to_chunks(const moe_problem& p, size_t elem);
  std::unique_ptr<Timeline> timeline_;  // MOE_MEGA_TIMELINE: a measurement, null by default
};

}  // namespace moe::mega
