// The C++ API's answer for the inputs of capi_inputs.h: routes and runs them with the reference
// plugin through moe::Plugin and moe::Layer, and writes the results (capi_results) for
// capi_test.c to compare with what the C API gives.
//   moe_capi_cpp_expected PLUGIN_DIR OUT_FILE
#include <cstdio>
#include <exception>
#include <memory>

#include "capi_inputs.h"
#include "moe/moe.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: moe_capi_cpp_expected PLUGIN_DIR OUT_FILE\n");
    return 2;
  }
  try {
    moe::DiscoveryOptions o;
    o.config_dirs = {argv[1]};
    o.use_env = false;
    o.use_default = false;
    const moe::Registry registry = moe::Registry::discover(o);
    const auto reference = registry.find("reference");
    MOE_CHECK(reference != nullptr, MOE_STATUS_NOT_FOUND, "no reference plugin in {}", argv[1]);

    moe_problem raw = moe::default_problem();
    capi_set_problem(&raw);
    moe::Problem problem(raw);
    problem.finalize();
    const moe_problem p = problem.c();
    auto in = std::make_unique<capi_inputs>();
    capi_make_inputs(in.get());
    const moe::Layer layer = reference->prepare(p, capi_weights(in.get()), {});

    auto out = std::make_unique<capi_results>();
    moe_route_args route{};
    route.problem = &p;
    route.logits = capi_tensor(in->logits, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_EXPERTS, 0);
    route.topk_ids = capi_tensor(out->topk_ids, MOE_DTYPE_I32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
    route.topk_weights =
        capi_tensor(out->topk_weights, MOE_DTYPE_F32, 2, CAPI_TOKENS, CAPI_TOP_K, 0);
    reference->route(route);

    moe_run_args run{};
    run.hidden = capi_tensor(in->hidden, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
    run.topk_ids = route.topk_ids;
    run.topk_weights = route.topk_weights;
    run.output = capi_tensor(out->output, MOE_DTYPE_BF16, 2, CAPI_TOKENS, CAPI_HIDDEN, 0);
    layer.run(run);  // the reference needs no workspace

    std::FILE* f = std::fopen(argv[2], "wb");
    MOE_CHECK(f != nullptr, MOE_STATUS_IO_ERROR, "cannot write {}", argv[2]);
    const bool ok = std::fwrite(out.get(), sizeof(capi_results), 1, f) == 1;
    MOE_CHECK(std::fclose(f) == 0 && ok, MOE_STATUS_IO_ERROR, "cannot write {}", argv[2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_capi_cpp_expected: %s\n", e.what());
    return 1;
  }
}
