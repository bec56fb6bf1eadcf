// mixtral: {prefix}.experts.{e}.w1 (gate) / w3 (up) / w2 (down), router {prefix}.gate.weight,
// no shared experts.
#include "per_projection_source.hpp"

#include <memory>

#include "moe/sdk/problem.hpp"

namespace moe::detail {

std::unique_ptr<ExpertSource> make_mixtral_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                  const moe_problem& p) {
  // Without a gate, w1 is the expert's one up projection.
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  return std::make_unique<PerProjectionSource>(
      ck, spec, p, PerProjectionSource::Projections{"w1", gated ? "w3" : "w1", "w2"});
}

}  // namespace moe::detail
