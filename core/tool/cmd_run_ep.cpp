// `moe run` for a problem with ep_placement: one process per GPU (torchrun, mpirun or srun),
// each with its own tokens; the layer runs expert-parallel. With random weights each rank checks
// its output against the same backend on one GPU and against the reference; with a checkpoint
// each rank loads only its experts, so there is nothing whole to check against (compare
// --output with a one-GPU run). --inputs: every rank takes its contiguous share of the file's
// tokens; --output: rank 0 writes every rank's rows in token order, as a one-GPU run does.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include "commands.hpp"
#include "moe/sdk/error.hpp"
#include "run_ep.hpp"
#include "run_inputs.hpp"

#ifdef MOE_WITH_EP
#include <nlohmann/json.hpp>

#include "bench_method.hpp"
#include "moe/checkpoint.hpp"
#include "moe/config.hpp"
#include "moe/conformance.hpp"
#include "moe/ep.hpp"
#include "moe/runner.hpp"
#include "moe/safetensors.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/selection.hpp"
#endif

namespace moe::tool {

#ifndef MOE_WITH_EP
void run_expert_parallel(const Config&, const Discovery&, const EpRunOptions&) {
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "this moe was built without expert parallelism (no CUDA toolkit headers at build time)");
}
#else
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// ep::DeviceStep (tokens all-gathered, the local layer, a reduce-scatter, the sink experts and
// the shared expert added at home, no host work between) timed back to back when it can run here
// (a plugin that can add into the output when there is a shared expert or, on several ranks,
// sink experts; the same batch on every rank), and its output against run_step's.
// Its figures go into `rec` ("chunks", "ms", "gbps", "graph_ms", "rel_l2_to_host_step";
// "not_run" with the reason where it could not run). `chunks` > 1: each rank's rows in that many
// chunks, their exchanges overlapping the layer (ep::DeviceStep).
void bench_device_step(ep::Group* group, const Layer& layer, const ep::SharedExpert& shared,
                       const moe_problem& p, const Batch& batch, const Routing& routing, int32_t n,
                       int32_t rank, int32_t chunks, nlohmann::json& rec) {
  const int64_t tokens = batch.hidden.shape()[0], h = p.hidden, w = topk_width(p);
  const auto counts = group ? group->all_gather(uint64_t(tokens), "device step batch sizes")
                            : std::vector<uint64_t>{uint64_t(tokens)};
  const bool same =
      std::all_of(counts.begin(), counts.end(), [&](uint64_t c) { return c == uint64_t(tokens); });
  chunks = int32_t(std::min<int64_t>(chunks, std::max<int64_t>(tokens, 1)));  // a row a chunk
  rec["chunks"] = chunks;
  const std::string what =
      chunks > 1 ? fmt::format("device step in {} chunks", chunks) : std::string("device step");
  auto not_run = [&](const std::string& why) {
    std::cout << fmt::format("rank {} {}: not run ({})\n", rank, what, why);
    rec["not_run"] = why;
  };
  if (!same || tokens == 0)
    return not_run(!same ? "the ranks hold different batch sizes" : "no tokens");
  const auto dev = layer.plugin().shared_from_this();
  auto upload = [&](const HostTensor& t) {
    Buffer b(dev, t.bytes());
    b.upload(t.raw(), t.bytes());
    return b;
  };
  std::optional<ep::DeviceStep> made;
  try {
    made.emplace(group, layer, p, tokens, shared, false, chunks);
  } catch (const Error& e) {
    return not_run(e.what());
  }
  const ep::DeviceStep& step = *made;
  Buffer x = upload(batch.hidden), ids = upload(routing.ids), wt = upload(routing.weights),
         y(dev, size_t(tokens * h * 2));
  // The step's tensors: views of the buffers, for the eager runs and the graph alike.
  const moe_tensor vx = make_view(x.data(), MOE_DTYPE_BF16, {tokens, h}),
                   vids = make_view(ids.data(), MOE_DTYPE_I32, {tokens, w}),
                   vwt = make_view(wt.data(), MOE_DTYPE_F32, {tokens, w}),
                   vy = make_view(y.data(), MOE_DTYPE_BF16, {tokens, h});
  std::vector<double> ms;
  for (int32_t i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step.run(vx, vids, vwt, vy, nullptr);
    layer.plugin().sync();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  HostTensor out(MOE_DTYPE_BF16, {tokens, h});
  y.download(out.raw(), out.bytes());
  // As a replayed CUDA graph (a device backend only): captured once, launched and waited for
  // one step at a time.
  std::string graph = "not run (the backend keeps host memory)";
  rec["graph_ms"] = nullptr;
  if (dev->info().memory == MOE_MEMORY_CUDA_DEVICE) {
    try {
      const ep::StepGraph g(step, vx, vids, vwt, vy);
      std::vector<double> replay;
      for (int32_t i = 0; i < n; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        g.launch();
        g.sync();
        replay.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      graph = fmt::format("{:.3f} ms", median(replay));
      rec["graph_ms"] = median(replay);
    } catch (const Error& e) {
      graph = fmt::format("not run ({})", e.what());
    }
  }
  const HostTensor host = ep::run_step(group, layer, p, batch.hidden, routing, nullptr, shared);
  const int32_t world = group ? group->world() : 1;
  // Bytes a rank sends and receives: its token rows (ids and weights too) to the others and
  // theirs to it, then the summed output rows both ways.
  const double bytes = 2.0 * double(world - 1) * double(tokens) * double(4 * h + 8 * w);
  // The two steps round differently (the device step's home passes add in bf16 once more), so
  // they agree within the format's tolerance, not bit for bit; past it the run fails.
  const double rel = relative_l2(out, host);
  const double tol = default_tolerance(static_cast<moe_format>(p.format));
  std::cout << fmt::format(
      "rank {} {} ({} steps, median, synchronised each): {:.3f} ms, {:.1f} GB/s of "
      "collectives | as a replayed graph: {} | relative L2 to the host step {:.2e} (tolerance "
      "{:.0e}) {}\n",
      rank, what, n, median(ms), bytes / median(ms) * 1e-6, graph, rel, tol,
      rel <= tol ? "ok" : "MISMATCH");
  if (!(rel <= tol)) exit_code() = kExitMismatch;
  rec["ms"] = median(ms);
  rec["gbps"] = bytes / median(ms) * 1e-6;
  rec["rel_l2_to_host_step"] = rel;
}

// Steps timed back to back, next to NCCL's own all-to-all of the same bytes and one GPU's layer.
// With `jsonl`, each rank appends its figures as one record (ep_size, ep_rank, per-rank tokens).
void bench_steps(ep::Group* group, const Layer& layer, const ep::SharedExpert& shared,
                 const Layer& single, const moe_problem& p, const moe_problem& g,
                 const Batch& batch, const Routing& routing, int32_t n, int32_t rank,
                 int32_t chunks, const std::string& jsonl) {
  std::vector<double> step, dispatch, combine, compute, raw, one;
  ep::StepStats st;
  for (int32_t i = 0; i < n; ++i) {
    ep::run_step(group, layer, p, batch.hidden, routing, &st, shared);
    step.push_back(st.ms), dispatch.push_back(st.dispatch_ms), combine.push_back(st.combine_ms);
    compute.push_back(st.compute_ms);
  }
  const int32_t world = group ? group->world() : 1;
  if (group != nullptr) {
    // The dispatch's bytes, split evenly over the ranks. Every rank must post the same sizes
    // (a send and its receive must match), so all use the largest rank's count.
    const std::vector<uint64_t> all = group->all_gather(uint64_t(st.dispatch_bytes), "bench size");
    const uint64_t most = *std::max_element(all.begin(), all.end());
    const size_t chunk = std::max<size_t>(16, size_t(most) / 2 / size_t(world));
    auto dev = layer.plugin().shared_from_this();
    Buffer s(dev, chunk * size_t(world)), r(dev, chunk * size_t(world));
    std::vector<std::pair<const void*, size_t> > sends;
    std::vector<std::pair<void*, size_t> > recvs;
    for (int32_t k = 0; k < world; ++k) {
      sends.push_back({static_cast<char*>(s.data()) + size_t(k) * chunk, chunk});
      recvs.push_back({static_cast<char*>(r.data()) + size_t(k) * chunk, chunk});
    }
    for (int32_t i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      group->exchange(sends, recvs, "all-to-all benchmark");
      raw.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  for (int32_t i = 0; i < n; ++i) one.push_back(run_layer(single, g, batch.hidden, routing).ms);
  const double gbs = 1e-6;  // bytes/ms -> GB/s
  nlohmann::json device_step = nlohmann::json::object(), chunked = nullptr;
  bench_device_step(group, layer, shared, p, batch, routing, n, rank, 1, device_step);
  if (chunks > 1) {
    chunked = nlohmann::json::object();
    bench_device_step(group, layer, shared, p, batch, routing, n, rank, chunks, chunked);
  }
  std::cout << fmt::format(
      "rank {} bench ({} steps, medians): step {:.3f} ms | dispatch {:.3f} ms, {:.1f} GB/s | "
      "combine {:.3f} ms, {:.1f} GB/s | local layer {:.3f} ms | NCCL all-to-all of the dispatch "
      "bytes {:.3f} ms, {:.1f} GB/s | one GPU layer {:.3f} ms\n",
      rank, n, median(step), median(dispatch), st.dispatch_bytes / median(dispatch) * gbs,
      median(combine), st.combine_bytes / median(combine) * gbs, median(compute), median(raw),
      raw.empty() ? 0.0 : st.dispatch_bytes / median(raw) * gbs, median(one));
  if (jsonl.empty()) return;
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  const std::optional<std::string> gpu = device_of(layer.plugin());
  const auto or_null = [](bool has, double v) {
    return has ? nlohmann::json(v) : nlohmann::json();
  };
  const nlohmann::json rec = {
      {"date", date},
      {"device", gpu ? *gpu : (layer.plugin().device_memory() ? "unknown" : "host")},
      {"backend", layer.plugin().name()},
      {"format", format_name(static_cast<moe_format>(p.format))},
      {"experts", g.experts},
      {"top_k", p.top_k},
      {"hidden", p.hidden},
      {"intermediate", p.intermediate},
      {"ep_size", world},
      {"ep_rank", rank},
      {"tokens_per_rank", batch.hidden.shape()[0]},
      {"steps", n},
      {"host_step_ms", median(step)},
      {"dispatch_ms", median(dispatch)},
      {"dispatch_gbps", st.dispatch_bytes / median(dispatch) * gbs},
      {"combine_ms", median(combine)},
      {"combine_gbps", st.combine_bytes / median(combine) * gbs},
      {"local_layer_ms", median(compute)},
      {"nccl_all_to_all_ms", or_null(!raw.empty(), median(raw))},
      {"nccl_all_to_all_gbps", or_null(!raw.empty(), st.dispatch_bytes / median(raw) * gbs)},
      {"one_gpu_layer_ms", median(one)},
      {"device_step", device_step},
      {"device_step_chunked", chunked}};
  append_line(jsonl, rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
              "--ep-jsonl");
}

// Rows [first, first + count) of a batch (its routing bias is the layer's, kept whole).
Batch batch_rows(const Batch& b, int64_t first, int64_t count) {
  auto rows = [&](const HostTensor& t) {
    if (t.empty()) return HostTensor();
    std::vector<int64_t> shape = t.shape();
    const size_t row = t.bytes() / size_t(shape[0]);
    shape[0] = count;
    HostTensor out(t.dtype(), shape);
    std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + size_t(first) * row,
                size_t(count) * row);
    return out;
  };
  return Batch{rows(b.hidden), rows(b.logits), b.bias, rows(b.is_padding)};
}

// Rank r's share of `total` tokens: contiguous, in rank order, the first total % world ranks one
// more.
std::pair<int64_t, int64_t> token_share(int64_t total, int32_t world, int32_t rank) {
  const int64_t base = total / world, extra = total % world;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

// Every rank's output rows to rank 0, in rank order (for --inputs the token order, as
// token_share splits it); [T, H] on rank 0, empty elsewhere.
HostTensor gather_rows(ep::Group* group, const Plugin& dev, const HostTensor& mine, int64_t h) {
  if (group == nullptr) return mine;
  const int32_t world = group->world(), rank = group->rank();
  const size_t row = size_t(h) * 2;
  const std::vector<uint64_t> counts = group->all_gather(uint64_t(mine.shape()[0]), "row counts");
  std::vector<size_t> offset(size_t(world) + 1, 0);
  for (int32_t r = 0; r < world; ++r) offset[size_t(r) + 1] = offset[size_t(r)] + counts[size_t(r)];
  const int64_t total = int64_t(offset.back());
  Buffer send(dev.shared_from_this(), std::max<size_t>(mine.bytes(), 1));
  if (mine.bytes()) send.upload(mine.raw(), mine.bytes());
  Buffer recv(dev.shared_from_this(), rank == 0 ? std::max<size_t>(size_t(total) * row, 1) : 1);
  std::vector<std::pair<const void*, size_t> > sends(size_t(world), {nullptr, 0});
  std::vector<std::pair<void*, size_t> > recvs(size_t(world), {nullptr, 0});
  sends[0] = {send.data(), mine.bytes()};
  if (rank == 0)
    for (int32_t r = 0; r < world; ++r)
      recvs[size_t(r)] = {static_cast<char*>(recv.data()) + offset[size_t(r)] * row,
                          size_t(counts[size_t(r)]) * row};
  group->exchange(sends, recvs, "output gather");
  if (rank != 0) return HostTensor();
  HostTensor out(MOE_DTYPE_BF16, {total, h});
  if (out.bytes()) recv.download(out.raw(), out.bytes());
  return out;
}

// A positive, finite number of seconds from environment variable `name`; `fallback` if unset.
double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  double s = 0;
  const char* end = v + std::strlen(v);
  const auto [ptr, ec] = std::from_chars(v, end, s);
  MOE_CHECK(ec == std::errc() && ptr == end && std::isfinite(s) && s > 0, MOE_STATUS_CONFIG_ERROR,
            "{}={} is not a positive number of seconds", name, v);
  return s;
}

}  // namespace

void run_expert_parallel(const Config& cfg_in, const Discovery& d, const EpRunOptions& o) {
  const ep::Launch launch = ep::launch_from_env();
  ep::pin_local_device(launch);  // before anything initialises CUDA
  Config cfg = cfg_in;
  moe_problem& raw = cfg.problem.raw();
  MOE_CHECK(raw.ep_size == launch.world, MOE_STATUS_CONFIG_ERROR, "{}",
            launch.launcher == std::string("single")
                ? fmt::format("the config has ep_size={}, and this is one process started without "
                              "a launcher: run one process a rank under torchrun, mpirun or srun "
                              "(scripts/ep_check.sh shows how)",
                              raw.ep_size)
                : fmt::format("the config has ep_size={} but {} started {} process(es)",
                              raw.ep_size, launch.launcher, launch.world));
  raw.ep_rank = launch.rank;
  cfg.problem.finalize();
  const moe_problem p = cfg.problem.c();
  validate_problem(p);
  // Before any weight is drawn (an --inputs file's tokens are checked as it is read): a rank's
  // own tokens must fit its layer, as on one GPU.
  MOE_CHECK(!o.inputs.empty() || o.tokens <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
            "{} tokens a rank (--tokens) are above max_tokens={} of {} (raise it there, or run "
            "fewer)",
            o.tokens, p.max_tokens, cfg.source);
  Problem whole = cfg.problem;  // the same layer on one GPU
  whole.raw().ep_placement = MOE_EP_NONE;
  whole.raw().ep_size = 1;
  whole.raw().ep_rank = 0;
  whole.finalize();
  const moe_problem g = whole.c();

  const Registry r = d.discover(cfg.plugin_dirs, cfg.source);
  const Selection sel = select_checked(r, cfg);
  const auto reference = r.oracle();
  MOE_CHECK(reference != nullptr, MOE_STATUS_NOT_FOUND, "the reference plugin was not found");
  // Weights: this rank's experts of the checkpoint (load_layer on the EP problem), or the whole
  // layer drawn from the seed (the same on every rank) and this rank's experts of it.
  const bool drawn = !cfg.checkpoint;
  std::optional<InputsFile> file;  // read and checked before any weight is loaded
  if (!o.inputs.empty()) file = read_run_inputs_file(cfg, o.inputs, /*one_batch=*/false);
  LayerWeights global, local;
  LayerCheckpoint checkpoint;
  if (drawn) {
    global = random_weights(g, o.seed);
    local = slice_local_experts(global, p);
  } else {
    checkpoint = load_layer(Checkpoint::open(cfg.checkpoint->path), *cfg.checkpoint, p);
    local = std::move(checkpoint.weights);
  }

  // This rank's tokens: its share of --inputs, or its own random ones (none on --ep-empty-rank);
  // --ep-skew sends them all to rank 0's experts.
  const int64_t own = launch.rank == o.empty_rank ? 0 : o.tokens;
  std::string from;
  Batch all = make_run_batch(cfg, drawn ? nullptr : &checkpoint, own,
                             mix_seed(o.seed, fmt::format("rank{}", launch.rank)),
                             file ? &*file : nullptr, &from);
  const int64_t total = o.inputs.empty() ? own : all.hidden.shape()[0];
  const auto [first, tokens] = o.inputs.empty() ? std::pair<int64_t, int64_t>{0, own}
                                                : token_share(total, launch.world, launch.rank);
  Batch batch = o.inputs.empty() ? std::move(all) : batch_rows(all, first, tokens);
  if (o.skew) {
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t e = 0; e < g.experts; ++e)
        if (expert_owner(p, e) == 0)
          batch.logits.data<float>()[t * (g.experts + g.sink_experts) + e] += 20.0f;
  }
  const Plugin& router = sel.plugin->can_route(g) ? *sel.plugin : *reference;
  const Routing routing = route_batch(router, g, batch);

  // A shared expert runs once per token, at home: split off as a layer of its own (moe/ep.hpp).
  std::optional<ep::SharedSplit> split;
  const moe_weights local_view = local.view();
  if (p.shared_intermediate > 0) split = ep::split_shared_expert(p, local_view);
  const moe_problem routed = split ? split->routed.c() : p;
  const Layer layer =
      sel.plugin->prepare(routed, split ? split->routed_weights : local_view, sel.options);
  std::optional<Layer> shared_layer;
  ep::SharedExpert shared;
  if (split) {
    shared_layer.emplace(
        sel.plugin->prepare(split->shared.c(), split->shared_weights, sel.options));
    shared = {&*shared_layer, split->shared.c()};
  }
  std::unique_ptr<ep::Group> group;
  if (launch.world > 1) {
    const char* dir = std::getenv("MOE_EP_RENDEZVOUS");
    group = ep::Group::connect(launch, sel.plugin, dir && *dir ? dir : "/tmp",
                               env_seconds("MOE_EP_TIMEOUT_S", 120),
                               config_digest(p, sel.plugin->name(), o.seed));
  }
  ep::StepStats stats;
  const HostTensor out =
      ep::run_step(group.get(), layer, routed, batch.hidden, routing, &stats, shared);

  const std::string head =
      fmt::format("rank {}/{} ({}): backend {} | {} | tokens {} sent {} received {}", launch.rank,
                  launch.world, launch.launcher, sel.plugin->name(), describe_problem(p), tokens,
                  stats.tokens_sent, stats.tokens_received);
  if (!o.output.empty()) {
    const HostTensor rows = gather_rows(group.get(), *sel.plugin, out, g.hidden);
    if (launch.rank == 0) write_safetensors(o.output, {{"output", rows}});
  }
  const std::string wrote = !o.output.empty() && launch.rank == 0 ? " | output " + o.output : "";
  if (!drawn) {  // each rank holds only its experts: nothing whole to check against
    std::cout << fmt::format(
        "{} | inputs {} | weights: checkpoint {} (this rank's {} experts), "
        "not checked (compare --output with a one-GPU run) | {:.2f} ms{}\n",
        head, from, cfg.checkpoint->path, p.local_experts, stats.ms, wrote);
    return;
  }
  const Layer single = sel.plugin->prepare(g, global.view(), sel.options);
  const RunResult one = run_layer(single, g, batch.hidden, routing);
  double vs_ref = 0;
  std::string ref_text = "not computed (--ep-bench)";
  if (o.bench == 0) {  // the fp64 CPU reference is too slow for benchmark-sized batches
    const Layer ref_layer = reference->prepare(g, global.view(), {});
    const RunResult ref = run_layer(ref_layer, g, batch.hidden, routing, MOE_DTYPE_F64);
    vs_ref = relative_l2(out, ref.output);
    ref_text = fmt::format("{:.3e}", vs_ref);
  }
  const double vs_one = relative_l2(out, one.output);
  const double tol = default_tolerance(static_cast<moe_format>(g.format));
  std::cout << fmt::format(
      "{} | rel_err vs one GPU {:.3e}, vs reference {} (tolerance {:.0e}) {} | {:.2f} ms{}\n", head,
      vs_one, ref_text, tol, vs_one <= tol && vs_ref <= tol ? "ok" : "MISMATCH", stats.ms, wrote);
  if (!(vs_one <= tol && vs_ref <= tol)) exit_code() = kExitMismatch;
  if (o.bench > 0)
    bench_steps(group.get(), layer, shared, single, routed, g, batch, routing, o.bench, launch.rank,
                o.chunks, o.jsonl);
}
#endif

}  // namespace moe::tool
