// The example plugin's one exported symbol and its function table.
#include "example_moe.hpp"
#include "moe/sdk/plugin_sdk.hpp"

struct moe_layer {
  example::Layer impl;
};

namespace {

using moe::sdk::guarded;

constexpr const char* kName = "example_cpu";
const char* const kAliases[] = {"example"};

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
    info.version = "0.1";
    info.description = "example third-party backend: bf16 on the CPU, fp32 accumulation";
    info.aliases = kAliases;
    info.num_aliases = 1;
    info.priority = 10;
    info.memory = MOE_MEMORY_HOST;
    info.format_mask = 1u << MOE_FORMAT_BF16;
    info.activation_mask = 1u << MOE_ACTIVATION_SILU_MUL | 1u << MOE_ACTIVATION_GELU_MUL;
    info.routing_mask = 1u << MOE_ROUTING_SOFTMAX_TOPK | 1u << MOE_ROUTING_SIGMOID_TOPK;
    moe::sdk::write_struct(out, info);
  });
}

moe_status supports(const moe_problem* problem, moe_support* answer) {
  return guarded([&] {
    const example::Refusal r = example::check_support(moe::sdk::read_problem(problem));
    moe::sdk::answer_support(answer, r.reason, r.message);
  });
}

moe_status prepare(const moe_prepare_args* args, moe_layer** layer) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_PREPARE_ARGS_MIN_SIZE, "moe_prepare_args");
    MOE_CHECK(layer != nullptr && args->weights != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "layer and weights must not be NULL");
    const moe_problem p = moe::sdk::read_problem(args->problem);
    const example::Refusal r = example::check_support(p);
    MOE_CHECK(r.reason == MOE_REASON_NONE, MOE_STATUS_UNSUPPORTED, "{}", r.message);
    *layer = new moe_layer{example::Layer(p, *args->weights)};
  });
}

moe_status destroy_layer(moe_layer* layer) {
  return guarded([&] { delete layer; });
}

moe_status workspace_size(const moe_layer* layer, int64_t, size_t* bytes) {
  return guarded([&] {
    MOE_CHECK(layer && bytes, MOE_STATUS_INVALID_ARGUMENT, "layer and bytes must not be NULL");
    *bytes = 0;
  });
}

moe_status run(const moe_run_args* args) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_RUN_ARGS_MIN_SIZE, "moe_run_args");
    MOE_CHECK(args->layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer is NULL");
    args->layer->impl.run(*args);
  });
}

moe_status route_workspace_size(const moe_problem* problem, int64_t, size_t* bytes) {
  return guarded([&] {
    moe::sdk::read_problem(problem);
    MOE_CHECK(bytes != nullptr, MOE_STATUS_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = 0;
  });
}

moe_status route(const moe_route_args* args) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_ROUTE_ARGS_MIN_SIZE, "moe_route_args");
    example::route(moe::sdk::read_problem(args->problem), *args);
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
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" MOE_PLUGIN_EXPORT const moe_plugin_api* moe_plugin_get_api(void) {
  return &kApi;
}
