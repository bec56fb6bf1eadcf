#include "device/run_memory.hpp"

#include <fmt/format.h>

#include <utility>

#include "moe/sdk/error.hpp"

namespace moe::device {
RunMemory::RunMemory(const CudaDriver* driver, moe_memory memory, int32_t device, std::string who)
    : driver_(driver), memory_(memory), device_(device), who_(std::move(who)) {}

namespace {

constexpr int kPointerIsManaged = 8;  // CU_POINTER_ATTRIBUTE_IS_MANAGED: bool

// The driver, or none where it does not load: then no pointer is device memory (a device-memory
// plugin that prepared anyway is a test's stand-in).
const CudaDriver* driver_if_any() {
  try {
    return &cuda_driver();
  } catch (const Error&) {
    return nullptr;
  }
}

}  // namespace

RunMemory RunMemory::of_layer(moe_memory memory, const std::string& plugin) {
  const CudaDriver* d = driver_if_any();
  if (d == nullptr) return {};
  const int32_t device = memory == MOE_MEMORY_CUDA_DEVICE ? current_device(*d) : -1;
  return {d, memory, device, fmt::format("plugin '{}'", plugin)};
}

RunMemory RunMemory::host_only(std::string who) {
  return {driver_if_any(), MOE_MEMORY_HOST, -1, std::move(who)};
}

void RunMemory::check(const void* data, const char* name) const {
  if (driver_ == nullptr || data == nullptr) return;
  unsigned type = 0;
  int ordinal = -1;
  char managed = 0;  // the driver writes a bool
  int attributes[] = {kPointerMemoryType, kPointerDeviceOrdinal, kPointerIsManaged};
  void* values[] = {&type, &ordinal, &managed};
  const auto at = reinterpret_cast<uint64_t>(data);
  const int r = driver_->pointer_get_attributes(3, attributes, values, at);
  if (r == kErrorNotInitialized || r == kErrorDeinitialized || r == kErrorNoDevice) return;
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "{}: cuPointerGetAttributes({:#x}) failed: {}", name,
            at, driver_error(*driver_, r));
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

void RunMemory::check(const moe_tensor& t, const char* name) const {
  if (t.data == nullptr || t.ndim < 0 || t.ndim > MOE_TENSOR_MAX_DIMS) return;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] <= 0) return;  // no elements (or a shape the plugin refuses)
  check(t.data, name);
}

void RunMemory::check_run(const moe_run_args& a) const {
  if (driver_ == nullptr) return;
  check(a.hidden, "moe_run_args.hidden");
  check(a.topk_ids, "moe_run_args.topk_ids");
  check(a.topk_weights, "moe_run_args.topk_weights");
  check(a.output, "moe_run_args.output");
  if (a.workspace_size > 0) check(a.workspace, "moe_run_args.workspace");
  check(a.router_logits, "moe_run_args.router_logits");
  check(a.routing_bias, "moe_run_args.routing_bias");
  check(a.is_padding, "moe_run_args.is_padding");
}

void RunMemory::check_route(const moe_route_args& a) const {
  if (driver_ == nullptr) return;
  check(a.logits, "moe_route_args.logits");
  check(a.bias, "moe_route_args.bias");
  check(a.is_padding, "moe_route_args.is_padding");
  check(a.topk_ids, "moe_route_args.topk_ids");
  check(a.topk_weights, "moe_route_args.topk_weights");
  if (a.workspace_size > 0) check(a.workspace, "moe_route_args.workspace");
}

void RunMemory::check_step(const char* prefix, const moe_tensor& hidden, const moe_tensor& ids,
                           const moe_tensor& weights, const moe_tensor& output) const {
  if (driver_ == nullptr) return;
  check(hidden, fmt::format("{}.hidden", prefix).c_str());
  check(ids, fmt::format("{}.topk_ids", prefix).c_str());
  check(weights, fmt::format("{}.topk_weights", prefix).c_str());
  check(output, fmt::format("{}.output", prefix).c_str());
}

}  // namespace moe::device
