// The trtllm_style plugin: TensorRT-LLM weight layouts read by CUTLASS sm90 grouped GEMMs, the
// weight-only formats (and bf16 layers of few rows an expert) on common_cuda's weight-only GEMM,
// declared on the SDK's table builder.
#include "moe/sdk/backend.hpp"
#include "moe_cuda/gpu_backend.hpp"
#include "src/trtllm_layer.hpp"

namespace {

using moe::sdk::Verdict;

class TrtllmBackend : public moe::gpu::GpuBackend {
 public:
  using Layer = moe::trtllm::DeviceLayer;

  static moe::sdk::BackendInfo info() {
    return {
        .name = "trtllm_style",
        .version = "0.1",
        .description =
            "TensorRT-LLM weight layouts (w31, gated interleave) read by CUTLASS "
            "sm90 grouped GEMMs; mxfp4, nvfp4, mxfp8 and small bf16 and fp8_tensor layers on a "
            "weight-only grouped GEMM of its own",
        // vLLM's moe_backend spellings for FlashInfer's TensorRT-LLM kernels.
        .aliases = {"flashinfer_trtllm", "flashinfer_cutlass"},
        .priority = 50,
        .accumulates = true,  // finalize / the combine adds onto the old output
        .formats = {MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP4,
                    MOE_FORMAT_MXFP8, MOE_FORMAT_NVFP4},
        .activations = {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP,
                        MOE_ACTIVATION_SWIGLU_OAI, MOE_ACTIVATION_GELU_MUL, MOE_ACTIVATION_RELU2},
        .routings = {MOE_ROUTING_SOFTMAX_TOPK, MOE_ROUTING_SIGMOID_TOPK, MOE_ROUTING_GROUPED_TOPK,
                     MOE_ROUTING_SIGMOID_BIAS_SINK},
        .targets = "sm_90a"};
  }

  Verdict supports(const moe_problem& p) const {
    const moe::trtllm::Refusal r = moe::trtllm::check_support(p);
    return {r.reason, r.message};
  }

  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const {
    return std::make_unique<Layer>(r.problem, r.weights, r.options);
  }

  size_t workspace_size(const Layer& layer, int64_t tokens) const {
    return layer.workspace_size(tokens);
  }

  void run(Layer& layer, const moe_run_args& args) const { layer.run(args); }

  std::string describe_layout(const moe_problem& p) const {
    // Without options: bf16_gemm and fp8_gemm auto's choice.
    if (moe::trtllm::is_weight_only(p) || moe::trtllm::auto_own_bf16(p, false, false) ||
        moe::trtllm::auto_own_fp8(p, false, false))
      return moe::trtllm::describe_weight_only_layout(p);
    const auto plan = moe::trtllm::plan_layout(moe::trtllm::layer_shape(p), p.expert_bias != 0,
                                               moe::trtllm::layout_options(p, {}));
    std::string d = moe::trtllm::describe(plan);
    const bool gated = moe::is_gated(static_cast<moe_activation>(p.activation));
    const int64_t n1 = (gated ? 2 : 1) * plan.padded_intermediate;
    if (moe::trtllm::own_gemm_in_place(p, n1, false))
      d += fmt::format(
          "per batch (bf16_gemm: auto): a batch of at most {} rows an expert on average{} runs "
          "the weight-only GEMM on these weights in place (w13's interleaved up and gate rows "
          "read as its gate/up pairs by TMA, w2's rows as they are), a larger one CUTLASS's "
          "GEMMs\n",
          moe::trtllm::own_gemm_most_rows(p),
          p.hidden >= 4096 ? fmt::format(" but for 1 to {}", moe::trtllm::kInPlaceLosesRows)
                           : std::string());
    if (p.format == MOE_FORMAT_FP8_BLOCK && p.sink_experts > 0)
      d += fmt::format(
          "{} sink experts (bf16, silu_mul, I={}) apart: cuBLAS GEMMs on every token, each result "
          "into its sink slot's GEMM2 row, weighed by the combine like the others (the gather, "
          "the e4m3 GEMMs and the activation skip their groups)\n",
          p.sink_experts, p.sink_intermediate);
    return d;
  }
};

}  // namespace

MOE_EXPORT_BACKEND(TrtllmBackend)
