// The cutlass_mega plugin: the MoE layer after routing in one persistent cooperative launch
// (bf16, fp8_block, mxfp4 and nvfp4 weights, decode batch sizes first); declared on the SDK's
// table builder.
#include "moe/sdk/backend.hpp"
#include "moe_cuda/gpu_backend.hpp"
#include "src/mega_layer.hpp"

namespace {

using moe::sdk::Verdict;

class CutlassMegaBackend : public moe::gpu::GpuBackend {
 public:
  using Layer = moe::mega::DeviceLayer;

  static moe::sdk::BackendInfo info() {
    return {
        .name = "cutlass_mega",
        .version = "0.1",
        .description =
            "the layer after routing in one persistent kernel (bf16, fp8_block, or mxfp4 "
            "and nvfp4 dequantised in the main loop; decode batches): schedule, GEMM1 with "
            "the activation, GEMM2, the weighted combine in slot order",
        .aliases = {"mega_moe"},
        // Measured against trtllm_style (priority 50) in one run: bf16 faster at T = 8..32 on
        // Qwen3-30B-A3B and Mixtral (0.94-0.98x) and at T = 8..64 on Inkling-like (0.92-0.97x)
        // and DeepSeek-V3 (0.99x), 1.01x at Mixtral T = 64 (H100, bench/results/
        // 2026-12-05_s44_cutlass_mega_bf16_decode_h100.md); mxfp4 and nvfp4 faster up to T = 32
        // on Qwen3-30B-A3B, Mixtral and DeepSeek-V3 (0.79-0.94x), past 128 on Qwen3 and
        // DeepSeek-V3, slower from T = 64 on Mixtral (1.05x; H100,
        // bench/results/2026-12-05_s43_cutlass_mega_{mxfp4,nvfp4}_grid_h100.md). So `auto` takes
        // it for bf16 layers of max_tokens <= 64 and 4-bit ones of <= 32 (above trtllm_style's
        // 50), fp8_block ones of <= 8 where deepgemm_style (75 there: 0.93-0.98x cutlass_mega's
        // time at T = 8 and 64 on Qwen3-30B-A3B and Mixtral, 1.01-1.08x at T = 1; H200,
        // bench/results/2026-12-06_s47_cutlass_mega_fp8_block_h200.md) is absent, and ranks it
        // below trtllm_style above.
        .priority = 40,
        .decode_priority = 70,
        .decode_max_tokens = 8,
        .decode_max_tokens_by_format = {{MOE_FORMAT_BF16, 64},
                                        {MOE_FORMAT_MXFP4, 32},
                                        {MOE_FORMAT_NVFP4, 32}},
        .accumulates = true,  // finalize / the combine adds onto the old output
        .formats = {MOE_FORMAT_BF16, MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4},
        .activations = {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP,
                        MOE_ACTIVATION_SWIGLU_OAI, MOE_ACTIVATION_GELU_MUL, MOE_ACTIVATION_RELU2},
        .routings = {MOE_ROUTING_SOFTMAX_TOPK, MOE_ROUTING_SIGMOID_TOPK, MOE_ROUTING_GROUPED_TOPK},
        .targets = "sm_90a"};
  }

  Verdict supports(const moe_problem& p) const { return moe::mega::check_support(p); }

  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const {
    return std::make_unique<Layer>(r.problem, r.weights, r.options);
  }

  size_t workspace_size(const Layer& layer, int64_t tokens) const {
    return layer.workspace_size(tokens);
  }

  void run(Layer& layer, const moe_run_args& args) const { layer.run(args); }

  // ABI 1.6's routing in the run call inside the fused launch where the layer takes it (batches
  // of up to 8 tokens: 0.90x the time of route() then the launch at Qwen3-30B-A3B T = 1, 0.96x at
  // T = 8, H100, bench/results/2026-12-06_s51_h100.md); otherwise the SDK routes first.
  bool routes_in_run(const Layer& layer, const moe_run_args& args) const {
    return layer.routes_in_launch(args);
  }

  std::string describe_layout(const moe_problem& p) const { return moe::mega::describe(p); }
};

// The SDK launches no route() before a run this backend routes itself: if routes_in_run stopped
// matching the SDK's concept, the batch would be routed twice, silently.
static_assert(moe::sdk::detail::RoutesInRun<CutlassMegaBackend>);

}  // namespace

MOE_EXPORT_BACKEND(CutlassMegaBackend)
