// The GPU oracle's one exported symbol and its function table: the reference layer
// (plugins/reference) with its GEMMs in fp32 cuBLAS on device-resident dequantised weights, for
// checking model-sized problems the CPU reference cannot do in reasonable time. Its tensors are
// host memory, exactly as the reference's.
#include <fmt/format.h>

#include "host_entries.hpp"
#include "moe/sdk/plugin_sdk.hpp"
#include "src/cublas_gemms.hpp"
#include "src/device.hpp"

namespace {

using moe::sdk::guarded;

constexpr const char* kName = "gpu_oracle";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

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
        "GPU oracle: the reference layer with fp32 cuBLAS GEMMs on exactly dequantised "
        "weights; host-memory tensors";
    info.aliases = nullptr;
    info.num_aliases = 0;
    info.priority = 1;  // above the CPU reference only: an oracle, never a fast backend
    info.memory = MOE_MEMORY_HOST;
    info.format_mask = (1u << MOE_FORMAT_COUNT_) - 1;
    info.activation_mask = (1u << MOE_ACTIVATION_COUNT_) - 1;
    info.routing_mask = (1u << MOE_ROUTING_COUNT_) - 1;
    moe::sdk::write_struct(out, info);
  });
}

// "" when the oracle can take `p` here, else why not (and the reason code).
std::string refusal(const moe_problem& p, moe_reason* reason) {
  if (p.redundant_experts > 0) {
    *reason = MOE_REASON_EP;
    return "redundant experts (EPLB) are not implemented by the reference layer";
  }
  const auto& dev = moe::gpu_oracle::device_info();
  if (!dev.present) {
    *reason = MOE_REASON_ARCH;
    return dev.why_not + ": the GPU oracle runs its GEMMs with cuBLAS";
  }
  const size_t bytes = moe::gpu_oracle::weight_bytes(p);
  if (bytes > dev.total_memory) {
    *reason = MOE_REASON_SHAPE;
    return fmt::format("the fp32 weights need {:.1f} GiB; device {} ({}) has {:.1f} GiB",
                       bytes / kGiB, dev.device, dev.name, dev.total_memory / kGiB);
  }
  return "";
}

moe_status supports(const moe_problem* problem, moe_support* answer) {
  return guarded([&] {
    moe::sdk::check_struct(answer, MOE_SUPPORT_MIN_SIZE, "moe_support");
    const moe_problem p = moe::sdk::read_problem(problem);
    moe_reason reason = MOE_REASON_NONE;
    const std::string why_not = refusal(p, &reason);
    moe::sdk::answer_support(
        answer, reason, why_not.empty() ? "every problem that fits in device memory" : why_not);
  });
}

moe_status prepare(const moe_prepare_args* args, moe_layer** layer) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_PREPARE_ARGS_MIN_SIZE, "moe_prepare_args");
    MOE_CHECK(layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer (out) is NULL");
    const moe_problem p = moe::sdk::read_problem(args->problem);
    moe_reason reason = MOE_REASON_NONE;
    const std::string why_not = refusal(p, &reason);
    MOE_CHECK(why_not.empty(), MOE_STATUS_UNSUPPORTED, "{}", why_not);
    MOE_CHECK(args->weights != nullptr, MOE_STATUS_INVALID_ARGUMENT, "weights is NULL");
    moe::reference::entries::warn_ignored_options(*args, "the GPU oracle");
    const moe_weights& w = *args->weights;
    auto gemms = std::make_unique<moe::gpu_oracle::CublasGemms>(moe::reference::layer_mlps(p, w));
    *layer = new moe_layer{moe::reference::Layer(p, w, std::move(gemms))};
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
    /*benchmark=*/nullptr,
};

}  // namespace

extern "C" MOE_PLUGIN_EXPORT const moe_plugin_api* moe_plugin_get_api(void) {
  return &kApi;
}
