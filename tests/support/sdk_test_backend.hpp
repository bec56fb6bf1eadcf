// What the SDK table builder's test backends share (tests/core/abi_run_*_test.cpp): a bf16
// silu_mul declaration, any problem supported, an empty layer; and the run features a plugin's
// get_info() writes.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "moe/sdk/backend.hpp"

namespace moe::test {

struct NoLayer {};

struct Bf16TestBackend {
  using Layer = NoLayer;
  static sdk::BackendInfo bf16_info(const char* name, const char* description) {
    sdk::BackendInfo i;
    i.name = name;
    i.description = description;
    i.formats = {MOE_FORMAT_BF16};
    i.activations = {MOE_ACTIVATION_SILU_MUL};
    return i;
  }
  sdk::Verdict supports(const moe_problem&) const { return sdk::Verdict::yes(); }
  std::unique_ptr<Layer> prepare(const sdk::PrepareRequest&) const {
    return std::make_unique<Layer>();
  }
};

// moe_plugin_info.run_features as `api` writes it, over a value no plugin writes.
inline uint32_t run_features_of(const moe_plugin_api* api) {
  moe_plugin_info info{};
  info.struct_size = sizeof(info);
  info.run_features = 0xdeadu;
  EXPECT_EQ(api->get_info(&info), MOE_STATUS_OK) << api->last_error();
  return info.run_features;
}

}  // namespace moe::test
