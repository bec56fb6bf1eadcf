// What every convention's ExpertSource shares: tensor names under the layer's prefix, cached
// reads of stacked tensors, and the router, read under names the convention supplies.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "conventions.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::detail {

// Values of an F32, BF16 or F16 tensor.
std::vector<float> to_floats(const HostTensor& t);

class SourceBase : public ExpertSource {
 public:
  SourceBase(const Checkpoint& ck, const CheckpointSpec& spec, const moe_problem& p);

  // full == 0 means the problem has no shared expert (refused where the checkpoint stores one);
  // otherwise shared_expert() reads it.
  std::optional<Expert> shared(int64_t full_intermediate) const final;
  void check_no_sinks() const final;
  void router(LayerCheckpoint& out, int64_t real_experts) const override;
  // Refuses: only the stacked and inkling conventions store sink experts.
  void sinks(LayerWeights& w) const override;
  const Conversions& conversions() const final { return converted_; }

 protected:
  // Router tensors relative to the prefix; an absent router is allowed unless `weight_required`.
  struct RouterNames {
    const char* weight;
    bool weight_required;
    const char* bias;            // added to the logits; nullptr: the convention has none
    const char* selection_bias;  // needs problem.routing_bias, and the other way round
  };
  virtual RouterNames router_names() const = 0;
  // Refuses: the convention has no shared experts.
  virtual Expert shared_expert(int64_t full_intermediate) const;
  // Where the convention stores a shared expert and sink experts: the start of their tensors'
  // names under the prefix ("shared_experts.", ...); nullptr: it stores none.
  virtual const char* shared_names() const { return nullptr; }
  virtual const char* sink_names() const { return nullptr; }
  // The first tensor of the checkpoint whose name starts with `start` under the prefix; "" if none
  // (or `start` is nullptr).
  std::string first_tensor_named(const char* start) const;

  std::string name(const std::string& suffix) const {
    return prefix_.empty() ? suffix : prefix_ + "." + suffix;
  }
  // Dimension 0 (the experts) of tensor `suffix`.
  int64_t leading_dim(const std::string& suffix) const;
  // The shape of tensor `suffix`, checked to have `dims` dimensions.
  const std::vector<int64_t>& shape_of(const std::string& suffix, size_t dims) const;
  // A [count] vector, bf16 or f32 in the file, as f32.
  HostTensor f32_vector(const std::string& n, int64_t count) const;
  // A tensor of values stored as F32, BF16 or F16 (biases; to_floats reads any of them), cached.
  const HostTensor& cached_values(const std::string& n, std::vector<int64_t> shape) const;
  // read_tensor, once per name: a stack serves every expert of the layer.
  const HostTensor& cached(const std::string& n, moe_dtype dtype, std::vector<int64_t> shape,
                           moe_dtype alt = MOE_DTYPE_INVALID) const;
  // The scales `n` of `experts` matrices laid out as `l`, bytes as stored (`raw`, or `alt`):
  // [E, scale_rows, scale_cols], or flat [E * scale_rows, scale_cols] as Quark stores them, the
  // expert dimension restored here (refused naming `n` when E does not divide the rows).
  // experts == 0: one unstacked matrix's [scale_rows, scale_cols].
  const HostTensor& scale_stack(const std::string& n, moe_dtype raw, moe_dtype alt, int64_t experts,
                                const MatrixLayout& l) const;
  // Matrix `e` of a stacked [E, rows, cols] tensor as a [rows, cols] HostTensor.
  static HostTensor slot(const HostTensor& stack, int64_t e, std::vector<int64_t> shape);
  // The stored dtype of tensor `q` (INVALID when absent: the read names it).
  moe_dtype dtype_of(const std::string& q) const {
    const auto* e = ctx_.checkpoint.find(name(q));
    return e ? e->dtype : MOE_DTYPE_INVALID;
  }
  // Sink weights `q` of `shape`, always bf16: F32 and F16 ones are rounded to nearest even.
  HostTensor bf16_weights(const std::string& q, std::vector<int64_t> shape) const;
  // Sink stack `q` [count, 2 * half_rows, cols] (bf16) stored with interleaved gate/up rows
  // [g0, u0, g1, u1, ...], turned into halves [gate; up] in place.
  void deinterleave_sinks(HostTensor& stack, int64_t count, int64_t half_rows, int64_t cols,
                          const std::string& q) const;

  mutable Conversions converted_;  // before ctx_, which points at it
  const NameContext ctx_;
  const CheckpointSpec& spec_;
  const moe_problem& p_;
  const moe_format format_;
  const bool gated_;
  const int64_t full_i_;  // the routed experts' intermediate size at checkpoint size

 private:
  const std::string prefix_;
  mutable std::map<std::string, HostTensor> cache_;
};

}  // namespace moe::detail
