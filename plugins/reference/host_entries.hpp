// The function-table entries of a plugin whose layer is a moe::reference::Layer on host tensors:
// the reference plugin and the GPU oracle (the same layer with other GEMMs) share them.
// Included by each plugin's plugin.cpp, which defines no moe_layer of its own.
#pragma once

#include <cstdint>

#include "moe/sdk/plugin_sdk.hpp"
#include "reference_layer.hpp"
#include "routing.hpp"

struct moe_layer {
  moe::reference::Layer impl;
};

namespace moe::reference::entries {

// Options are logged and ignored: `who` takes none.
inline void warn_ignored_options(const moe_prepare_args& args, const char* who) {
  for (int64_t i = 0; i < args.num_options; ++i)
    sdk::logf(MOE_LOG_WARN, "option '{}' is ignored: {} takes no options", args.options[i].key,
              who);
}

inline moe_status destroy_layer(moe_layer* layer) {
  return sdk::guarded([&] { delete layer; });
}

// Host scratch comes from the heap (and the oracle's grow-only device buffers): no workspace,
// and these layers never run in a CUDA graph.
inline moe_status workspace_size(const moe_layer* layer, int64_t tokens, size_t* bytes) {
  return sdk::guarded([&] {
    MOE_CHECK(layer != nullptr && bytes != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "layer and bytes must not be NULL");
    MOE_CHECK(tokens >= 0, MOE_STATUS_INVALID_ARGUMENT, "tokens={} must be >= 0", tokens);
    *bytes = 0;
  });
}

inline moe_status run(const moe_run_args* args) {
  return sdk::guarded([&] {
    sdk::check_struct(args, MOE_RUN_ARGS_MIN_SIZE, "moe_run_args");
    MOE_CHECK(args->layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer is NULL");
    args->layer->impl.run(*args);
  });
}

inline moe_status route_workspace_size(const moe_problem* problem, int64_t tokens, size_t* bytes) {
  return sdk::guarded([&] {
    sdk::read_problem(problem);
    MOE_CHECK(bytes != nullptr && tokens >= 0, MOE_STATUS_INVALID_ARGUMENT,
              "bytes must not be NULL and tokens={} >= 0", tokens);
    *bytes = 0;
  });
}

// The reference's routing on the host, bit for bit.
inline moe_status route(const moe_route_args* args) {
  return sdk::guarded([&] {
    sdk::check_struct(args, MOE_ROUTE_ARGS_MIN_SIZE, "moe_route_args");
    const moe_problem p = sdk::read_problem(args->problem);
    const int64_t tokens = sdk::check_route_tensors(p, *args);
    reference::route(p, tokens, static_cast<const float*>(args->logits.data),
                     static_cast<const float*>(args->bias.data),
                     static_cast<const uint8_t*>(args->is_padding.data),
                     static_cast<int32_t*>(args->topk_ids.data),
                     static_cast<float*>(args->topk_weights.data));
  });
}

}  // namespace moe::reference::entries
