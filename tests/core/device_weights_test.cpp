// Device weights staged to the host (moe/device_weights.hpp), proved on the CPU through a fake
// CUDA driver: "device memory" is host memory the fake lists as allocations of a device, so every
// check the real driver answers (memory type, device, allocation bounds) and the copy itself can
// be seen to work and to fail, with the field named. The real driver's path runs on a GPU in
// tests/python/test_device_weights_gpu.py.
#include <array>
#include <cstring>
#include <numeric>
#include <vector>

#include "../support/fake_pointer_regions.hpp"
#include "../support/test_env.hpp"
#include "device/cuda_driver.hpp"
#include "moe/device_weights.hpp"

namespace moe::test {
namespace {

// The fake driver's state: allocations by device, and what was called.
struct FakeState {
  int devices = 2;
  int pushed = 0, popped = 0, retained = 0, released = 0;
  int copies = 0, failing_copy = -1;  // failing_copy: the index of a copy that fails
  void* copy_stream = nullptr;
  void* synced_stream = nullptr;
} g_fake;

int fake_device_count(int* n) {
  *n = g_fake.devices;
  return 0;
}
int fake_retain(void** ctx, int) {
  ++g_fake.retained;
  *ctx = &g_fake;
  return 0;
}
int fake_release(int) {
  ++g_fake.released;
  return 0;
}
int fake_push(void*) {
  ++g_fake.pushed;
  return 0;
}
int fake_pop(void** ctx) {
  ++g_fake.popped;
  *ctx = &g_fake;
  return 0;
}
int fake_copy(void* dst, uint64_t src, size_t bytes, void* stream) {
  if (g_fake.copies++ == g_fake.failing_copy) return 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
  g_fake.copy_stream = stream;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return 0;
}
int fake_sync(void* stream) {
  g_fake.synced_stream = stream;
  return 0;
}
int fake_error_name(int result, const char** name) {
  *name = result == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_UNKNOWN";
  return 0;
}

device::CudaDriver fake_driver() {
  device::CudaDriver d{};
  d.device_get_count = fake_device_count;
  d.primary_ctx_retain = fake_retain;
  d.primary_ctx_release = fake_release;
  d.ctx_push = fake_push;
  d.ctx_pop = fake_pop;
  d.pointer_get_attributes = fake_pointer_attributes;
  d.memcpy_dtoh_async = fake_copy;
  d.stream_synchronize = fake_sync;
  d.error_name = fake_error_name;
  d.library = "fake";
  return d;
}

// bf16 w13 [E, 2I, H] and w2 [E, H, I] of a small problem, as "device" allocations of `device`.
struct DeviceWeights {
  std::vector<uint16_t> w13, w2;
  moe_weights w{};

