#include "device/run_memory.hpp"

#include <fmt/format.h>

#include <utility>

#include "moe/sdk/error.hpp"

namespace moe::device {
namespace {

constexpr int kPointerIsManaged = 8;  // CU_POINTER_ATTRIBUTE_IS_MANAGED: 4 bytes written

}  // namespace

RunMemory::RunMemory(const CudaDriver* driver, moe_memory memory, int32_t device, std::string who)
    : driver_(driver), memory_(memory), device_(device), who_(std::move(who)) {}

RunMemory RunMemory::of_layer(moe_memory memory, const std::string& plugin) {
  const std::string who = fmt::format("plugin '{}'", plugin);
  if (memory != MOE_MEMORY_CUDA_DEVICE) return host_only(who);
  const CudaDriver* d = nullptr;
  try {
    d = &cuda_driver();
  } catch (const Error&) {
    return {};  // no driver, no device: a test's stand-in for a device plugin; nothing to check
  }
  return {d, memory, current_device(*d), who};
}

RunMemory RunMemory::host_only(std::string who) {
  RunMemory m(nullptr, MOE_MEMORY_HOST, -1, std::move(who));
  m.host_lazy_ = true;
  return m;
}

const CudaDriver* RunMemory::driver() const {
  if (driver_ != nullptr || !host_lazy_ || !cuda_driver_in_process()) return driver_;
  try {
    return &cuda_driver();
  } catch (const Error&) {
    return nullptr;  // loaded but without a device (cuInit failed): no device memory
  }
}

// Where one field's first byte lies, against the layer's memory.
void RunMemory::check_at(const CudaDriver& d, const void* data, const std::string& name) const {
  unsigned type = 0;
  int ordinal = -1;
  unsigned managed = 0;  // documented as a bool, but the driver writes 4 bytes
  int attributes[] = {kPointerMemoryType, kPointerDeviceOrdinal, kPointerIsManaged};
  void* values[] = {&type, &ordinal, &managed};
  const auto at = reinterpret_cast<uint64_t>(data);
  const int r = d.pointer_get_attributes(3, attributes, values, at);
  if (r == kErrorNotInitialized || r == kErrorDeinitialized || r == kErrorNoDevice) return;
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "{}: cuPointerGetAttributes({:#x}) failed: {}", name,
            at, driver_error(d, r));
  if (managed != 0) return;  // reachable from the host and from every device
  if (memory_ == MOE_MEMORY_HOST) {
    MOE_CHECK(type != kMemoryTypeDevice, MOE_STATUS_INVALID_ARGUMENT,
              "{}: {:#x} is CUDA device memory (cuda:{}), but {} runs in host memory: pass host "
              "tensors",
              name, at, ordinal, who_);
    return;
  }
  MOE_CHECK(type == kMemoryTypeDevice, MOE_STATUS_INVALID_ARGUMENT,
            "{}: {:#x} is {}, but {} runs in CUDA device memory: pass tensors on cuda:{}", name, at,
            memory_type_name(type), who_, device_);
  MOE_CHECK(ordinal == device_, MOE_STATUS_INVALID_ARGUMENT,
            "{}: {:#x} is on cuda:{}, but {} runs on cuda:{}, the device current at prepare", name,
            at, ordinal, who_, device_);
}

void RunMemory::check_fields(std::initializer_list<Field> fields) const {
  bool any = false;
  for (const Field& f : fields) any = any || f.data != nullptr;
  if (!any) return;
  const CudaDriver* d = driver();  // asked once a call
  if (d == nullptr) return;
  for (const Field& f : fields)
    if (f.data != nullptr) check_at(*d, f.data, f.name);
}

const void* RunMemory::data_of(const moe_tensor& t) {
  if (t.data == nullptr || t.ndim < 0 || t.ndim > MOE_TENSOR_MAX_DIMS) return nullptr;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] <= 0) return nullptr;  // no elements (or a shape the plugin refuses)
  return t.data;
}

void RunMemory::check(const void* data, const char* name) const {
  check_fields({{data, name}});
}

void RunMemory::check_copy(const void* dst, const void* src, const std::string& prefix) const {
  check_fields({{dst, prefix + ": dst"}, {src, prefix + ": src"}});
}

void RunMemory::check_current(const char* call) const {
  if (memory_ != MOE_MEMORY_CUDA_DEVICE || driver_ == nullptr) return;
  const int32_t current = current_device(*driver_);
  MOE_CHECK(current == device_, MOE_STATUS_INVALID_ARGUMENT,
            "{}: {} runs this layer on cuda:{}, the device current at prepare, but cuda:{} is "
            "current on this thread: make cuda:{} current (cudaSetDevice, torch.cuda.set_device) "
            "for the layer's calls",
            call, who_, device_, current, device_);
}

void RunMemory::check_run(const moe_run_args& a) const {
  check_current("moe_host_layer_run");
  check_fields({{data_of(a.hidden), "moe_run_args.hidden"},
                {data_of(a.topk_ids), "moe_run_args.topk_ids"},
                {data_of(a.topk_weights), "moe_run_args.topk_weights"},
                {data_of(a.output), "moe_run_args.output"},
                {a.workspace_size > 0 ? a.workspace : nullptr, "moe_run_args.workspace"},
                {data_of(a.router_logits), "moe_run_args.router_logits"},
                {data_of(a.routing_bias), "moe_run_args.routing_bias"},
                {data_of(a.is_padding), "moe_run_args.is_padding"}});
}

void RunMemory::check_route(const moe_route_args& a) const {
  check_current("moe_host_layer_route");
  check_fields({{data_of(a.logits), "moe_route_args.logits"},
                {data_of(a.bias), "moe_route_args.bias"},
                {data_of(a.is_padding), "moe_route_args.is_padding"},
                {data_of(a.topk_ids), "moe_route_args.topk_ids"},
                {data_of(a.topk_weights), "moe_route_args.topk_weights"},
                {a.workspace_size > 0 ? a.workspace : nullptr, "moe_route_args.workspace"}});
}

void RunMemory::check_step(const std::string& prefix, const moe_tensor& hidden,
                           const moe_tensor& ids, const moe_tensor& weights,
                           const moe_tensor& output) const {
  check_fields({{data_of(hidden), prefix + ".hidden"},
                {data_of(ids), prefix + ".topk_ids"},
                {data_of(weights), prefix + ".topk_weights"},
                {data_of(output), prefix + ".output"}});
}

}  // namespace moe::device
