// The HF *_proj family: {prefix}.experts.{e}.gate_proj / up_proj / down_proj, router
// {prefix}.gate.weight (+ gate.e_score_correction_bias). Its members differ in where the shared
// expert lives: deepseek's shared_experts.*, qwen_moe's shared_expert.*. Readers and writers.
#include <memory>

#include "moe/sdk/error.hpp"
#include "per_projection_source.hpp"

namespace moe::detail {
namespace {

constexpr PerProjectionSource::Projections kProjections = {"gate_proj", "up_proj", "down_proj"};

struct Family {
  const char* shared;       // the shared expert's projections, "{shared}gate_proj", ...
  const char* shared_gate;  // a per-token shared expert gate we refuse; nullptr: none
};

constexpr Family kDeepseek = {"shared_experts.", nullptr};
constexpr Family kQwenMoe = {"shared_expert.", "shared_expert_gate.weight"};

class HfProjSource final : public PerProjectionSource {
 public:
  HfProjSource(const Checkpoint& ck, const CheckpointSpec& spec, const moe_problem& p,
               Family family)
      : PerProjectionSource(ck, spec, p, kProjections), family_(family) {}

 protected:
  Expert shared_expert(int64_t full) const override {
    if (family_.shared_gate)
      MOE_CHECK(!has_tensor(ctx_, name(family_.shared_gate)), MOE_STATUS_UNSUPPORTED,
                "'{}' gates the shared expert per token with a sigmoid, which the ABI's weight-1 "
                "shared expert does not express",
                name(family_.shared_gate));
    return read_expert(name(family_.shared), kProjections, full);
  }
  const char* shared_names() const override { return family_.shared; }

 private:
  Family family_;
};

}  // namespace

std::unique_ptr<ExpertSource> make_deepseek_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                   const moe_problem& p) {
  return std::make_unique<HfProjSource>(ck, spec, p, kDeepseek);
}

std::unique_ptr<ExpertSource> make_qwen_moe_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                   const moe_problem& p) {
  return std::make_unique<HfProjSource>(ck, spec, p, kQwenMoe);
}

// Canonical weights have no per-token shared expert gate: qwen_moe's shared_expert_gate is never
// written (its reader refuses one).
extern const LayerWriter kDeepseekWriter =
    per_projection_writer([](const ExportedLayer& layer, std::vector<NamedTensor>& out) {
      write_per_projection(layer, out, kProjections, kDeepseek.shared);
    });
extern const LayerWriter kQwenMoeWriter =
    per_projection_writer([](const ExportedLayer& layer, std::vector<NamedTensor>& out) {
      write_per_projection(layer, out, kProjections, kQwenMoe.shared);
    });

}  // namespace moe::detail
