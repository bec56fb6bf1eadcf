// The reference plugin's one exported symbol and its function table.
#include "moe/formats.hpp"
#include "moe/plugin_sdk.hpp"
#include "reference_layer.hpp"
#include "routing.hpp"

struct moe_layer {
  moe::reference::Layer impl;
};

namespace {

using moe::sdk::guarded;

constexpr const char* kName = "reference";

moe_status init(const moe_host_api* host) {
  return guarded([&] { moe::sdk::init_host(host, kName); });
}

const char* last_error() {
  return moe::sdk::last_error();
}

moe_status get_info(moe_plugin_info* out) {
  return guarded([&] {
    moe::sdk::check_struct(out, MOE_PLUGIN_INFO_MIN_SIZE, "moe_plugin_info");
    moe_plugin_info info{};
    info.struct_size = sizeof(info);
    info.name = kName;
    info.version = "1.0";
    info.description =
        "CPU oracle: exact dequantisation, fp64 accumulation, every format, "
        "routing method and activation";
    info.aliases = nullptr;
    info.num_aliases = 0;
    info.priority = 0;  // the slowest backend: chosen by auto only when nothing else fits
    info.memory = MOE_MEMORY_HOST;
    info.format_mask = (1u << MOE_FORMAT_COUNT_) - 1;
    info.activation_mask = (1u << MOE_ACTIVATION_COUNT_) - 1;
    info.routing_mask = (1u << MOE_ROUTING_COUNT_) - 1;
    moe::sdk::write_struct(out, info);
  });
}

moe_status supports(const moe_problem* problem, moe_support* answer) {
  return guarded([&] {
    moe::sdk::check_struct(answer, MOE_SUPPORT_MIN_SIZE, "moe_support");
    const moe_problem p = moe::sdk::read_problem(problem);
    if (p.redundant_experts > 0) {
      moe::sdk::answer_support(answer, MOE_REASON_EP,
                               "redundant experts (EPLB) are not implemented by the reference");
      return;
    }
    moe::sdk::answer_support(answer, MOE_REASON_NONE, "every problem is supported");
  });
}

moe_status prepare(const moe_prepare_args* args, moe_layer** layer) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_PREPARE_ARGS_MIN_SIZE, "moe_prepare_args");
    MOE_CHECK(layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer (out) is NULL");
    const moe_problem p = moe::sdk::read_problem(args->problem);
    MOE_CHECK(p.redundant_experts == 0, MOE_STATUS_UNSUPPORTED,
              "redundant_experts={}: EPLB is not implemented by the reference",
              p.redundant_experts);
    MOE_CHECK(args->weights != nullptr, MOE_STATUS_INVALID_ARGUMENT, "weights is NULL");
    for (int64_t i = 0; i < args->num_options; ++i) {
      moe::sdk::logf(MOE_LOG_WARN, "option '{}' is ignored: the reference takes no options",
                     args->options[i].key);
    }
    *layer = new moe_layer{moe::reference::Layer(p, *args->weights)};
  });
}

moe_status destroy_layer(moe_layer* layer) {
  return guarded([&] { delete layer; });
}

moe_status workspace_size(const moe_layer* layer, int64_t tokens, size_t* bytes) {
  return guarded([&] {
    MOE_CHECK(layer != nullptr && bytes != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "layer and bytes must not be NULL");
    MOE_CHECK(tokens >= 0, MOE_STATUS_INVALID_ARGUMENT, "tokens={} must be >= 0", tokens);
    *bytes = 0;  // host scratch comes from the heap: the oracle never runs in a graph
  });
}

moe_status run(const moe_run_args* args) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_RUN_ARGS_MIN_SIZE, "moe_run_args");
    MOE_CHECK(args->layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer is NULL");
    args->layer->impl.run(*args);
  });
}

moe_status route_workspace_size(const moe_problem* problem, int64_t tokens, size_t* bytes) {
  return guarded([&] {
    moe::sdk::read_problem(problem);
    MOE_CHECK(bytes != nullptr && tokens >= 0, MOE_STATUS_INVALID_ARGUMENT,
              "bytes must not be NULL and tokens={} >= 0", tokens);
    *bytes = 0;
  });
}

moe_status route(const moe_route_args* args) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_ROUTE_ARGS_MIN_SIZE, "moe_route_args");
    const moe_problem p = moe::sdk::read_problem(args->problem);
    const int64_t tokens = moe::sdk::check_route_tensors(p, *args);
    moe::reference::route(p, tokens, static_cast<const float*>(args->logits.data),
                          static_cast<const float*>(args->bias.data),
                          static_cast<const uint8_t*>(args->is_padding.data),
                          static_cast<int32_t*>(args->topk_ids.data),
                          static_cast<float*>(args->topk_weights.data));
  });
}

const moe_plugin_api kApi = {
    sizeof(moe_plugin_api),
    MOE_ABI_VERSION_MAJOR,
    MOE_ABI_VERSION_MINOR,
    init,
    last_error,
    get_info,
    supports,
    prepare,
    destroy_layer,
    workspace_size,
    run,
    route_workspace_size,
    route,
    /*describe_layout=*/nullptr,
    /*mem_alloc=*/nullptr,
    /*mem_free=*/nullptr,
    /*mem_copy=*/nullptr,
    /*stream_sync=*/nullptr,
};

}  // namespace

extern "C" MOE_PLUGIN_EXPORT const moe_plugin_api* moe_plugin_get_api(void) {
  return &kApi;
}
