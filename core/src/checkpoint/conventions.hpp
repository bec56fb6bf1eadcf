// The tensor names of each checkpoint convention, behind one interface: whatever the file
// looks like, an ExpertSource hands out one expert's gate / up / down at checkpoint size.
#pragma once

#include <memory>
#include <optional>
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
};

// The source of spec.convention (conventions.cpp lists them); CONFIG_ERROR for another name.
std::unique_ptr<ExpertSource> make_expert_source(const Checkpoint& checkpoint,
                                                 const CheckpointSpec& spec,
                                                 const moe_problem& problem);

}  // namespace moe::detail
