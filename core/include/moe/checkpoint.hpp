// Checkpoint adapters: the tensor conventions real MoE checkpoints ship, turned into the
// canonical weights of docs/design.md §3 (plus the router), with tensor-parallel slicing and
// expert-parallel placement. Every refusal names the tensor and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/inputs.hpp"
#include "moe/safetensors.hpp"
#include "moe/safetensors_writer.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/host_tensor.hpp"

namespace moe {

// Where one layer lives in a checkpoint and how its tensors are named.
//   mixtral   {prefix}.experts.{e}.w1/w3/w2.weight, router {prefix}.gate.weight
//   deepseek  {prefix}.experts.{e}.gate_proj/up_proj/down_proj.weight, {prefix}.shared_experts.*,
//             router {prefix}.gate.weight + {prefix}.gate.e_score_correction_bias
//   qwen_moe  as deepseek, shared expert {prefix}.shared_expert.* (no shared_expert_gate)
//   gpt_oss   {prefix}.experts.gate_up_proj [E, H, 2I] (gate/up interleaved columns) + _bias,
//             {prefix}.experts.down_proj [E, I, H] + _bias; MXFP4: *_blocks / *_scales;
//             router {prefix}.router.weight + .bias (added to the logits)
//   stacked   {prefix}.w13 [E, 2I, H], {prefix}.w2 [E, H, I] and the other moe_weights names
//             (w13_scale, w13_scale_2, b13, ..., sink_w13), router {prefix}.router.weight
//   inkling   {prefix}.experts.w13_weight [E, 2I, H] (gate/up interleaved rows), .w2_weight,
//             sinks {prefix}.shared_experts.shared_w13_weight / shared_w2_weight, router
//             {prefix}.gate.weight [E+S, H] + gate.bias (selection) + gate.global_scale
// Per projection, by format: .weight, then .weight_scale (fp8_tensor f32 scalar, mx ue8m0,
// nvfp4 e4m3) or .weight_scale_inv (fp8_block), .weight_scale_2 (nvfp4), .input_scale or
// .input_amax (static activation scales).
struct CheckpointSpec {
  std::string path;        // a .safetensors file, a model.safetensors.index.json, or a directory
  std::string convention;  // mixtral | deepseek | qwen_moe | gpt_oss | stacked | inkling
  std::string prefix;      // may contain {layer}
  int64_t layer = 0;
  bool interleaved_gate_up = false;  // stacked/deepseek fused rows [g0, u0, g1, u1, ...]
  int32_t tp_size = 1;               // tensor parallel: this rank keeps slab tp_rank of I
  int32_t tp_rank = 0;
  RouterDtype router_dtype = RouterDtype::kBf16;  // precision of the router GEMM (router_logits)
};

const std::vector<std::string>& checkpoint_conventions();

// Expert weights stored as F32, F16 or BF16 where the problem's format stores something else are
// converted at load (docs/design.md §3.4): rounded to nearest even into bf16, or quantised into
// the other formats with the rules of §3.2. One line per (stored dtype, result).
struct CheckpointConversion {
  std::string from;     // the stored dtype as the file spells it: "F32", "F16", "BF16"
  std::string to;       // a format's name ("bf16", "fp8_block", ...)
  int64_t tensors = 0;  // checkpoint tensors converted
};

// "12 F32 tensors -> bf16 (rounded to nearest even); ..." ("F32 expert weights -> bf16 (...)"
// without counts); "" when nothing was converted.
std::string describe_conversions(const std::vector<CheckpointConversion>& conversions,
                                 bool counts = true);

// One layer, ready for a plugin: canonical weights of this rank's experts and the router.
struct LayerCheckpoint {
  LayerWeights weights;
  HostTensor router_weight;  // [E_real + S, H] bf16 or f32; empty when the checkpoint has none
  HostTensor router_bias;    // [E_real + S] f32, added to the logits (gpt-oss); may be empty
  HostTensor routing_bias;   // [E] f32 selection bias (padding experts -inf); may be empty
  int64_t real_experts = 0;  // experts in the checkpoint; problem.experts may be padded for EP
  std::vector<CheckpointConversion> conversions;  // what was converted at load; empty: nothing
};

// Loads the layer the problem describes. The problem's sizes are the per-rank ones: with TP,
// intermediate = checkpoint I / tp_size; with EP, experts = checkpoint E rounded up to a
// multiple of ep_size, and the weights hold the local experts (padding experts zero).
LayerCheckpoint load_layer(const Checkpoint& checkpoint, const CheckpointSpec& spec,
                           const moe_problem& problem);

// What load_layer would convert, read off the first expert, the shared expert and the sinks
// without loading the layer (moe describe); the counts are of those tensors only.
std::vector<CheckpointConversion> preview_conversions(const Checkpoint& checkpoint,
                                                      const CheckpointSpec& spec,
                                                      const moe_problem& problem);

// The inverse of load_layer for a whole layer (no TP or EP): canonical weights written out under
// a convention's tensor names, with the router tensors when given (empty = absent). The
// conformance suite and the tests round-trip weights through it to prove the adapters.
std::vector<NamedTensor> export_layer(const LayerWeights& weights, const moe_problem& problem,
                                      const CheckpointSpec& spec, const HostTensor& router_weight,
                                      const HostTensor& routing_bias);

// Router logits [T, E + S] f32 of hidden states [T, H] (bf16, or f32 as --inputs may give them):
// both operands in `dtype`'s precision, fp32 sums, + router bias as stored (docs/design.md §3.4);
// padding experts get -inf so they are never routed. Throws when the layer has no router.
HostTensor router_logits(const LayerCheckpoint& layer, const moe_problem& problem,
                         const HostTensor& hidden, RouterDtype dtype = RouterDtype::kBf16);

// input_scale of a static fp4 activation from its calibrated amax: amax / (448 * 6).
float input_scale_from_amax(float amax, const std::string& tensor);

// NVFP4 gate/up with different global scales: multiplies the up half's e4m3 block scales by
// up_s2 / gate_s2 so one scale_2 (gate_s2) serves both, only when every product is exactly an
// e4m3 value; otherwise throws saying so. Both scales must be > 0.
void fold_nvfp4_up_scales(uint8_t* up_scales, int64_t count, float gate_s2, float up_s2,
                          const std::string& where);

}  // namespace moe
