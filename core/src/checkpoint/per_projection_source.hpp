// Conventions that store each projection of each expert as its own tensor,
// {prefix}.experts.{e}.{gate|up|down}.weight with its scales (mixtral's w1/w3/w2, HF's *_proj):
// their reader, and their writer for export_layer.
#pragma once

#include "source_base.hpp"

namespace moe::detail {

class PerProjectionSource : public SourceBase {
 public:
  // The router, relative to the prefix (read here, written by per_projection_writer).
  static constexpr const char* kRouterWeight = "gate.weight";
  static constexpr const char* kSelectionBias = "gate.e_score_correction_bias";

  struct Projections {
    const char* gate;
    const char* up;  // for a non-gated activation: the expert's one up projection
    const char* down;
  };

  PerProjectionSource(const Checkpoint& ck, const CheckpointSpec& spec, const moe_problem& p,
                      Projections names)
      : SourceBase(ck, spec, p), names_(names) {}

  int64_t count_experts() const override;
  std::pair<int64_t, int64_t> checkpoint_sizes() const override;
  Expert expert(int64_t e) const override;
  // Static activation scales (fp8_tensor_static): max over experts, as serving engines do.
  std::pair<float, float> activation_scales(int64_t experts) const override;

 protected:
  // The router `gate.weight` with the selection bias `gate.e_score_correction_bias`.
  RouterNames router_names() const override;
  // The projections `base`{gate, up, down} of `names` at intermediate size `inter`.
  Expert read_expert(const std::string& base, const Projections& names, int64_t inter) const;

 private:
  float input_scale(const std::string& base) const;

  Projections names_;
};

// The inverse of PerProjectionSource: routed experts as experts.{e}.{gate, up, down}, the shared
// expert as `shared`{gate, up, down} (nullptr: the convention has none and refuses one).
void write_per_projection(const ExportedLayer& layer, std::vector<NamedTensor>& out,
                          const PerProjectionSource::Projections& names, const char* shared);

// The router under the names PerProjectionSource reads; no sinks or static activation scales.
constexpr LayerWriter per_projection_writer(void (*write)(const ExportedLayer&,
                                                          std::vector<NamedTensor>&)) {
  return {write, PerProjectionSource::kRouterWeight, PerProjectionSource::kSelectionBias};
}

}  // namespace moe::detail
