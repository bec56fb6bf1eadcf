// moe bench --config FILE [--tokens T,...]: times one layer per token count on the selected
// backend (docs/design.md §8): median time after warm-up (device events, or the host clock for a
// plugin without device timing), activations rotated through several input sets, and the floor
// max(weight + scale bytes the batch touches / HBM read bandwidth, flops / peak of the format's
// tensor-core path), both counting only this rank's experts (expert parallelism) and averaged
// over the input sets. Also times prepare (weights -> layer, upload included). The report says
// what was timed and whether the floor's H200 ceilings apply to the device the plugin ran on.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "bench_method.hpp"
#include "cli_numbers.hpp"
#include "commands.hpp"
#include "gpu_monitor.hpp"
#include "moe/config.hpp"
#include "moe/conformance.hpp"
#include "moe/runner.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"
#include "moe/selection.hpp"

namespace moe::tool {
namespace {

// Ceilings measured on one H200 (docs/design.md §8). Weights are only read, so the bandwidth is
// HBM's streaming read (4.6 TB/s), not the device copy (4.16, read plus write). Peaks: cuBLAS
// bf16 8192^3, cuBLASLt fp8 with per-tensor scales, fp8 with 1x128/128x128 block scales.
constexpr double kHbmReadTbps = 4.6;
constexpr double kBf16PeakTflops = 754.0, kFp8TensorPeakTflops = 1315.0,
                 kFp8BlockPeakTflops = 1297.0;
constexpr double kL2Bytes = 60e6;
constexpr int kHostCalls = 200;  // calls timed one by one for the host cost per call (median)
// Selection-bias spread of the benchmark batches: small, like a trained correction bias, so
// tokens spread over the experts as in serving (0.5 sent DeepSeek's tokens to 65 of 256).
constexpr double kBenchBiasStd = 0.02;

struct Point {
  int64_t tokens = 0;
  double ms = 0, tflops = 0, weight_tbps = 0, floor_ms = 0, rel_err = NAN;
  // Means over the input sets, as the time is taken over all of them: the routed experts this
  // rank's runs touch, and their routed (token, expert) pairs.
  double active_experts = 0, routed_slots = 0;
  Timing timing = Timing::kHost;
  bool graph = false;      // replayed as a CUDA graph (the records' "graph", read by bench/*.py)
  double ms_stream = NAN;  // with graph: the same runs launched one by one, for like-with-like
  double host_us = NAN;    // device-timed plugins: host time per call (Plugin::host_us_per_call)
  std::optional<GpuSamples> gpu;  // the GPU's clock and power while `ms` was timed (NVML)
};

// Bytes of one [rows, cols] weight matrix of `format` as stored: elements, scales, and nvfp4's
// per-matrix scale_2.
double matrix_bytes(moe_format format, int64_t rows, int64_t cols) {
  const MatrixLayout m = matrix_layout(format, rows, cols);
  double bytes = double(m.rows) * double(m.stored_cols) * double(dtype_size(m.dtype));
  if (m.scale_dtype != MOE_DTYPE_INVALID)
    bytes += double(scale_count(m)) * double(dtype_size(m.scale_dtype));
  if (m.has_scale_2) bytes += sizeof(float);
  return bytes;
}

// The peak of the tensor-core path: fp8 MMAs need fp8 weights and fp8 activations; with bf16
// activations (4-bit weights, or mxfp8 / fp8 weights given bf16 inputs) the weights are widened
// and the MMAs run at bf16's peak.
double peak_tflops(const moe_problem& p) {
  const auto f = static_cast<moe_format>(p.format);
  const bool fp8_weights =
      f == MOE_FORMAT_FP8_TENSOR || f == MOE_FORMAT_FP8_BLOCK || f == MOE_FORMAT_MXFP8;
  if (!fp8_weights || p.input_format == MOE_INPUT_BF16) return kBf16PeakTflops;
  const bool per_tensor =
      f == MOE_FORMAT_FP8_TENSOR && (p.input_format == MOE_INPUT_FP8_TENSOR_DYNAMIC ||
                                     p.input_format == MOE_INPUT_FP8_TENSOR_STATIC);
  return per_tensor ? kFp8TensorPeakTflops : kFp8BlockPeakTflops;
}

// What the floor counts, from the canonical geometry: bytes and multiply-adds of one routed
// expert, and of the shared and sink experts that every token uses (sinks are bf16).
struct LayerCost {
  double routed_bytes = 0, routed_macs = 0;  // one routed expert; macs per (token, expert)
  double shared_bytes = 0, shared_macs = 0;  // shared expert (layer format); macs per token
  double sink_bytes = 0, sink_macs = 0;      // every sink expert together; macs per token

