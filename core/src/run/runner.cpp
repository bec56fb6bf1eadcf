#include "moe/runner.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe {
namespace {

// A tensor's bytes in the plugin's memory; for host plugins a plain copy.
struct Staged {
  Buffer buffer;
  moe_tensor view{};
};

// An input: what the plugin only reads. What it writes goes through stage_guarded.
Staged stage(const Plugin& plugin, const HostTensor& t) {
  Staged s{Buffer(plugin.shared_from_this(), t.bytes()), t.view()};
  s.buffer.upload(t.raw(), t.bytes());
  s.view.data = s.buffer.data();
  return s;
}

// Bytes after each tensor a plugin writes (a run's output, a routing's ids and weights), set to a
// pattern before the call and checked after it: a plugin that writes past its rows is named,
// where before it corrupted the heap (a crash, no report) or nothing that showed.
// At least a whole row (one row too many is the likely slip) and 256 bytes.
constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

size_t guard_bytes(const HostTensor& t) {
  size_t row = dtype_size(t.dtype());
  for (size_t d = 1; d < t.shape().size(); ++d) row *= size_t(t.shape()[d]);
  return std::max(kGuardBytes, row);
}

Staged stage_guarded(const Plugin& plugin, const HostTensor& t) {
  std::vector<uint8_t> host(t.bytes() + guard_bytes(t), kGuardByte);
  if (t.bytes() > 0) std::memcpy(host.data(), t.raw(), t.bytes());
  Staged s{Buffer(plugin.shared_from_this(), host.size()), t.view()};
  s.buffer.upload(host.data(), host.size());
  s.view.data = s.buffer.data();
  return s;
}

// `out`'s bytes from a guarded buffer, its guard checked.
void download_guarded(const Plugin& plugin, const Buffer& b, HostTensor& out, const char* what) {
  std::vector<uint8_t> host(out.bytes() + guard_bytes(out));
  b.download(host.data(), host.size());
  if (out.bytes() > 0) std::memcpy(out.raw(), host.data(), out.bytes());
  for (size_t i = 0; i < host.size() - out.bytes(); ++i)
    MOE_CHECK(host[out.bytes() + i] == kGuardByte, MOE_STATUS_INTERNAL,
              "plugin '{}' wrote past the end of {} ([{}] {}, {} bytes): byte {} after it changed",
              plugin.name(), what, fmt::join(out.shape(), ", "), dtype_name(out.dtype()),
              out.bytes(), i);
}

}  // namespace

Routing route_batch(const Plugin& plugin, const moe_problem& p, const Batch& batch) {
  MOE_CHECK(plugin.can_route(p), MOE_STATUS_UNSUPPORTED, "plugin '{}' does not route {}",
            plugin.name(), routing_name(static_cast<moe_routing>(p.routing)));
  const int64_t tokens = batch.hidden.shape()[0], width = topk_width(p);
  Routing r{HostTensor(MOE_DTYPE_I32, {tokens, width}), HostTensor(MOE_DTYPE_F32, {tokens, width})};
  // Poisoned: a weight the plugin leaves unwritten is NaN, where zeros passed for a padding
  // token's; an id it leaves unwritten is -1 (no expert: a later run skips it safely, and the
  // reference's id, or its NaN weight beside a padding token's -1, tells it apart).
  r.ids.fill_bytes(0xFF);
  r.weights.fill_bytes(0xFF);
  auto logits = stage(plugin, batch.logits);
  Staged bias, padding;
  if (!batch.bias.empty()) bias = stage(plugin, batch.bias);
  if (!batch.is_padding.empty()) padding = stage(plugin, batch.is_padding);
  auto ids = stage_guarded(plugin, r.ids), weights = stage_guarded(plugin, r.weights);
  const size_t ws_bytes = plugin.route_workspace_size(p, tokens);
  Buffer ws(plugin.shared_from_this(), ws_bytes);

  moe_route_args args{};
  args.problem = &p;
  args.logits = logits.view;
  args.bias = bias.view;
  args.is_padding = padding.view;
  args.topk_ids = ids.view;
  args.topk_weights = weights.view;
  args.workspace = ws_bytes ? ws.data() : nullptr;
  args.workspace_size = ws_bytes;
  plugin.route(args);
  plugin.sync();
  download_guarded(plugin, ids.buffer, r.ids, "the routing's topk_ids");
  download_guarded(plugin, weights.buffer, r.weights, "the routing's topk_weights");
  return r;
}

int32_t last_local_expert(const moe_problem& p) {
  for (int64_t e = p.experts - 1; e >= 0; --e)
    if (local_expert_id(p, e) >= 0) return static_cast<int32_t>(e);
  return 0;
}

Routing one_expert_routing(const moe_problem& p, const Routing& routed, int32_t expert) {
  Routing r = routed;
  const int64_t tokens = r.ids.shape()[0], width = topk_width(p);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < p.top_k; ++j) {
      r.ids.data<int32_t>()[t * width + j] = j == 0 ? expert : -1;
      r.weights.data<float>()[t * width + j] = j == 0 ? 1.0f : 0.0f;
    }
  }
  return r;
}

Routing scenario_routing(const Plugin& plugin, const moe_problem& p, const Batch& batch,
                         Scenario scenario) {
  const Routing routed = route_batch(plugin, p, batch);
  return scenario == Scenario::kOneExpert ? one_expert_routing(p, routed, last_local_expert(p))
                                          : routed;
}

