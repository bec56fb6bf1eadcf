// `moe run` for a problem with ep_placement: one process per GPU (torchrun, mpirun or srun),
// each with its own tokens; the layer runs expert-parallel and each rank checks its output
// against the same backend on one GPU and against the reference.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>

#include "commands.hpp"
#include "run_ep.hpp"

#ifdef MOE_WITH_EP
#include "moe/ep.hpp"
#endif

namespace moe::tool {

#ifndef MOE_WITH_EP
void run_expert_parallel(const Config&, const Discovery&, const EpRunOptions&) {
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "this moe was built without expert parallelism (no CUDA toolkit headers at build time)");
}
#else
namespace {

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::stod(v) : fallback;
}

}  // namespace

void run_expert_parallel(const Config& cfg_in, const Discovery& d, const EpRunOptions& o) {
  const ep::Launch launch = ep::launch_from_env();
  ep::pin_local_device(launch);  // before anything initialises CUDA
  Config cfg = cfg_in;
  moe_problem& raw = cfg.problem.raw();
  MOE_CHECK(raw.ep_size == launch.world, MOE_STATUS_CONFIG_ERROR,
            "the config has ep_size={} but {} started {} process(es)", raw.ep_size, launch.launcher,
            launch.world);
  raw.ep_rank = launch.rank;
  cfg.problem.finalize();
  const moe_problem p = cfg.problem.c();
  validate_problem(p);
  Problem whole = cfg.problem;  // the same layer on one GPU
  whole.raw().ep_placement = MOE_EP_NONE;
  whole.raw().ep_size = 1;
  whole.raw().ep_rank = 0;
  whole.finalize();
  const moe_problem g = whole.c();

  const Registry r = d.discover(cfg.plugin_dirs);
  const Selection sel = select_backend(r, cfg);
  const auto reference = r.find("reference");
  MOE_CHECK(reference != nullptr, MOE_STATUS_NOT_FOUND, "the reference plugin was not found");
  const LayerWeights global = random_weights(g, o.seed);
  const LayerWeights local = slice_local_experts(global, p);

  // This rank's tokens; --ep-skew sends them all to rank 0's experts.
  const int64_t tokens = launch.rank == o.empty_rank ? 0 : o.tokens;
  Batch batch = random_batch(g, tokens, mix_seed(o.seed, fmt::format("rank{}", launch.rank)),
                             Scenario::kRandom);
  if (o.skew) {
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t e = 0; e < g.experts; ++e)
        if (expert_owner(p, e) == 0)
          batch.logits.data<float>()[t * (g.experts + g.sink_experts) + e] += 20.0f;
  }
  const Plugin& router = sel.plugin->can_route(g) ? *sel.plugin : *reference;
  const Routing routing = route_batch(router, g, batch);

  const Layer layer = sel.plugin->prepare(p, local.view(), cfg.options);
  std::unique_ptr<ep::Group> group;
  if (launch.world > 1) {
    const char* dir = std::getenv("MOE_EP_RENDEZVOUS");
    group = ep::Group::connect(launch, sel.plugin, dir && *dir ? dir : "/tmp",
                               env_seconds("MOE_EP_TIMEOUT_S", 120),
                               config_digest(g, sel.plugin->name(), o.seed));
  }
  ep::StepStats stats;
  const HostTensor out = ep::run_step(group.get(), layer, p, batch.hidden, routing, &stats);

  const Layer single = sel.plugin->prepare(g, global.view(), cfg.options);
  const RunResult one = run_layer(single, g, batch.hidden, routing);
  const Layer ref_layer = reference->prepare(g, global.view(), {});
  const RunResult ref = run_layer(ref_layer, g, batch.hidden, routing, MOE_DTYPE_F64);
  const double vs_one = relative_l2(out, one.output), vs_ref = relative_l2(out, ref.output);
  const double tol = default_tolerance(static_cast<moe_format>(g.format));
  std::cout << fmt::format(
      "rank {}/{} ({}): backend {} | {} | tokens {} sent {} received {} | rel_err vs one GPU "
      "{:.3e}, vs reference {:.3e} (tolerance {:.0e}) {} | {:.2f} ms\n",
      launch.rank, launch.world, launch.launcher, sel.plugin->name(), describe_problem(p), tokens,
      stats.tokens_sent, stats.tokens_received, vs_one, vs_ref, tol,
      vs_one <= tol && vs_ref <= tol ? "ok" : "MISMATCH", stats.ms);
  if (!(vs_one <= tol && vs_ref <= tol)) exit_code() = kExitMismatch;
}
#endif

}  // namespace moe::tool
