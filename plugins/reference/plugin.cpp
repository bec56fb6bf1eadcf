// The reference plugin's one exported symbol and its function table.
#include "host_entries.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/plugin_sdk.hpp"

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
    moe::reference::entries::warn_ignored_options(*args, "the reference");
    *layer = new moe_layer{moe::reference::Layer(p, *args->weights)};
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
    moe::reference::entries::destroy_layer,
    moe::reference::entries::workspace_size,
    moe::reference::entries::run,
    moe::reference::entries::route_workspace_size,
    moe::reference::entries::route,
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
