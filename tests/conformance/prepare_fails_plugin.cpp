// A backend that says yes to bf16 silu_mul softmax problems and then fails in prepare(): the
// suite must record the failure as an error of stage "prepare" (not "support") and go on.
#include <stdexcept>

#include "moe/sdk/backend.hpp"

namespace {

struct NoLayer {};

class PrepareFails {
 public:
  using Layer = NoLayer;

  static moe::sdk::BackendInfo info() {
    return {.name = "conformance_prepare_fails",
            .version = "test",
            .description = "test plugin: prepare() always throws",
            .formats = {MOE_FORMAT_BF16},
            .activations = {MOE_ACTIVATION_SILU_MUL},
            .routings = {}};
  }
  moe::sdk::Verdict supports(const moe_problem&) const { return moe::sdk::Verdict::yes(); }
  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest&) const {
    throw std::runtime_error("deliberate failure in prepare");
  }
  void run(Layer&, const moe_run_args&) const {}
};

}  // namespace

MOE_EXPORT_BACKEND(PrepareFails)
