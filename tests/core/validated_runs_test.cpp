// The SDK's memory of validated run arguments: the very same tensors are known, any change to a
// tensor's pointer, shape, dtype or strides, the workspace or the extensions is not; the stream
// does not matter.
#include "moe/sdk/validated_runs.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

namespace moe::sdk {
namespace {

moe_tensor tensor(void* data, moe_dtype dtype, int64_t rows, int64_t cols) {
  moe_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

moe_run_args run(std::vector<char>& buf) {
  moe_run_args a{};
  a.struct_size = sizeof(a);
  a.hidden = tensor(buf.data(), MOE_DTYPE_BF16, 4, 256);
  a.topk_ids = tensor(buf.data() + 4096, MOE_DTYPE_I32, 4, 2);
  a.topk_weights = tensor(buf.data() + 8192, MOE_DTYPE_F32, 4, 2);
  a.output = tensor(buf.data() + 12288, MOE_DTYPE_BF16, 4, 256);
  a.workspace = buf.data() + 16384;
  a.workspace_size = 4096;
  return a;
}

TEST(SdkValidatedRuns, KnowsTheSameTensorsAndNothingElse) {
  std::vector<char> buf(32768);
  ValidatedRuns v;
  const moe_run_args a = run(buf);
  EXPECT_FALSE(v.known(a));
  v.remember(a);
  EXPECT_TRUE(v.known(a));
  moe_run_args other_stream = a;
  other_stream.stream = &buf;  // not part of what is validated
  EXPECT_TRUE(v.known(other_stream));
  const std::vector<std::function<void(moe_run_args&)>> changes = {
      [&](moe_run_args& b) { b.hidden.data = buf.data() + 2; },
      [](moe_run_args& b) { b.hidden.shape[0] = 5; },
      [](moe_run_args& b) { b.topk_ids.dtype = MOE_DTYPE_I64; },
      [](moe_run_args& b) { b.topk_weights.strides[0] = 4; },
      [](moe_run_args& b) { b.output.ndim = 1; },
      [&](moe_run_args& b) { b.workspace = buf.data(); },
      [](moe_run_args& b) { b.workspace_size = 100; },
      [](moe_run_args& b) {
        static const moe_extension ext{};
        b.ext = &ext;
      },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    moe_run_args b = a;
    changes[i](b);
    EXPECT_FALSE(v.known(b)) << "change " << i;
  }
  moe_run_args b = a;
  b.hidden.shape[0] = 5;
  v.remember(b);  // only the last one is remembered
  EXPECT_TRUE(v.known(b));
  EXPECT_FALSE(v.known(a));
}

TEST(SdkValidatedRuns, ConcurrentCallersSeeOneOfTheirRuns) {
  std::vector<char> buf(32768);
  ValidatedRuns v;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      moe_run_args a = run(buf);
      a.hidden.shape[0] = t + 1;
      for (int i = 0; i < 1000; ++i) {
        v.remember(a);
        (void)v.known(a);
      }
    });
  for (auto& th : threads) th.join();
  int known = 0;
  for (int t = 0; t < 4; ++t) {
    moe_run_args a = run(buf);
    a.hidden.shape[0] = t + 1;
    known += v.known(a) ? 1 : 0;
  }
  EXPECT_EQ(known, 1);
}

}  // namespace
}  // namespace moe::sdk