StagedRun stage_run(const Layer& layer, const moe_problem& p, const HostTensor& hidden,
                    const Routing& routing, moe_dtype output_dtype) {
  const Plugin& plugin = layer.plugin();
  const int64_t tokens = hidden.shape()[0];
  HostTensor poison(output_dtype, {tokens, p.hidden});
  poison.fill_bytes(0xFF);
  // ids and weights guarded too: a run that routes (stage_routing_run) writes them.
  auto x = stage(plugin, hidden), ids = stage_guarded(plugin, routing.ids);
  auto weights = stage_guarded(plugin, routing.weights), out = stage_guarded(plugin, poison);
  const size_t ws_bytes = layer.workspace_size(tokens);
  StagedRun r{std::move(x.buffer),
              std::move(ids.buffer),
              std::move(weights.buffer),
              std::move(out.buffer),
              Buffer(plugin.shared_from_this(), ws_bytes),
              {}};
  r.args.struct_size = sizeof(r.args);
  r.args.layer = layer.get();
  r.args.hidden = x.view;
  r.args.topk_ids = ids.view;
  r.args.topk_weights = weights.view;
  r.args.output = out.view;
  r.args.workspace = ws_bytes ? r.workspace.data() : nullptr;
  r.args.workspace_size = ws_bytes;
  return r;
}

namespace {

// Runs the staged call once, synchronised and wall-timed, and downloads the output [T, H].
RunResult timed_run(const Layer& layer, const StagedRun& staged, moe_dtype dtype,
                    std::vector<int64_t> shape) {
  RunResult result{HostTensor(dtype, std::move(shape)), 0};
  const auto start = std::chrono::steady_clock::now();
  layer.run(staged.args);
  layer.plugin().sync();
  result.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  download_guarded(layer.plugin(), staged.output, result.output, "the output");
  return result;
}

}  // namespace

RunResult run_layer(const Layer& layer, const moe_problem& p, const HostTensor& hidden,
                    const Routing& routing, moe_dtype output_dtype) {
  const StagedRun staged = stage_run(layer, p, hidden, routing, output_dtype);
  return timed_run(layer, staged, output_dtype, {hidden.shape()[0], p.hidden});
}

RunResult run_layer_onto(const Layer& layer, const moe_problem& p, const HostTensor& hidden,
                         const Routing& routing, const HostTensor& base) {
  MOE_CHECK(base.shape() == std::vector<int64_t>({hidden.shape()[0], p.hidden}),
            MOE_STATUS_INVALID_ARGUMENT, "the accumulate base must be [T={}, H={}]",
            hidden.shape()[0], p.hidden);
  StagedRun staged = stage_run(layer, p, hidden, routing, base.dtype());
  staged.output.upload(base.raw(), base.bytes());
  staged.args.accumulate = 1;
  return timed_run(layer, staged, base.dtype(), base.shape());
}

StagedRun stage_routing_run(const Layer& layer, const moe_problem& p, const Batch& batch,
                            moe_dtype output_dtype) {
  const Plugin& plugin = layer.plugin();
  const int64_t tokens = batch.hidden.shape()[0], width = topk_width(p);
  MOE_CHECK(batch.logits.shape()[0] == tokens, MOE_STATUS_INVALID_ARGUMENT,
            "the batch has {} rows of logits for {} tokens", batch.logits.shape()[0], tokens);
  HostTensor ids(MOE_DTYPE_I32, {tokens, width}), weights(MOE_DTYPE_F32, {tokens, width});
  ids.fill_bytes(0xFF);  // -1: a slot the routing does not write reads as "no expert"
  weights.fill_bytes(0xFF);
  StagedRun r =
      stage_run(layer, p, batch.hidden, Routing{std::move(ids), std::move(weights)}, output_dtype);
  auto logits = stage(plugin, batch.logits);
  r.logits = std::move(logits.buffer);
  r.args.router_logits = logits.view;
  if (!batch.bias.empty()) {
    auto bias = stage(plugin, batch.bias);
    r.bias = std::move(bias.buffer);
    r.args.routing_bias = bias.view;
  }
  if (!batch.is_padding.empty()) {
    auto padding = stage(plugin, batch.is_padding);
    r.padding = std::move(padding.buffer);
    r.args.is_padding = padding.view;
  }
  return r;
}

RunResult run_layer_routing(const Layer& layer, const moe_problem& p, const Batch& batch,
                            Routing* routed, moe_dtype output_dtype) {
  const StagedRun staged = stage_routing_run(layer, p, batch, output_dtype);
  RunResult result = timed_run(layer, staged, output_dtype, {batch.hidden.shape()[0], p.hidden});
  if (routed != nullptr) {
    const int64_t tokens = batch.hidden.shape()[0], width = topk_width(p);
    *routed = Routing{HostTensor(MOE_DTYPE_I32, {tokens, width}),
                      HostTensor(MOE_DTYPE_F32, {tokens, width})};
    download_guarded(layer.plugin(), staged.ids, routed->ids, "the run's routed topk_ids");
    download_guarded(layer.plugin(), staged.weights, routed->weights,
                     "the run's routed topk_weights");
  }
  return result;
}

}  // namespace moe
