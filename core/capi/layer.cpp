// moe_host_layer_*: prepare a layer with the backend selected for its problem, then workspace,
// route and run through the plugin ABI's own argument structs, and the layer's memory.
#include <fmt/format.h>

#include "handles.hpp"
#include "moe/device_weights.hpp"
#include "moe/ep.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/options.hpp"

namespace moe::capi {
namespace {

// Who routes a layer's problem in the layer's memory: its own plugin when it can, else, for a
// host-memory layer, the reference (the core's oracle, also host memory).
void choose_router(const moe_host_registry& r, moe_host_layer& layer) {
  const Plugin& plugin = layer.layer.plugin();
  const char* method = routing_name(static_cast<moe_routing>(layer.problem_c.routing));
  if (plugin.can_route(layer.problem_c)) {
    layer.router = plugin.shared_from_this();
  } else if (!plugin.device_memory()) {
    try {
      auto oracle = r.registry.oracle();
      if (oracle->can_route(layer.problem_c)) layer.router = oracle;
    } catch (const Error& e) {
      layer.no_router_reason =
          fmt::format("plugin '{}' does not route {}, and the reference cannot: {}", plugin.name(),
                      method, e.what());
    }
  }
  if (layer.router) {
    layer.router_name = layer.router->name();
  } else if (layer.no_router_reason.empty()) {
    layer.no_router_reason = fmt::format(
        "plugin '{}' does not route {} in its {} memory; route elsewhere and pass "
        "topk_ids and topk_weights to moe_host_layer_run",
        plugin.name(), method, memory_name(plugin.info().memory));
  }
}

int64_t checked_tokens(const moe_host_layer& layer, int64_t tokens, const char* what) {
  const int64_t max_tokens = layer.problem_c.max_tokens;
  MOE_CHECK(tokens >= 0, MOE_STATUS_INVALID_ARGUMENT, "{}: tokens={} is negative", what, tokens);
  MOE_CHECK(tokens <= max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
            "{}: {} tokens is more than the layer's max_tokens={}", what, tokens, max_tokens);
  return tokens;
}

WeightsPlace read_place(const moe_host_prepare_args& a) {
  MOE_CHECK(a.weights_memory == MOE_MEMORY_HOST || a.weights_memory == MOE_MEMORY_CUDA_DEVICE,
            MOE_STATUS_INVALID_ARGUMENT,
            "moe_host_prepare_args.weights_memory={} is not a moe_memory ({} host, {} CUDA device)",
            a.weights_memory, int(MOE_MEMORY_HOST), int(MOE_MEMORY_CUDA_DEVICE));
  const auto memory = static_cast<moe_memory>(a.weights_memory);
  MOE_CHECK(memory == MOE_MEMORY_HOST || a.weights_device >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "moe_host_prepare_args.weights_device={} is not a CUDA device ordinal",
            a.weights_device);
  return {memory, a.weights_device};
}

// A GPU plugin prepares on the calling thread's current device: device weights must be there.
void check_layer_device(const Plugin& plugin, int32_t weights_device) {
  const int32_t current = current_cuda_device();
  MOE_CHECK(current == weights_device, MOE_STATUS_INVALID_ARGUMENT,
            "the weights are on cuda:{} (weights_device), but plugin '{}' prepares its layer on "
            "cuda:{}, the calling thread's current CUDA device: make cuda:{} current first "
            "(torch.cuda.set_device, cudaSetDevice), or move the weights to cuda:{}",
            weights_device, plugin.name(), current, weights_device, current);
}

}  // namespace

std::unique_ptr<moe_host_layer> prepare_layer(const moe_host_registry& registry,
                                              const Config& config, const moe_weights& weights,
                                              const Options& options, void* stream,
                                              WeightsPlace place) {
  const Selection sel = select_backend(registry.registry, config);
  StagedWeights staged;  // device weights' host copies, alive until prepare returns
  const moe_weights* host = &weights;
  if (place.memory == MOE_MEMORY_CUDA_DEVICE) {
    if (sel.plugin->device_memory()) check_layer_device(*sel.plugin, place.device);
    staged = stage_device_weights(weights, place.device, stream);
    host = &staged.weights();
  }
  // Under expert parallelism a shared expert runs once per token, at home: split off as a layer
  // of its own, both prepared from views of the caller's weights (no copy). The split is host
  // code, so builds without EP split too (their moe_host_ep_step answers UNSUPPORTED).
  const moe_problem p = config.problem.c();
  std::optional<ep::SharedSplit> split;
  if (p.ep_placement != MOE_EP_NONE && p.shared_intermediate > 0) {
    split = ep::split_shared_expert(p, *host);
    // The backend was chosen for the whole problem: each part is asked again, by name.
    for (const auto& [part, what] : {std::pair{&split->routed, "routed experts"},
                                     std::pair{&split->shared, "shared expert (one expert)"}}) {
      const Support s = sel.plugin->supports(part->c());
      MOE_CHECK(s.supported, MOE_STATUS_UNSUPPORTED,
                "expert parallelism runs the shared expert as a layer of its own; plugin '{}' "
                "does not take the {} part: {}",
                sel.plugin->name(), what, s.message);
    }
  }
  Layer prepared = sel.plugin->prepare(split ? split->routed.c() : p,
                                       split ? split->routed_weights : *host, options, stream);
  auto l = std::make_unique<moe_host_layer>(config.problem, std::move(prepared));
  // The caller's extension chain was the plugin's to read during prepare; the layer keeps
  // nothing else of the caller's (later calls would walk freed memory).
  l->problem.raw().ext = nullptr;
  l->problem_c = l->problem.c();
  if (split) {
    l->shared.emplace(
        sel.plugin->prepare(split->shared.c(), split->shared_weights, options, stream));
    l->routed_problem = split->routed;
    l->routed_problem.raw().ext = nullptr;
    l->shared_problem = split->shared;
    l->shared_problem.raw().ext = nullptr;
  }
  choose_router(registry, *l);
  l->run_memory = device::RunMemory::of_layer(
      sel.plugin->device_memory() ? MOE_MEMORY_CUDA_DEVICE : MOE_MEMORY_HOST, sel.plugin->name());
  return l;
}

}  // namespace moe::capi

