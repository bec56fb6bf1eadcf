// Device timing of run() for `moe bench` (moe_plugin_api.benchmark), for every GPU plugin.
#pragma once

#include <functional>

#include "moe/abi/moe_abi.h"

namespace moe::gpu {

// Runs args.warmup untimed iterations, then args.iterations timed ones back to back on a stream
// of its own, cycling through the run sets; each iteration's time is the gap between device
// events recorded around it. With use_graph each run set is captured once and replayed.
// `run` launches one run set on the given stream.
void benchmark(const moe_bench_args& args, const std::function<void(const moe_run_args&)>& run);

}  // namespace moe::gpu
