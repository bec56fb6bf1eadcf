// Where the host C API's runs and routings find their tensors (core/src/device/run_memory.hpp),
// proved on the CPU through a fake CUDA driver whose "allocations" are host buffers it lists with a
// memory type, a device and a managed flag: a host plugin refuses device memory, a GPU plugin
// plain or registered host memory and another device's memory, each naming the field; managed
// memory, NULL data and empty tensors pass.
#include <vector>

#include "../support/fake_pointer_regions.hpp"
#include "../support/test_env.hpp"
#include "device/cuda_driver.hpp"
#include "device/run_memory.hpp"

namespace moe::test {
namespace {

int g_current_device = 0;
int g_fail = 0;  // a driver result to answer instead of the attributes

int fake_attributes(unsigned n, int* attributes, void** data, uint64_t ptr) {
  return g_fail != 0 ? g_fail : fake_pointer_attributes(n, attributes, data, ptr);
}
int fake_ctx_device(int* device) {
  *device = g_current_device;
  return 0;
}
int fake_error_name(int, const char** name) {
  *name = "CUDA_ERROR_INVALID_VALUE";
  return 0;
}

device::CudaDriver fake_driver() {
  device::CudaDriver d{};
  d.library = "fake";
  d.pointer_get_attributes = fake_attributes;
  d.ctx_get_device = fake_ctx_device;
  d.error_name = fake_error_name;
  return d;
}

// Buffers the fake lists: plain host (unlisted), registered host, device 0 and 1, managed.
struct Memory {
  std::vector<char> plain = std::vector<char>(256), pinned = std::vector<char>(256),
                    dev0 = std::vector<char>(256), dev1 = std::vector<char>(256),
                    managed = std::vector<char>(256);
  Memory() {
    g_fail = 0;
    g_current_device = 0;
    fake_regions() = {{pinned.data(), pinned.size(), -2, device::kMemoryTypeHost},
                      {dev0.data(), dev0.size(), 0},
                      {dev1.data(), dev1.size(), 1},
                      {managed.data(), managed.size(), 0, device::kMemoryTypeDevice, true}};
  }
};

// A run whose every tensor lies in `data` (8 tokens, H = 16, k = 2).
moe_run_args run_in(char* data) {
  moe_run_args a{};
  a.struct_size = sizeof a;
  a.hidden = make_view(data, MOE_DTYPE_BF16, {8, 16});
  a.topk_ids = make_view(data, MOE_DTYPE_I32, {8, 2});
  a.topk_weights = make_view(data, MOE_DTYPE_F32, {8, 2});
  a.output = make_view(data, MOE_DTYPE_BF16, {8, 16});
  a.workspace = data;
  a.workspace_size = 64;
  return a;
}

TEST(RunMemory, AHostPluginRefusesDeviceMemoryNamingTheField) {
  Memory m;
  const device::CudaDriver d = fake_driver();
  const device::RunMemory host(&d, MOE_MEMORY_HOST, -1, "plugin 'reference'");
  for (char* ok : {m.plain.data(), m.pinned.data(), m.managed.data()})
    EXPECT_NO_THROW(host.check_run(run_in(ok)));
  moe_run_args a = run_in(m.plain.data());
  a.output.data = m.dev1.data();
  expect_error([&] { host.check_run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_run_args.output: 0x",
                "is CUDA device memory (cuda:1), but plugin "
                "'reference' runs in host memory"});
  a.output = make_view(m.dev1.data(), MOE_DTYPE_BF16, {0, 16});
  EXPECT_NO_THROW(host.check_run(a)) << "an empty tensor has no bytes to check";
  a.workspace = m.dev0.data();
  expect_error([&] { host.check_run(a); }, MOE_STATUS_INVALID_ARGUMENT, {"moe_run_args.workspace"});
  a.workspace_size = 0;
  EXPECT_NO_THROW(host.check_run(a)) << "a workspace of no bytes is not read";
  a.router_logits = make_view(m.dev0.data(), MOE_DTYPE_F32, {8, 4});
  expect_error([&] { host.check_run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_run_args.router_logits"});
}

TEST(RunMemory, AGpuPluginRefusesHostAndOtherDevicesMemory) {
  Memory m;
  const device::CudaDriver d = fake_driver();
  const device::RunMemory gpu(&d, MOE_MEMORY_CUDA_DEVICE, 0, "plugin 'trtllm_style'");
  EXPECT_NO_THROW(gpu.check_run(run_in(m.dev0.data())));
  EXPECT_NO_THROW(gpu.check_run(run_in(m.managed.data())));
  const struct {
    char* data;
    const char* says;
  } wrong[] = {
      {m.plain.data(),
       "is memory the driver does not know: plain host memory, or no allocation at all, but plugin "
       "'trtllm_style' runs in CUDA device memory: pass tensors on cuda:0"},
      {m.pinned.data(), "is host memory registered with CUDA"},
      {m.dev1.data(), "is on cuda:1, but plugin 'trtllm_style' runs on cuda:0"}};
  for (const auto& w : wrong) {
    moe_run_args a = run_in(m.dev0.data());
    a.topk_weights.data = w.data;
    expect_error([&] { gpu.check_run(a); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"moe_run_args.topk_weights: 0x", w.says});
    a.topk_weights.data = nullptr;  // the plugin's own checks refuse NULL data
    EXPECT_NO_THROW(gpu.check_run(a));
  }
  moe_route_args r{};
  r.logits = make_view(m.dev0.data(), MOE_DTYPE_F32, {8, 4});
  r.topk_ids = make_view(m.plain.data(), MOE_DTYPE_I32, {8, 2});
  expect_error([&] { gpu.check_route(r); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_route_args.topk_ids", "memory the driver does not know"});
}

TEST(RunMemory, ADriverFailureIsADeviceErrorAndNoDriverChecksNothing) {
  Memory m;
  const device::CudaDriver d = fake_driver();
  const device::RunMemory gpu(&d, MOE_MEMORY_CUDA_DEVICE, 0, "plugin 'trtllm_style'");
  g_fail = 1;
  expect_error([&] { gpu.check_run(run_in(m.dev0.data())); }, MOE_STATUS_DEVICE_ERROR,
               {"moe_run_args.hidden: cuPointerGetAttributes(0x", "CUDA_ERROR_INVALID_VALUE"});
  g_fail = device::kErrorNotInitialized;  // the driver never initialised: no device memory
  EXPECT_NO_THROW(gpu.check_run(run_in(m.plain.data())));
  g_fail = 0;
  const device::RunMemory none;  // no driver
  EXPECT_NO_THROW(none.check_run(run_in(m.dev1.data())));
}

// At prepare: the driver cuda_driver() hands out, and the device current then. A host layer
// asks at each check for a driver something loaded since (here: the test's, set after prepare).
TEST(RunMemory, OfLayerRecordsTheDeviceCurrentAtPrepare) {
  Memory m;
  const device::CudaDriver d = fake_driver();
  const device::RunMemory early = device::RunMemory::of_layer(MOE_MEMORY_HOST, "reference");
  device::set_cuda_driver_for_tests(&d);
  struct Restore {
    ~Restore() { device::set_cuda_driver_for_tests(nullptr); }
  } restore;
  g_current_device = 1;
  const device::RunMemory gpu = device::RunMemory::of_layer(MOE_MEMORY_CUDA_DEVICE, "cutlass_mega");
  EXPECT_NO_THROW(gpu.check_run(run_in(m.dev1.data())));
  expect_error(
      [&] { gpu.check_run(run_in(m.dev0.data())); }, MOE_STATUS_INVALID_ARGUMENT,
      {"is on cuda:0, but plugin 'cutlass_mega' runs on cuda:1, the device current at prepare"});
  // Another device current on the calling thread (a new thread defaults to cuda:0): refused before
  // any tensor is looked at, in run, route and the workspace allocation alike.
  g_current_device = 0;
  expect_error([&] { gpu.check_run(run_in(m.dev1.data())); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_host_layer_run: plugin 'cutlass_mega' runs this layer on cuda:1, the device "
                "current at prepare, but cuda:0 is current on this thread: make cuda:1 current"});
  moe_route_args r{};
  r.logits = make_view(m.dev1.data(), MOE_DTYPE_F32, {8, 4});
  expect_error([&] { gpu.check_route(r); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_host_layer_route: plugin 'cutlass_mega' runs this layer on cuda:1"});
  expect_error([&] { gpu.check_current("moe_host_layer_alloc"); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_host_layer_alloc: plugin 'cutlass_mega' runs this layer on cuda:1"});
  g_current_device = 1;
  EXPECT_NO_THROW(gpu.check_route(r));
  for (const device::RunMemory& host :
       {early, device::RunMemory::of_layer(MOE_MEMORY_HOST, "reference")})
    expect_error([&] { host.check_run(run_in(m.dev1.data())); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"plugin 'reference' runs in host memory"});
  // The host EP step copies its tensors on the host, whatever the plugin.
  const device::RunMemory step = device::RunMemory::host_only("moe_host_ep_step");
  moe_run_args a = run_in(m.plain.data());
  EXPECT_NO_THROW(
      step.check_step("moe_host_ep_step_args", a.hidden, a.topk_ids, a.topk_weights, a.output));
  a.topk_ids.data = m.dev0.data();
  expect_error([&] { step.check_step("args", a.hidden, a.topk_ids, a.topk_weights, a.output); },
               MOE_STATUS_INVALID_ARGUMENT,
               {"args.topk_ids: 0x",
                "is CUDA device memory (cuda:0), but moe_host_ep_step runs "
                "in host memory"});
}

}  // namespace
}  // namespace moe::test
