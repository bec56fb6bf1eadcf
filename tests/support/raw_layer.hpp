// A layer of a plugin's raw function table (moe_plugin_api), for tests of what the SDK's table
// builder writes and refuses: init(), prepare() of `problem` with `weights`, and on destruction
// destroy_layer() and shutdown(). Failures are test failures (EXPECT), naming last_error().
#pragma once

#include <gtest/gtest.h>

#include "moe/abi/moe_abi.h"

namespace moe::test {

struct RawLayer {
  const moe_plugin_api* api;
  moe_layer* layer = nullptr;
  RawLayer(const moe_plugin_api* a, const moe_problem& problem, const moe_weights& weights)
      : api(a) {
    moe_host_api host{};
    host.struct_size = sizeof(host);
    host.core_abi_major = MOE_ABI_VERSION_MAJOR;
    host.core_abi_minor = MOE_ABI_VERSION_MINOR;
    host.log_level = MOE_LOG_ERROR;
    EXPECT_EQ(api->init(&host), MOE_STATUS_OK) << api->last_error();
    moe_prepare_args args{};
    args.struct_size = sizeof(args);
    args.problem = &problem;
    args.weights = &weights;
    EXPECT_EQ(api->prepare(&args, &layer), MOE_STATUS_OK) << api->last_error();
  }
  RawLayer(const RawLayer&) = delete;
  RawLayer& operator=(const RawLayer&) = delete;
  ~RawLayer() {
    api->destroy_layer(layer);
    moe_shutdown_args done{};
    done.struct_size = sizeof(done);
    api->shutdown(&done);
  }
};

}  // namespace moe::test