  // Weight and scale bytes a batch touching `active` routed experts reads (a mean over the input
  // sets, so not always a whole number).
  double bytes(double active) const { return active * routed_bytes + shared_bytes + sink_bytes; }
  // floor = max(bytes / HBM read, flops / peak), sinks at the bf16 peak. `slots`: the routed
  // (token, expert) pairs the rank runs.
  double floor_ms(const moe_problem& p, int64_t tokens, double slots, double active) const {
    const double t = double(tokens);
    const double read_s = bytes(active) / (kHbmReadTbps * 1e12);
    const double compute_s = 2 * (slots * routed_macs + t * shared_macs) / (peak_tflops(p) * 1e12) +
                             2 * t * sink_macs / (kBf16PeakTflops * 1e12);
    return std::max(read_s, compute_s) * 1e3;
  }
  double flops(int64_t tokens, double slots) const {
    return 2.0 * (slots * routed_macs + double(tokens) * (shared_macs + sink_macs));
  }
};

LayerCost layer_cost(const moe_problem& p) {
  const auto f = static_cast<moe_format>(p.format);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const int64_t h = p.hidden;
  LayerCost c;
  c.routed_bytes = matrix_bytes(f, w13_rows(p), h) + matrix_bytes(f, h, p.intermediate);
  c.routed_macs = double(w13_rows(p) + p.intermediate) * double(h);
  if (const int64_t is = p.shared_intermediate; is > 0) {
    const int64_t rows = gated ? 2 * is : is;
    c.shared_bytes = matrix_bytes(f, rows, h) + matrix_bytes(f, h, is);
    c.shared_macs = double(rows + is) * double(h);
  }
  if (p.sink_experts > 0) {  // bf16, silu_mul: [2Is, H] and [H, Is]
    const int64_t is = p.sink_intermediate;
    c.sink_bytes = p.sink_experts * (matrix_bytes(MOE_FORMAT_BF16, 2 * is, h) +
                                     matrix_bytes(MOE_FORMAT_BF16, h, is));
    c.sink_macs = p.sink_experts * double(3 * is) * double(h);
  }
  return c;
}

// The routed work of one routing on this rank: the routed experts it touches and its (token,
// expert) pairs. run() skips the ids of experts another rank holds (expert parallelism), so only
// this rank's count; the sink columns after the top_k routed ones run for every token, which
// LayerCost counts per token.
struct RoutedWork {
  int64_t experts = 0, slots = 0;
};

RoutedWork routed_work(const Routing& r, const moe_problem& p) {
  std::set<int32_t> ids;
  int64_t slots = 0;
  const int64_t width = topk_width(p);
  for (int64_t i = 0; i < r.ids.numel(); ++i) {
    const int32_t id = r.ids.data<int32_t>()[i];
    if (i % width >= p.top_k || local_expert_id(p, id) < 0) continue;
    ids.insert(id);
    ++slots;
  }
  return {int64_t(ids.size()), slots};
}

}  // namespace

void add_bench(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Time one layer per token count on the selected backend: median time (device events, or "
      "the host clock for a plugin without device timing), TFLOP/s, weight bytes/s and the ratio "
      "to the floor (docs/design.md §8), after the time to prepare the layer");
  static std::string config, tokens_list = "1,8,64,512,4096,16384", graph = "auto", jsonl, device,
                             commit = "unknown", shape, dump_routing;
  static int iterations = 50, warmup = 10;
  static int64_t check_max_tokens = 64;
  static bool route_in_run = false;
  cmd->add_option("--config", config, "YAML config")->required();
  cmd->add_option("--tokens", tokens_list, "Comma-separated token counts")
      ->check(token_counts())
      ->capture_default_str();
  cmd->add_option("--iterations", iterations, "Timed iterations")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", warmup, "Untimed iterations first")
      ->check(integer_in(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--graph", graph,
                  "Replay CUDA graphs: auto (T <= 64), on or off; only plugins with device "
                  "timing (their own benchmark()) run in graphs")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--check-max-tokens", check_max_tokens,
                  "Compare with the CPU reference up to this many tokens (its cost grows with T)")
      ->check(integer_in(0))
      ->capture_default_str();
  cmd->add_flag("--strict", strict(),
                "The config's fallback replacing the backend it names is an error");
  cmd->add_option("--jsonl", jsonl, "Append one JSON record per point (bench/results format)");
  cmd->add_option("--device", device,
                  "Device name for the records (default: the GPU the plugin runs on, as the "
                  "driver names it; 'host' for a host-memory plugin)");
  cmd->add_option("--commit", commit, "Commit for the records");
  cmd->add_option("--shape", shape, "Shape key for the records (default: the config's stem)")
      ->check(CLI::Validator(
          [](std::string& key) {
            // It names files (--dump-routing): letters, digits, '_', '.', '-' only.
            const bool ok = !key.empty() && key != "." && key != ".." &&
                            std::all_of(key.begin(), key.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                     c == '.' || c == '-';
                            });
            return ok ? std::string()
                      : fmt::format("'{}' is not a shape key (letters, digits, '_', '.', '-')",
                                    key);
          },
          "KEY"));
  cmd->add_option("--dump-routing", dump_routing,
                  "Write each token count's routing of every input set it times "
                  "(<dir>/<shape>_<T>_<set>.safetensors: topk_ids, topk_weights; the record's "
                  "input_sets says how many) so peers can rotate through the same routings");
  cmd->add_flag("--route-in-run", route_in_run,
                "Time routing and the layer together: each run call takes the router logits and "
                "routes them itself (ABI 1.6 MOE_RUN_FEATURE_ROUTES; the backend must route the "
                "config's problem)");
  cmd->callback([&d, cmd] {
    // Record files fail now, not after the layer was prepared and timed.
    if (cmd->count("--jsonl") > 0) check_writable(jsonl, "--jsonl");
    if (cmd->count("--dump-routing") > 0) {
      std::error_code ec;
      MOE_CHECK(std::filesystem::is_directory(dump_routing, ec), MOE_STATUS_IO_ERROR,
                "--dump-routing '{}' is not a directory", dump_routing);
    }
    const Config cfg = Config::load_file(config);
    const Registry r = d.discover(cfg.plugin_dirs, cfg.source);
    const Selection sel = select_checked(r, cfg);
    // Only the core's own library can answer to "reference" (built-in names are pinned); it is
    // needed only to route for a plugin that does not, or to check outputs.
    const auto reference = r.find("reference");
    const moe_problem p = cfg.problem.c();
    const std::string key = shape.empty() ? std::filesystem::path(config).stem().string() : shape;
    if (route_in_run) {
      MOE_CHECK(sel.plugin->info().routes_in_run(), MOE_STATUS_UNSUPPORTED,
                "--route-in-run: plugin '{}' (ABI {}.{}) does not route in run() (no "
                "MOE_RUN_FEATURE_ROUTES)",
                sel.plugin->name(), sel.plugin->info().abi_major, sel.plugin->info().abi_minor);
      MOE_CHECK(sel.plugin->can_route(p), MOE_STATUS_UNSUPPORTED,
                "--route-in-run: plugin '{}' does not route {}", sel.plugin->name(),
                routing_name(static_cast<moe_routing>(p.routing)));
    }
    const LayerCost cost = layer_cost(p);
    // Counts the config cannot take fail here, before weights are drawn and prepared.
    const std::vector<int64_t> counts = parse_token_counts(tokens_list);
    for (const int64_t t : counts)
      MOE_CHECK(t <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
                "--tokens {}: {} is above max_tokens={} of {}", tokens_list, t, p.max_tokens,
                config);
    std::cerr << fmt::format("bench {} on {}: {}\n", key, sel.plugin->name(), describe_problem(p));
    const LayerWeights weights = random_weights_fast(p, cfg.seed);
    // Prepare as a model load would: weights -> layer, upload included, synchronised.
    const auto prepare_start = std::chrono::steady_clock::now();
    const Layer layer = sel.plugin->prepare(p, weights.view(), sel.options);
    sel.plugin->sync();
    const double prepare_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - prepare_start)
            .count();
    const double prepare_bytes = cost.bytes(p.local_experts);
    std::cout << fmt::format(
        "prepare: {:.1f} ms for {:.3f} GB of weights and scales ({:.2f} GB/s, upload included)\n",
        prepare_ms, prepare_bytes * 1e-9, prepare_bytes * 1e-6 / prepare_ms);
    const bool device_timing = sel.plugin->has_device_timing();
    if (device_timing)
      std::cout << fmt::format(
          "timing:  device events around each run; rows timed 'graph' replay CUDA graphs "
          "(--graph {}); 'host us': the CPU time of one call through the C ABI, the median of {} "
          "calls each on idle streams\n",
          graph, kHostCalls);
    else
      std::cout << fmt::format(
          "timing:  host clock around run() + sync: {} has no device timing, so no CUDA "
          "graphs{}\n",
          sel.plugin->name(), graph == "on" ? " (--graph on is ignored)" : "");
    // Asked after prepare: the plugin has made its device's context current on this thread.
    const std::optional<std::string> gpu = device_of(*sel.plugin);
    const Ceilings ceilings = ceilings_for(*sel.plugin, gpu);
    std::cout << fmt::format(
        "floor:   max(weight + scale bytes / {} TB/s, flops / {} TFLOP/s): H200 ceilings, {}\n",
        kHbmReadTbps, peak_tflops(p), ceilings.why);
    if (route_in_run)
      std::cout << "routing: in each run call, from the router logits (--route-in-run): the "
                   "times include it\n";
    const std::string record_device = !device.empty()               ? device
                                      : gpu                         ? *gpu
                                      : sel.plugin->device_memory() ? "unknown"
                                                                    : "host";
    std::unique_ptr<Layer> ref_layer;
    // The SM clock and board power while each point is timed (device plugins, where NVML is).
    const std::unique_ptr<GpuMonitor> monitor = device_timing ? GpuMonitor::open() : nullptr;
    std::cout << fmt::format("{:>7} {:>10} {:>9} {:>11} {:>10} {:>8} {:>6} {:>9} {:>8}{}\n",
                             "tokens", "ms", "TFLOP/s", "weight TB/s", "floor ms", "x floor",
                             "timed", "rel_err", "host us", monitor ? "  SM MHz  watts" : "");
    for (const int64_t t : counts) {
      // Enough input sets that one pass over them exceeds the L2 (at most 8), and no more than
      // are timed: the floor and the routed work below are the sets' means.
      const double act_bytes = double(t) * p.hidden * 2.0 * (2 + p.top_k);
      const int sets =
          std::min(iterations, int(std::clamp(std::ceil(2 * kL2Bytes / act_bytes), 2.0, 8.0)));
      std::vector<StagedRun> runs;
      std::vector<moe_run_args> args;
      Point pt;
      pt.tokens = t;
      const Plugin& router = sel.plugin->can_route(p) ? *sel.plugin : *r.oracle();
      int64_t touched = 0, slots = 0;  // summed over the sets
      for (int s = 0; s < sets; ++s) {
        const Batch batch = random_batch(p, t, mix_seed(cfg.seed, fmt::format("bench{}", s)),
                                         Scenario::kRandom, kBenchBiasStd);
        const Routing routing = route_batch(router, p, batch);
        const RoutedWork work = routed_work(routing, p);
        touched += work.experts;
        slots += work.slots;
        // Every set, so the peers rotate through the same routings (and the same L2 misses).
        if (!dump_routing.empty())
          write_safetensors(fmt::format("{}/{}_{}_{}.safetensors", dump_routing, key, t, s),
                            {{"topk_ids", routing.ids}, {"topk_weights", routing.weights}});
        if (s == 0 && t <= check_max_tokens && reference) {
          if (!ref_layer)
            ref_layer = std::make_unique<Layer>(reference->prepare(p, weights.view(), {}));
          // The call timed below: from the logits where --route-in-run.
          const RunResult got = route_in_run ? run_layer_routing(layer, p, batch)
                                             : run_layer(layer, p, batch.hidden, routing);
          const RunResult ref = run_layer(*ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
          pt.rel_err = relative_l2(got.output, ref.output);
        }
        runs.push_back(route_in_run ? stage_routing_run(layer, p, batch)
                                    : stage_run(layer, p, batch.hidden, routing));
        args.push_back(runs.back().args);
      }
      // The runs rotate through every set, so the work of a run is the sets' mean.
      pt.active_experts = double(touched) / sets;
      pt.routed_slots = double(slots) / sets;
      const bool want_graph = graph == "on" || (graph == "auto" && t <= 64);
      pt.timing = !device_timing ? Timing::kHost : want_graph ? Timing::kGraph : Timing::kStream;
      pt.graph = pt.timing == Timing::kGraph;
      auto median_ms = [&](bool use_graph) {
        std::vector<double> times = sel.plugin->benchmark(args, warmup, iterations, use_graph);
        std::sort(times.begin(), times.end());
        const size_t n = times.size();  // the median; of an even count, the middle two's mean
        return n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
      };
      if (monitor) monitor->start();
      pt.ms = median_ms(pt.graph);
      if (monitor) pt.gpu = monitor->stop();
      // A peer that cannot be captured runs eagerly: keep our eager time too, to compare alike.
      if (pt.graph) pt.ms_stream = median_ms(false);
      // What a call costs the CPU (issue: under 5 us for a decode layer), device plugins only.
      if (device_timing) pt.host_us = sel.plugin->host_us_per_call(args, kHostCalls);
      const double flops = cost.flops(t, pt.routed_slots), wbytes = cost.bytes(pt.active_experts);
      pt.tflops = flops / (pt.ms * 1e9);
      pt.weight_tbps = wbytes / (pt.ms * 1e9);
      pt.floor_ms = cost.floor_ms(p, t, pt.routed_slots, pt.active_experts);
      std::cout << fmt::format(
          "{:>7} {:>10.4f} {:>9.1f} {:>11.3f} {:>10.4f} {:>8.2f} {:>6} {:>9} {:>8}{}\n", t, pt.ms,
          pt.tflops, pt.weight_tbps, pt.floor_ms, pt.ms / pt.floor_ms, timing_column(pt.timing),
          std::isnan(pt.rel_err) ? "-" : fmt::format("{:.2e}", pt.rel_err),
          std::isnan(pt.host_us) ? "-" : fmt::format("{:.1f}", pt.host_us),
          pt.gpu ? fmt::format(" {:>8.0f} {:>6.0f}", pt.gpu->sm_mhz_mean, pt.gpu->power_w_mean)
                 : "");
      if (cmd->count("--jsonl") > 0) {
        char date[16];
        const std::time_t now = std::time(nullptr);
        std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
        nlohmann::json rec = {
            {"date", date},
            {"device", record_device},
            {"commit", commit},
            {"backend", sel.plugin->name()},
            {"format", format_name(static_cast<moe_format>(p.format))},
            {"shape", key},
            {"experts", p.experts},
            {"top_k", p.top_k},
            {"hidden", p.hidden},
            {"intermediate", p.intermediate},
            // The peers run the sinks too (bf16, their own width; columns k.. of the routing).
            {"sink_experts", p.sink_experts},
            {"sink_intermediate", p.sink_intermediate},
            {"tokens", t},
            {"ms", pt.ms},
            {"tflops", pt.tflops},
            {"weight_tbps", pt.weight_tbps},
            {"floor_ms", pt.floor_ms},
            {"graph", pt.graph},
            {"route_in_run", route_in_run},
            {"ms_stream",
             std::isnan(pt.ms_stream) ? nlohmann::json() : nlohmann::json(pt.ms_stream)},
            {"timing", timing_record(pt.timing)},
            {"ceilings", ceilings.record},
            {"peers", nlohmann::json::object()},
            {"rel_err", std::isnan(pt.rel_err) ? nlohmann::json() : nlohmann::json(pt.rel_err)},
            {"host_us_per_call",
             std::isnan(pt.host_us) ? nlohmann::json() : nlohmann::json(pt.host_us)},
            {"active_experts", pt.active_experts},
            {"gpu_clock", !pt.gpu ? nlohmann::json()
                                  : nlohmann::json{{"samples", pt.gpu->count},
                                                   {"sm_mhz_mean", pt.gpu->sm_mhz_mean},
                                                   {"sm_mhz_min", pt.gpu->sm_mhz_min},
                                                   {"sm_mhz_max", pt.gpu->sm_mhz_max},
                                                   {"power_w_mean", pt.gpu->power_w_mean},
                                                   {"power_limit_w", pt.gpu->power_limit_w},
                                                   {"temp_c_max", pt.gpu->temp_c_max}}},
            {"iterations", iterations},
            {"input_sets", sets},
            {"prepare_ms", prepare_ms},
            {"prepare_bytes", prepare_bytes}};
        append_line(jsonl, rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "--jsonl");
      }
    }
  });
}

}  // namespace moe::tool
