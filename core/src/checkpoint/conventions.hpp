// The tensor names of each checkpoint convention, behind one interface: whatever the file
// looks like, an ExpertSource hands out one expert's gate / up / down at checkpoint size, and a
// LayerWriter writes canonical weights back under those names (export_layer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "matrix.hpp"
#include "moe/checkpoint.hpp"

namespace moe::detail {

// One expert at checkpoint size (before TP slicing). Non-gated activations use `up` alone.
struct Expert {
  Matrix gate, up, down;
  std::vector<float> b_gate, b_up, b_down;  // empty without biases
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  virtual int64_t count_experts() const = 0;
  // (hidden, intermediate) of the routed experts as stored, read off the down projection.
  virtual std::pair<int64_t, int64_t> checkpoint_sizes() const = 0;
  virtual Expert expert(int64_t global_id) const = 0;
  // The weight-1 shared expert at checkpoint size (full_intermediate = per-rank size * tp).
  virtual std::optional<Expert> shared(int64_t full_intermediate) const = 0;
  // Static activation scales (a13, a2) for fp8_tensor_static: the max over experts.
  virtual std::pair<float, float> activation_scales(int64_t experts) const = 0;
  // Router weight / bias and the selection bias (padding experts -inf) into `out`.
  virtual void router(LayerCheckpoint& out, int64_t real_experts) const = 0;
  virtual void sinks(LayerWeights& w) const = 0;
  // Refuses a checkpoint that stores sink experts the problem leaves out (sink_experts: 0): the
  // layer would load without them, every token's output short of their part.
  virtual void check_no_sinks() const = 0;
  // The tensors converted at load so far (expert weights stored as F32 / F16 / BF16, see
  // converted_at_load), with their stored dtype and what they became.
  virtual const Conversions& conversions() const = 0;
};

// The source of spec.convention (conventions.cpp lists them); CONFIG_ERROR for another name.
std::unique_ptr<ExpertSource> make_expert_source(const Checkpoint& checkpoint,
                                                 const CheckpointSpec& spec,
                                                 const moe_problem& problem);

// What export_layer hands a convention's writer: a whole layer (no TP or EP) and the prefix of
// its tensor names, {layer} substituted ("" or ending in ".").
struct ExportedLayer {
  const LayerWeights& w;
  const moe_problem& p;
  const CheckpointSpec& spec;
  const std::string& prefix;
};

// A convention's writer, the inverse of its ExpertSource, defined in the same file.
struct LayerWriter {
  // Appends the routed and shared experts' tensors; refuses what the convention cannot store
  // rather than writing a file its reader would misread.
  void (*write)(const ExportedLayer& layer, std::vector<NamedTensor>& out);
  // The router tensors, relative to the prefix: export_layer appends them after the experts.
  const char* router_weight;
  const char* selection_bias;
  // Whether `write` stores sink experts / static activation scales. false: export_layer refuses
  // a problem that has them, so that a new convention cannot drop them silently.
  bool sinks = false;
  bool static_scales = false;
};

// The writer of spec.convention; the same CONFIG_ERROR as make_expert_source for another name.
const LayerWriter& layer_writer(const CheckpointSpec& spec);

}  // namespace moe::detail
