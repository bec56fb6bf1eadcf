// mixtral: {prefix}.experts.{e}.w1 (gate) / w3 (up) / w2 (down), router {prefix}.gate.weight,
// no shared experts.
#include <memory>

#include "moe/sdk/problem.hpp"
#include "per_projection_source.hpp"

namespace moe::detail {
namespace {

PerProjectionSource::Projections projections(const moe_problem& p) {
  // Without a gate, w1 is the expert's one up projection.
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  return {"w1", gated ? "w3" : "w1", "w2"};
}

void write_mixtral(const ExportedLayer& layer, std::vector<NamedTensor>& out) {
  write_per_projection(layer, out, projections(layer.p), nullptr);
}

}  // namespace

std::unique_ptr<ExpertSource> make_mixtral_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                  const moe_problem& p) {
  return std::make_unique<PerProjectionSource>(ck, spec, p, projections(p));
}

extern const LayerWriter kMixtralWriter = per_projection_writer(write_mixtral);

}  // namespace moe::detail
