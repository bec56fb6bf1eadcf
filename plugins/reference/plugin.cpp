// The reference plugin: the CPU oracle, declared on the SDK's table builder.
#include "host_backend.hpp"

namespace {

class ReferenceBackend : public moe::reference::HostLayerBackend {
 public:
  static moe::sdk::BackendInfo info() {
    moe::sdk::BackendInfo i = every_capability();
    i.name = "reference";
    i.version = "1.0";
    i.description =
        "CPU oracle: exact dequantisation, fp64 accumulation, every format, routing method and "
        "activation";
    i.priority = 0;  // the slowest: auto picks it only when nothing else fits
    return i;
  }

  moe::sdk::Verdict supports(const moe_problem& p) const {
    const moe::sdk::Verdict eplb = refuse_eplb(p, "the reference");
    return eplb.ok() ? moe::sdk::Verdict::yes("every problem is supported") : eplb;
  }

  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const {
    warn_ignored_options(r.options, "the reference");
    return std::make_unique<Layer>(r.problem, r.weights);
  }
};

}  // namespace

MOE_EXPORT_BACKEND(ReferenceBackend)
