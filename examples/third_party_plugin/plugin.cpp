// example_cpu: a complete third-party backend on the moe-registry SDK. The math is in
// example_moe.cpp; this file declares the backend, and the SDK builds the C function table, the
// exported symbol and every argument check from the declaration.
#include "example_moe.hpp"
#include "moe/sdk/backend.hpp"

namespace {

class ExampleBackend {
 public:
  using Layer = example::Layer;

  static moe::sdk::BackendInfo info() {
    return {.name = "example_cpu",
            .version = "0.1",
            .description = "example third-party backend: bf16 on the CPU, fp32 accumulation",
            .aliases = {"example"},
            .priority = 10,
            .formats = {MOE_FORMAT_BF16},
            .activations = {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_GELU_MUL},
            .routings = {MOE_ROUTING_SOFTMAX_TOPK, MOE_ROUTING_SIGMOID_TOPK}};
  }

  // What the lists above cannot say (the SDK refuses other formats and activations itself).
  moe::sdk::Verdict supports(const moe_problem& p) const { return example::check_support(p); }

  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const {
    return std::make_unique<Layer>(r.problem, r.weights);
  }

  void run(Layer& layer, const moe_run_args& args) const { layer.run(args); }

  void route(const moe_problem& p, const moe_route_args& args, int64_t) const {
    example::route(p, args);
  }
};

}  // namespace

MOE_EXPORT_BACKEND(ExampleBackend)
