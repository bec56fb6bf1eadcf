// The trtllm_style plugin's one exported symbol and its function table.
#include <cuda_runtime_api.h>

#include <cstring>

#include "moe/sdk/plugin_sdk.hpp"
#include "moe_cuda/routing.hpp"
#include "src/bench.hpp"
#include "src/device.hpp"
#include "src/trtllm_layer.hpp"

struct moe_layer {
  moe::trtllm::DeviceLayer impl;
};

namespace {

using moe::sdk::guarded;

constexpr const char* kName = "trtllm_style";
// vLLM's moe_backend spellings for FlashInfer's TensorRT-LLM kernels, so a setting carries over.
const char* const kAliases[] = {"flashinfer_trtllm", "flashinfer_cutlass"};

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
    info.description =
        "TensorRT-LLM weight layouts (w31, gated interleave) read by CUTLASS sm90 grouped GEMMs";
    info.aliases = kAliases;
    info.num_aliases = 2;
    info.priority = 50;
    info.memory = MOE_MEMORY_CUDA_DEVICE;
    info.format_mask = 1u << MOE_FORMAT_BF16;
    info.activation_mask = (1u << MOE_ACTIVATION_COUNT_) - 1;
    info.routing_mask = (1u << MOE_ROUTING_COUNT_) - 1;
    moe::sdk::write_struct(out, info);
  });
}

moe_status supports(const moe_problem* problem, moe_support* answer) {
  return guarded([&] {
    moe::sdk::check_struct(answer, MOE_SUPPORT_MIN_SIZE, "moe_support");
    const moe::trtllm::Refusal r = moe::trtllm::check_support(moe::sdk::read_problem(problem));
    moe::sdk::answer_support(answer, r.reason, r.message);
  });
}

moe_status prepare(const moe_prepare_args* args, moe_layer** layer) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_PREPARE_ARGS_MIN_SIZE, "moe_prepare_args");
    MOE_CHECK(layer != nullptr && args->weights != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "layer and weights must not be NULL");
    const moe_problem p = moe::sdk::read_problem(args->problem);
    moe::Options options;
    for (int64_t i = 0; i < args->num_options; ++i)
      options.emplace_back(args->options[i].key, args->options[i].value);
    *layer = new moe_layer{moe::trtllm::DeviceLayer(p, *args->weights, options)};
  });
}

moe_status destroy_layer(moe_layer* layer) {
  return guarded([&] { delete layer; });
}

moe_status workspace_size(const moe_layer* layer, int64_t tokens, size_t* bytes) {
  return guarded([&] {
    MOE_CHECK(layer && bytes, MOE_STATUS_INVALID_ARGUMENT, "layer and bytes must not be NULL");
    MOE_CHECK(tokens >= 0, MOE_STATUS_INVALID_ARGUMENT, "tokens={} must be >= 0", tokens);
    *bytes = layer->impl.workspace_size(tokens);
  });
}

void run_layer(const moe_run_args& args);

moe_status run(const moe_run_args* args) {
  return guarded([&] {
    MOE_CHECK(args != nullptr, MOE_STATUS_INVALID_ARGUMENT, "moe_run_args is NULL");
    run_layer(*args);
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
    moe::gpu::launch_route(p, tokens, static_cast<const float*>(args->logits.data),
                           static_cast<const float*>(args->bias.data),
                           static_cast<const uint8_t*>(args->is_padding.data),
                           static_cast<int32_t*>(args->topk_ids.data),
                           static_cast<float*>(args->topk_weights.data),
                           static_cast<cudaStream_t>(args->stream));
  });
}

moe_status describe_layout(const moe_problem* problem, char* buf, size_t cap, size_t* needed) {
  return guarded([&] {
    const moe_problem p = moe::sdk::read_problem(problem);
    const std::string text = moe::trtllm::describe(moe::trtllm::plan_layout(
        moe::trtllm::layer_shape(p), p.expert_bias != 0, moe::trtllm::layout_options({})));
    MOE_CHECK(needed != nullptr, MOE_STATUS_INVALID_ARGUMENT, "needed must not be NULL");
    *needed = text.size() + 1;
    if (buf != nullptr && cap > 0) {
      const size_t n = std::min(cap - 1, text.size());
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
  });
}

moe_status mem_alloc(size_t bytes, void** ptr) {
  return guarded([&] {
    MOE_CHECK(ptr != nullptr, MOE_STATUS_INVALID_ARGUMENT, "ptr must not be NULL");
    const cudaError_t e = cudaMalloc(ptr, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      MOE_FAIL(MOE_STATUS_OUT_OF_MEMORY, "cannot allocate {} bytes of device memory", bytes);
    }
    moe::trtllm::check_cuda(e, "cudaMalloc");
  });
}

moe_status mem_free(void* ptr) {
  return guarded([&] { moe::trtllm::check_cuda(cudaFree(ptr), "cudaFree"); });
}

moe_status mem_copy(void* dst, const void* src, size_t bytes, int32_t kind, void* stream) {
  return guarded([&] {
    const cudaMemcpyKind k = kind == MOE_MEMCPY_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                             : kind == MOE_MEMCPY_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                                 : cudaMemcpyDeviceToDevice;
    auto s = static_cast<cudaStream_t>(stream);
    moe::trtllm::check_cuda(cudaMemcpyAsync(dst, src, bytes, k, s), "cudaMemcpyAsync");
    moe::trtllm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  });
}

moe_status stream_sync(void* stream) {
  return guarded([&] {
    moe::trtllm::check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                            "cudaStreamSynchronize");
  });
}

void run_layer(const moe_run_args& args) {
  moe::sdk::check_struct(&args, MOE_RUN_ARGS_MIN_SIZE, "moe_run_args");
  MOE_CHECK(args.layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer is NULL");
  args.layer->impl.run(args);
}

moe_status benchmark(const moe_bench_args* args) {
  return guarded([&] {
    moe::sdk::check_struct(args, MOE_BENCH_ARGS_MIN_SIZE, "moe_bench_args");
    moe::trtllm::benchmark(*args, run_layer);
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
    describe_layout,
    mem_alloc,
    mem_free,
    mem_copy,
    stream_sync,
    benchmark,
};

}  // namespace

extern "C" MOE_PLUGIN_EXPORT const moe_plugin_api* moe_plugin_get_api(void) {
  return &kApi;
}