using namespace moe::capi;  // NOLINT: the C entry points below are thin

extern "C" {

moe_status moe_host_layer_prepare(const moe_host_registry* registry,
                                  const moe_host_prepare_args* args, moe_host_layer** layer) {
  return guarded([&] {
    deref(layer, "layer") = nullptr;
    const auto& r = deref(registry, "registry");
    const moe_host_prepare_args a =
        read_args(args, MOE_HOST_PREPARE_ARGS_MIN_SIZE, "moe_host_prepare_args");
    moe::Config config;  // selection of a backend by name (or auto) for this problem
    config.source = "moe_host_prepare_args";
    config.backend = read_backend(a.backend, "auto", "moe_host_prepare_args.backend");
    config.problem = read_problem(a.problem, "moe_host_prepare_args.problem");
    moe::sdk::check_struct(a.weights, MOE_WEIGHTS_MIN_SIZE, "moe_host_prepare_args.weights");
    const WeightsPlace place = read_place(a);
    const moe::Options options = moe::read_options(a.options, a.num_options);
    *layer = prepare_layer(r, config, *a.weights, options, a.stream, place).release();
  });
}

moe_status moe_host_layer_destroy(moe_host_layer* layer) {
  return guarded([&] { delete layer; });
}

moe_status moe_host_layer_info_get(const moe_host_layer* layer, moe_host_layer_info* info) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    moe_host_layer_info out{};
    out.backend = l.layer.plugin().name().c_str();
    out.router = l.router_name.c_str();
    out.problem = &l.problem_c;
    out.memory = l.layer.plugin().info().memory;
    out.router_weight = l.router_weight.empty() ? moe_tensor{} : l.router_weight.view();
    out.router_bias = l.router_bias.empty() ? moe_tensor{} : l.router_bias.view();
    out.routing_bias = l.routing_bias.empty() ? moe_tensor{} : l.routing_bias.view();
    out.real_experts = l.real_experts;
    out.router_dtype = l.router_dtype.c_str();
    out.weights_from = l.weights_from.c_str();
    write_out(info, MOE_HOST_LAYER_INFO_MIN_SIZE, "moe_host_layer_info", out);
  });
}

moe_status moe_host_layer_workspace_size(const moe_host_layer* layer, int64_t tokens,
                                         size_t* bytes) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    size_t& out = deref(bytes, "bytes");
    out = l.layer.workspace_size(checked_tokens(l, tokens, "moe_host_layer_workspace_size"));
  });
}

moe_status moe_host_layer_route_workspace_size(const moe_host_layer* layer, int64_t tokens,
                                               size_t* bytes) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    size_t& out = deref(bytes, "bytes");
    MOE_CHECK(l.router != nullptr, MOE_STATUS_UNSUPPORTED, "{}", l.no_router_reason);
    out = l.router->route_workspace_size(
        l.problem_c, checked_tokens(l, tokens, "moe_host_layer_route_workspace_size"));
  });
}

