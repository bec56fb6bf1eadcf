// A GPU layer runs on the device it was prepared on (docs/design.md §11): the SDK's table records
// the calling thread's device at prepare (Memory::current_device) and refuses a run, or a
// benchmark's run, with another device current, naming both, before the backend sees it. Here a
// backend whose "device memory" is host memory and whose current device the test sets.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "../support/raw_layer.hpp"
#include "../support/sdk_test_backend.hpp"
#include "../support/test_env.hpp"
#include "moe/sdk/backend.hpp"

namespace moe::test {
namespace {

struct FakeDeviceMemory {
  static constexpr moe_memory kind = MOE_MEMORY_CUDA_DEVICE;
  static inline int32_t current = 0;
  static void* alloc(size_t bytes) { return std::malloc(bytes); }
  static void free(void* ptr) { std::free(ptr); }
  static void copy(void* dst, const void* src, size_t bytes, int32_t, void*) {
    std::memcpy(dst, src, bytes);
  }
  static void sync(void*) {}
  static const char* runtime_version() { return "fake"; }
  static int32_t current_device() { return current; }
};

class DeviceBackend : public Bf16TestBackend {
 public:
  using Memory = FakeDeviceMemory;
  static inline int runs = 0;
  static sdk::BackendInfo info() { return bf16_info("sdk_device", "test backend: one device"); }
  void run(Layer&, const moe_run_args&) const { ++runs; }
  void benchmark(const moe_bench_args& a, const sdk::RunFn& run) const {
    for (int32_t i = 0; i < a.num_runs; ++i) run(a.runs[i]);
  }
};

struct DeviceLayer : RawLayer {
  using RawLayer::RawLayer;
  moe_status run() const {
    moe_run_args a{};
    a.struct_size = sizeof(a);
    a.layer = layer;
    return api->run(&a);
  }
  moe_status benchmark() const {
    moe_run_args a{};
    a.struct_size = sizeof(a);
    a.layer = layer;
    moe_bench_args b{};
    b.struct_size = sizeof(b);
    b.runs = &a;
    b.num_runs = 1;
    return api->benchmark(&b);
  }
};

TEST(SdkLayerDevice, ARunWithAnotherDeviceCurrentIsRefusedNamingBoth) {
  const Problem p = small_problem();
  const LayerWeights w = random_weights(p.c(), 5);
  FakeDeviceMemory::current = 1;
  const DeviceLayer layer(sdk::plugin_api<DeviceBackend>(), p.c(), w.view());
  ASSERT_EQ(layer.run(), MOE_STATUS_OK) << layer.api->last_error();
  ASSERT_EQ(layer.benchmark(), MOE_STATUS_OK) << layer.api->last_error();
  const int before = DeviceBackend::runs;
  EXPECT_EQ(before, 2);

  FakeDeviceMemory::current = 0;
  EXPECT_EQ(layer.run(), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(layer.api->last_error(),
              testing::HasSubstr("plugin 'sdk_device' prepared this layer on device 1, but "
                                 "device 0 is current: make device 1 current"));
  EXPECT_EQ(layer.benchmark(), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(layer.api->last_error(), testing::HasSubstr("prepared this layer on device 1"));
  EXPECT_EQ(DeviceBackend::runs, before) << "the backend's run was reached";

  FakeDeviceMemory::current = 1;  // back where it was prepared: runs again
  EXPECT_EQ(layer.run(), MOE_STATUS_OK) << layer.api->last_error();
  EXPECT_EQ(DeviceBackend::runs, before + 1);
}

// A second layer prepared on device 0 keeps its own device beside the first's.
TEST(SdkLayerDevice, EachLayerKeepsTheDeviceItWasPreparedOn) {
  const Problem p = small_problem();
  const LayerWeights w = random_weights(p.c(), 6);
  FakeDeviceMemory::current = 0;
  const DeviceLayer on0(sdk::plugin_api<DeviceBackend>(), p.c(), w.view());
  FakeDeviceMemory::current = 3;
  const DeviceLayer on3(sdk::plugin_api<DeviceBackend>(), p.c(), w.view());
  EXPECT_EQ(on3.run(), MOE_STATUS_OK) << on3.api->last_error();
  EXPECT_EQ(on0.run(), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(on0.api->last_error(), testing::HasSubstr("on device 0, but device 3 is current"));
  FakeDeviceMemory::current = 0;
  EXPECT_EQ(on0.run(), MOE_STATUS_OK) << on0.api->last_error();
  EXPECT_EQ(on3.run(), MOE_STATUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace moe::test
