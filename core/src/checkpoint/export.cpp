// export_layer: canonical weights -> a convention's tensors, the mirror image of load_layer.
// Each convention's writer lives beside its reader (mixtral_source.cpp, ...) and is found by
// name in conventions.cpp; this file keeps what every convention shares: the checks, the prefix
// and the router tensors. Written so that load_layer(export_layer(w)) == w byte for byte.
#include "conventions.hpp"
#include "moe/checkpoint.hpp"
#include "moe/sdk/error.hpp"

namespace moe {
namespace {

std::string substitute_layer(std::string pattern, int64_t layer) {
  const std::string key = "{layer}";
  for (size_t at = pattern.find(key); at != std::string::npos; at = pattern.find(key, at))
    pattern.replace(at, key.size(), std::to_string(layer));
  return pattern;
}

}  // namespace

std::vector<NamedTensor> export_layer(const LayerWeights& w, const moe_problem& p,
                                      const CheckpointSpec& spec, const HostTensor& router_weight,
                                      const HostTensor& routing_bias) {
  const detail::LayerWriter& writer = detail::layer_writer(spec);
  MOE_CHECK(p.ep_placement == MOE_EP_NONE && spec.tp_size == 1, MOE_STATUS_UNSUPPORTED,
            "export_layer writes whole layers: no EP placement, tp_size 1");
  // Refused rather than left out: the file would load as a different layer. Only stacked's and
  // inkling's writers store them.
  MOE_CHECK(p.sink_experts == 0 || writer.sinks, MOE_STATUS_UNSUPPORTED,
            "sink experts are written by the stacked and inkling conventions only");
  MOE_CHECK(p.input_format != MOE_INPUT_FP8_TENSOR_STATIC || writer.static_scales,
            MOE_STATUS_UNSUPPORTED, "static activation scales are written by stacked only");
  std::string prefix = substitute_layer(spec.prefix, spec.layer);
  if (!prefix.empty()) prefix += ".";
  std::vector<NamedTensor> out;
  writer.write({w, p, spec, prefix}, out);
  if (!router_weight.empty()) out.push_back({prefix + writer.router_weight, router_weight});
  if (!routing_bias.empty()) out.push_back({prefix + writer.selection_bias, routing_bias});
  return out;
}

}  // namespace moe
