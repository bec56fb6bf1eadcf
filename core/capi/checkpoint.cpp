// moe_host_layer_prepare_checkpoint: one layer of a config's `checkpoint:` through the adapters
// (moe/checkpoint.hpp) into canonical host weights, prepared as moe_host_layer_prepare would, so a
// binding loads real weights the way `moe run --config` does without a C++ type in its interface.
#include <fmt/format.h>

#include "handles.hpp"
#include "moe/checkpoint.hpp"
#include "moe/sdk/enum_names.hpp"

using namespace moe::capi;  // NOLINT: the C entry point below is thin

extern "C" {

moe_status moe_host_layer_prepare_checkpoint(const moe_host_registry* registry,
                                             const moe_host_checkpoint_args* args,
                                             moe_host_layer** layer) {
  return guarded([&] {
    deref(layer, "layer") = nullptr;
    const auto& r = deref(registry, "registry");
    const moe_host_checkpoint_args a =
        read_args(args, MOE_HOST_CHECKPOINT_ARGS_MIN_SIZE, "moe_host_checkpoint_args");
    const auto& s = deref(a.selection, "moe_host_checkpoint_args.selection");
    MOE_CHECK(s.config.checkpoint.has_value(), MOE_STATUS_CONFIG_ERROR,
              "{}: the config has no `checkpoint:` section (path, convention, prefix, layer) to "
              "load weights from",
              s.config.source);
    // The selection already chose among `backend:` and `fallback:`; a named backend replaces
    // that choice and, as in moe_host_layer_prepare, is refused if it does not fit.
    moe::Config config = s.config;
    config.backend = read_backend(a.backend, s.backend, "moe_host_checkpoint_args.backend");
    config.fallback.clear();
    const moe::CheckpointSpec& spec = *config.checkpoint;
    const moe_problem p = config.problem.c();
    moe::LayerCheckpoint loaded = moe::load_layer(moe::Checkpoint::open(spec.path), spec, p);
    // The options of the plugin this layer is for: its own section, and the plain entries when
    // the original config named it (not when it was the selection's fallback).
    // Under "auto" the plugin is the one the selection rule picks (as prepare_layer will).
    const auto plugin = config.backend == "auto" ? moe::select_backend(r.registry, config).plugin
                                                 : r.registry.find(config.backend);
    const moe::Options options =
        plugin ? moe::options_for(r.registry, s.config, *plugin) : moe::Options{};
    auto l = prepare_layer(r, config, loaded.weights.view(), options, a.stream);
    l->router_weight = std::move(loaded.router_weight);
    l->router_bias = std::move(loaded.router_bias);
    if (p.routing_bias) l->routing_bias = std::move(loaded.routing_bias);
    l->real_experts = loaded.real_experts;
    l->router_dtype = moe::router_dtype_name(spec.router_dtype);
    l->weights_from = fmt::format("checkpoint {} ({})", spec.path, spec.convention);
    if (!loaded.conversions.empty())
      l->weights_from += "; converted at load: " + moe::describe_conversions(loaded.conversions);
    *layer = l.release();
  });
}

}  // extern "C"