moe_status moe_host_layer_route(const moe_host_layer* layer, const moe_route_args* args) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    moe_route_args a = read_args(args, MOE_ROUTE_ARGS_MIN_SIZE, "moe_route_args");
    MOE_CHECK(l.router != nullptr, MOE_STATUS_UNSUPPORTED, "{}", l.no_router_reason);
    if (a.logits.ndim >= 1) checked_tokens(l, a.logits.shape[0], "moe_route_args.logits");
    if (a.problem == nullptr) {
      a.problem = &l.problem_c;
    } else {
      // Another routing of this layer's experts (e.g. other groups or scales): the ids it writes
      // must be ids of this layer, in a batch this layer takes.
      const moe_problem p = read_problem(a.problem, "moe_route_args.problem").c();
      const moe_problem& own = l.problem_c;
      const auto same = [](const char* field, int64_t given, int64_t layer) {
        MOE_CHECK(given == layer, MOE_STATUS_INVALID_ARGUMENT,
                  "moe_route_args.problem.{} is {} but the layer's is {}: a problem given to "
                  "route must route this layer's experts",
                  field, given, layer);
      };
      same("experts", p.experts, own.experts);
      same("top_k", p.top_k, own.top_k);
      same("sink_experts", p.sink_experts, own.sink_experts);
    }
    l.run_memory.check_route(a);
    l.router->route(a);
  });
}

moe_status moe_host_layer_run(const moe_host_layer* layer, const moe_run_args* args) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    const moe_run_args a = read_args(args, MOE_RUN_ARGS_MIN_SIZE, "moe_run_args");
    // A split layer (every EP problem with a shared expert: a run would leave the shared expert
    // out, or on several ranks add it on each): the step runs the shared expert once per token.
    MOE_CHECK(!l.shared, MOE_STATUS_UNSUPPORTED,
              "this layer's shared expert (shared_intermediate={}) runs once per token under "
              "expert parallelism (ep_size={}), split off from the routed experts: a run of the "
              "layer would leave it out or add it on every rank; step it with moe_host_ep_step (a "
              "NULL group runs one rank)",
              l.problem_c.shared_intermediate, l.problem_c.ep_size);
    if (a.hidden.ndim >= 1) checked_tokens(l, a.hidden.shape[0], "moe_run_args.hidden");
    l.run_memory.check_run(a);
    l.layer.run(a);  // sets a.layer to this handle's
  });
}

moe_status moe_host_layer_alloc(const moe_host_layer* layer, size_t bytes, void** ptr) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    void*& out = deref(ptr, "ptr");
    out = nullptr;  // NULL on failure, as every other out-handle
    l.run_memory.check_current("moe_host_layer_alloc");  // memory for the layer's device only
    out = l.layer.plugin().alloc(bytes);
  });
}

moe_status moe_host_layer_free(const moe_host_layer* layer, void* ptr) {
  return guarded([&] { deref(layer, "layer").layer.plugin().free(ptr); });
}

moe_status moe_host_layer_copy(const moe_host_layer* layer, void* dst, const void* src,
                               size_t bytes, int32_t kind) {
  return guarded([&] {
    const auto& l = deref(layer, "layer");
    MOE_CHECK(bytes == 0 || (dst != nullptr && src != nullptr), MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_layer_copy: dst or src is NULL with bytes={}", bytes);
    const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    MOE_CHECK(bytes <= UINTPTR_MAX - d && bytes <= UINTPTR_MAX - s, MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_layer_copy: {} bytes from {:#x} or to {:#x} run past the end of the "
              "address space",
              bytes, s, d);
    MOE_CHECK(bytes == 0 || d + bytes <= s || s + bytes <= d, MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_layer_copy: dst {:#x} and src {:#x} overlap within {} bytes", d, s, bytes);
    MOE_CHECK(kind >= MOE_MEMCPY_HOST_TO_DEVICE && kind <= MOE_MEMCPY_DEVICE_TO_DEVICE,
              MOE_STATUS_INVALID_ARGUMENT, "moe_host_layer_copy: kind={} is not a moe_memcpy_kind",
              kind);
    // A host plugin's copy is a memcpy: device memory would crash it.
    if (bytes > 0 && !l.layer.plugin().device_memory())
      l.run_memory.check_copy(dst, src, "moe_host_layer_copy");
    l.layer.plugin().copy(dst, src, bytes, static_cast<moe_memcpy_kind>(kind));
  });
}

moe_status moe_host_layer_sync(const moe_host_layer* layer, void* stream) {
  return guarded([&] { deref(layer, "layer").layer.plugin().sync(stream); });
}

}  // extern "C"
