// The deepgemm_style plugin: fp8 128x128 block-scale weights and 1x128 activations through
// grouped e4m3 GEMMs on sm90a (TMA, warp-specialised wgmma, per-K-block promotion with both
// scales), with a masked row layout for decode and a contiguous one for prefill; declared on the
// SDK's table builder.
#include "moe/sdk/backend.hpp"
#include "moe_cuda/gpu_backend.hpp"
#include "src/deepgemm_layer.hpp"

namespace {

using moe::sdk::Verdict;

class DeepGemmBackend : public moe::gpu::GpuBackend {
 public:
  using Layer = moe::deepgemm::DeviceLayer;

  static moe::sdk::BackendInfo info() {
    return {
        .name = "deepgemm_style",
        .version = "0.1",
        .description =
            "fp8 128x128 block-scale grouped GEMMs on sm90a (1x128 activations, masked "
            "decode and contiguous prefill layouts)",
        // vLLM's moe_backend spelling for DeepGEMM's grouped GEMMs.
        .aliases = {"deep_gemm"},
        .priority = 60,
        // Above cutlass_mega's decode priority (70, which also takes fp8_block): measured in one
        // run on the H200 (bench/results/2026-12-01_cutlass_mega_fp8_block_grid.jsonl and
        // bench/NOTES.md), this plugin is faster for fp8_block at T = 2-8 on DeepSeek-V3 and
        // T = 4-8 on Mixtral; cutlass_mega wins only on Qwen3-30B-A3B at T <= 4.
        .decode_priority = 75,
        .decode_max_tokens = 8,
        .accumulates = true,  // finalize / the combine adds onto the old output
        .formats = {MOE_FORMAT_FP8_BLOCK},
        .activations = {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP,
                        MOE_ACTIVATION_SWIGLU_OAI, MOE_ACTIVATION_GELU_MUL, MOE_ACTIVATION_RELU2},
        .routings = {MOE_ROUTING_SOFTMAX_TOPK, MOE_ROUTING_SIGMOID_TOPK, MOE_ROUTING_GROUPED_TOPK,
                     MOE_ROUTING_SIGMOID_BIAS_SINK},
        .targets = "sm_90a"};
  }

  Verdict supports(const moe_problem& p) const { return moe::deepgemm::check_support(p); }

  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const {
    return std::make_unique<Layer>(r.problem, r.weights, r.options);
  }

  size_t workspace_size(const Layer& layer, int64_t tokens) const {
    return layer.workspace_size(tokens);
  }

  void run(Layer& layer, const moe_run_args& args) const { layer.run(args); }

  std::string describe_layout(const moe_problem& p) const {
    return moe::deepgemm::describe(p, moe::deepgemm::parse_options({}));
  }
};

}  // namespace

MOE_EXPORT_BACKEND(DeepGemmBackend)