  explicit DeviceWeights(int device, int64_t e = 2, int64_t h = 8, int64_t i = 4)
      : w13(size_t(e * 2 * i * h)), w2(size_t(e * h * i)) {
    std::iota(w13.begin(), w13.end(), uint16_t(1));
    std::iota(w2.begin(), w2.end(), uint16_t(1000));
    w.struct_size = sizeof w;
    w.w13 = make_view(w13.data(), MOE_DTYPE_BF16, {e, 2 * i, h});
    w.w2 = make_view(w2.data(), MOE_DTYPE_BF16, {e, h, i});
    g_fake = FakeState{};
    fake_regions() = {{reinterpret_cast<const uint8_t*>(w13.data()), w13.size() * 2, device},
                      {reinterpret_cast<const uint8_t*>(w2.data()), w2.size() * 2, device}};
  }
};

void expect_balanced_context() {
  EXPECT_EQ(g_fake.pushed, g_fake.popped);
  EXPECT_EQ(g_fake.retained, g_fake.released);
}

TEST(DeviceWeights, EveryPresentTensorIsCopiedToTheHostOnTheCallersStream) {
  DeviceWeights dev(1);
  int stream_tag = 0;
  const StagedWeights staged = stage_device_weights(fake_driver(), dev.w, 1, &stream_tag);
  const moe_weights& host = staged.weights();
  EXPECT_NE(host.w13.data, dev.w.w13.data);
  EXPECT_EQ(std::memcmp(host.w13.data, dev.w13.data(), dev.w13.size() * 2), 0);
  EXPECT_EQ(std::memcmp(host.w2.data, dev.w2.data(), dev.w2.size() * 2), 0);
  EXPECT_EQ(host.w2.shape[1], 8);
  EXPECT_EQ(host.w13_scale.data, nullptr);  // absent stays absent
  EXPECT_EQ(host.b13.data, nullptr);
  EXPECT_EQ(staged.bytes(), (dev.w13.size() + dev.w2.size()) * 2);
  EXPECT_EQ(g_fake.copies, 2);
  EXPECT_EQ(g_fake.copy_stream, &stream_tag);
  EXPECT_EQ(g_fake.synced_stream, &stream_tag);
  EXPECT_EQ(g_fake.pushed, 1);
  expect_balanced_context();
}

TEST(DeviceWeights, StagedWeightsPrepareLikeTheHostOnes) {
  const Problem p = small_problem();
  const LayerWeights host = random_weights(p.c(), 3);
  // The same bytes, listed as allocations of cuda:0.
  std::vector<uint8_t> w13(static_cast<const uint8_t*>(host.w13.raw()),
                           static_cast<const uint8_t*>(host.w13.raw()) + host.w13.bytes());
  std::vector<uint8_t> w2(static_cast<const uint8_t*>(host.w2.raw()),
                          static_cast<const uint8_t*>(host.w2.raw()) + host.w2.bytes());
  moe_weights w = host.view();
  w.w13.data = w13.data();
  w.w2.data = w2.data();
  g_fake = FakeState{};
  fake_regions() = {{w13.data(), w13.size(), 0}, {w2.data(), w2.size(), 0}};
  const StagedWeights staged = stage_device_weights(fake_driver(), w, 0, nullptr);

  const Registry r = registry_of({build_plugin_dir()});
  const auto ref = r.find("reference");
  ASSERT_NE(ref, nullptr);
  const Batch batch = random_batch(p.c(), 5, 4, Scenario::kRandom);
  const Routing routing = route_batch(*ref, p.c(), batch);
  const RunResult want =
      run_layer(ref->prepare(p.c(), host.view(), {}), p.c(), batch.hidden, routing);
  const RunResult got =
      run_layer(ref->prepare(p.c(), staged.weights(), {}), p.c(), batch.hidden, routing);
  EXPECT_EQ(std::memcmp(got.output.raw(), want.output.raw(), want.output.bytes()), 0);
}

TEST(DeviceWeights, HostMemoryLabelledDeviceIsRefusedNamingTheField) {
  DeviceWeights dev(0);
  std::vector<uint16_t> plain(dev.w2.size());
  dev.w.w2.data = plain.data();  // not an allocation the driver knows
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 0, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, {"weights.w2", "plain host memory", "cuda:0"});
  EXPECT_EQ(g_fake.copies, 0);  // nothing moved before every tensor was checked
  expect_balanced_context();
}

TEST(DeviceWeights, ATensorOnAnotherDeviceIsRefusedNamingBoth) {
  DeviceWeights dev(0);
  fake_regions()[1].device = 1;
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 0, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT,
               {"weights.w2: on cuda:1, but the weights are said to be on cuda:0"});
  expect_balanced_context();
}

TEST(DeviceWeights, AShapeLargerThanItsAllocationIsRefused) {
  DeviceWeights dev(0);
  dev.w.w13.shape[0] = 3;  // one expert more than was allocated
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 0, nullptr); },
               MOE_STATUS_SHAPE_MISMATCH, {"weights.w13", "[3, 8, 8] bf16", "past the end"});
}

TEST(DeviceWeights, ANonContiguousViewIsRefused) {
  DeviceWeights dev(0);
  dev.w.w2.shape[2] = 2;  // every other column of [2, 8, 4]
  dev.w.w2.strides[0] = 32;
  dev.w.w2.strides[1] = 4;
  dev.w.w2.strides[2] = 2;
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 0, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, {"weights.w2", "non-contiguous", "strides (32, 4, 2)"});
}

TEST(DeviceWeights, ABadDtypeOrShapeIsRefused) {
  DeviceWeights dev(0);
  dev.w.w13.dtype = 99;
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 0, nullptr); },
               MOE_STATUS_DTYPE_MISMATCH, {"weights.w13", "99"});
  DeviceWeights negative(0);
  negative.w.w2.shape[1] = -8;
  expect_error([&] { stage_device_weights(fake_driver(), negative.w, 0, nullptr); },
               MOE_STATUS_SHAPE_MISMATCH, {"weights.w2"});
}

TEST(DeviceWeights, ADeviceThisProcessDoesNotSeeIsRefused) {
  DeviceWeights dev(0);
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 2, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, {"cuda:2", "sees 2 CUDA device(s)"});
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, -1, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, {"cuda:-1"});
}

TEST(DeviceWeights, AFailedCopyIsADeviceErrorNamingTheField) {
  DeviceWeights dev(0);
  g_fake.failing_copy = 1;
  expect_error([&] { stage_device_weights(fake_driver(), dev.w, 0, nullptr); },
               MOE_STATUS_DEVICE_ERROR, {"weights.w2", "CUDA_ERROR_ILLEGAL_ADDRESS"});
  expect_balanced_context();
}

TEST(DeviceWeights, EmptyTensorsNeedNoDeviceMemory) {
  DeviceWeights dev(0, /*e=*/0);
  dev.w.w13.data = reinterpret_cast<void*>(uintptr_t(16));  // never read: no bytes
  const StagedWeights staged = stage_device_weights(fake_driver(), dev.w, 0, nullptr);
  EXPECT_NE(staged.weights().w13.data, nullptr);  // present, with zero elements
  EXPECT_EQ(staged.bytes(), 0u);
  EXPECT_EQ(g_fake.copies, 0);
}

}  // namespace
}  // namespace moe::test
