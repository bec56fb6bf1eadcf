// The SDK's expert biases as kernels read them: bf16 or f32 in, f32 out, and a clear refusal of
// anything else.
#include "moe/sdk/bias_values.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::sdk {
namespace {

template <class T>
moe_tensor tensor(std::vector<T>& v, moe_dtype dtype, int64_t rows, int64_t cols) {
  moe_tensor t{};
  t.data = v.data();
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

TEST(SdkBiasValues, Bf16AndF32BecomeTheSameFloats) {
  std::vector<float> f = {0.5f, -1.25f, 3.0f, 1e-3f, -7.0f, 0.0f};
  std::vector<uint16_t> b;
  for (float x : f) b.push_back(float_to_bf16(x));
  const std::vector<float> from_f32 = bias_values(tensor(f, MOE_DTYPE_F32, 2, 3), "b13", 6);
  const std::vector<float> from_bf16 = bias_values(tensor(b, MOE_DTYPE_BF16, 2, 3), "b13", 6);
  EXPECT_EQ(from_f32, f);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(from_bf16[i], bf16_to_float(b[i]));
}

void expect_refusal(const moe_tensor& t, int64_t count, const std::string& words) {
  try {
    bias_values(t, "b2", count);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(SdkBiasValues, AnotherDtypeCountOrAnAbsentTensorIsRefusedByName) {
  std::vector<float> f(6, 1.0f);
  std::vector<uint8_t> u(6, 0);
  expect_refusal(tensor(f, MOE_DTYPE_F32, 2, 3), 8, "b2 is [2, 3] f32; expected 8");
  expect_refusal(tensor(u, MOE_DTYPE_U8, 2, 3), 6, "b2 is [2, 3] u8");
  expect_refusal(moe_tensor{}, 6, "b2 is absent");
}

}  // namespace
}  // namespace moe::sdk
