// What the reference and the GPU oracle share as backends: the layer is a moe::reference::Layer
// on host tensors (the oracle swaps its GEMMs), routing is the reference's on the host, options
// are logged and ignored, and EPLB replicas are refused. Each plugin's plugin.cpp derives its
// declaration from this.
#pragma once

#include <cstdint>
#include <memory>

#include "moe/sdk/backend.hpp"
#include "moe/sdk/format_table.hpp"
#include "reference_layer.hpp"
#include "routing.hpp"

namespace moe::reference {

class HostLayerBackend {
 public:
  using Layer = reference::Layer;

  // Every format, activation and routing method this build knows, and accumulate: the
  // reference's switches have no default, so a value added to the ABI fails to compile here until
  // it is implemented.
  static sdk::BackendInfo every_capability() {
    sdk::BackendInfo info;
    for (const FormatSpec& f : format_table()) info.formats.push_back(f.format);
    info.activations = known_activations();
    info.routings = known_routings();
    info.accumulates = true;  // Layer::run adds onto the old output in fp64
    return info;
  }

  // Host scratch comes from the heap (the oracle: grow-only device buffers), so no workspace,
  // and these layers never run in a CUDA graph.
  void run(Layer& layer, const moe_run_args& args) const { layer.run(args); }

  // The reference's routing on the host, bit for bit.
  void route(const moe_problem& p, const moe_route_args& a, int64_t tokens) const {
    reference::route(
        p, tokens, static_cast<const float*>(a.logits.data), static_cast<const float*>(a.bias.data),
        static_cast<const uint8_t*>(a.is_padding.data), static_cast<int32_t*>(a.topk_ids.data),
        static_cast<float*>(a.topk_weights.data));
  }

 protected:
  static sdk::Verdict refuse_eplb(const moe_problem& p, const char* who) {
    if (p.redundant_experts > 0)
      return sdk::Verdict::no(
          MOE_REASON_EP, fmt::format("redundant experts (EPLB) are not implemented by {}", who));
    return sdk::Verdict::yes();
  }

  static void warn_ignored_options(const Options& options, const char* who) {
    for (const auto& [key, value] : options)
      sdk::logf(MOE_LOG_WARN, "option '{}' is ignored: {} takes no options", key, who);
  }
};

}  // namespace moe::reference
