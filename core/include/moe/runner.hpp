// Running a plugin from host data: moves tensors into the plugin's memory (device for CUDA
// plugins), calls route / run with caller-owned workspace, and brings results back.
#pragma once

#include <cstdint>

#include "moe/inputs.hpp"
#include "moe/plugin.hpp"
#include "moe/sdk/host_tensor.hpp"

namespace moe {

struct Routing {
  HostTensor ids;      // [T, k + S] i32
  HostTensor weights;  // [T, k + S] f32
};

// Routes `batch` with `plugin` (which must be able to route the problem's method).
Routing route_batch(const Plugin& plugin, const moe_problem& problem, const Batch& batch);

// The global id of this rank's last local expert: the one conformance's `one_expert` scenario
// sends every token to.
int32_t last_local_expert(const moe_problem& problem);

// Every token to `expert` (global id) with weight 1; other routed slots -1, sink slots as routed.
Routing one_expert_routing(const moe_problem& problem, const Routing& routed, int32_t expert);

// The routing a conformance scenario runs on: `plugin`'s routing of the batch, and for kOneExpert
// every token on the last local expert (one_expert_routing).
Routing scenario_routing(const Plugin& plugin, const moe_problem& problem, const Batch& batch,
                         Scenario scenario);

struct RunResult {
  HostTensor output;  // [T, H] of the requested dtype
  double ms = 0;      // wall time of run + stream sync
};

// One run's tensors and workspace in the plugin's memory, alive as long as this object, with
// the moe_run_args that point at them (for repeated runs: benchmarks). The output is poisoned
// (all bytes 0xFF) so a row the plugin does not write shows up.
struct StagedRun {
  Buffer hidden, ids, weights, output, workspace;
  moe_run_args args{};
  Buffer logits, bias, padding;  // a run that routes (stage_routing_run): its routing inputs
};
StagedRun stage_run(const Layer& layer, const moe_problem& problem, const HostTensor& hidden,
                    const Routing& routing, moe_dtype output_dtype = MOE_DTYPE_BF16);

// Runs one batch. The output is poisoned (all bytes 0xFF: NaN in every float type) first, so a
// row the plugin does not write shows up.
RunResult run_layer(const Layer& layer, const moe_problem& problem, const HostTensor& hidden,
                    const Routing& routing, moe_dtype output_dtype = MOE_DTYPE_BF16);

// Runs one batch with moe_run_args.accumulate (ABI 1.4): the output starts as `base` ([T, H], the
// output's dtype) and the layer adds its result onto it. The plugin must declare the feature
// (Plugin::Info::accumulates), else the core refuses the run.
RunResult run_layer_onto(const Layer& layer, const moe_problem& problem, const HostTensor& hidden,
                         const Routing& routing, const HostTensor& base);

// A run that routes (ABI 1.6, Plugin::Info::routes_in_run): `batch`'s logits, selection bias and
// padding staged as moe_run_args.router_logits, routing_bias and is_padding; topk_ids and
// topk_weights are outputs, poisoned like the output (an id of -1 and NaN weights where the
// plugin writes nothing).
StagedRun stage_routing_run(const Layer& layer, const moe_problem& problem, const Batch& batch,
                            moe_dtype output_dtype = MOE_DTYPE_BF16);

// Runs one batch from its router logits in one call (stage_routing_run); `routed`, when given,
// receives the topk ids and weights the plugin wrote.
RunResult run_layer_routing(const Layer& layer, const moe_problem& problem, const Batch& batch,
                            Routing* routed = nullptr, moe_dtype output_dtype = MOE_DTYPE_BF16);

}  // namespace moe
