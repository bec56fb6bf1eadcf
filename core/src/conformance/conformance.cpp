#include "moe/conformance.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "config/yaml_problem.hpp"
#include "moe/runner.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"

namespace moe {
namespace {

constexpr Scenario kAllScenarios[] = {Scenario::kRandom, Scenario::kTies, Scenario::kPadding,
                                      Scenario::kOneExpert};

// Ids exactly (ties included), weights to 1e-6: "" when they agree, else the first difference.
std::string compare_routing(const Routing& got, const Routing& ref) {
  const int64_t n = ref.ids.numel(), width = ref.ids.shape()[1];
  for (int64_t i = 0; i < n; ++i) {
    const int32_t a = got.ids.data<int32_t>()[i], b = ref.ids.data<int32_t>()[i];
    if (a != b)
      return fmt::format("token {} slot {}: id {}, reference {}", i / width, i % width, a, b);
  }
  for (int64_t i = 0; i < n; ++i) {
    const double a = got.weights.data<float>()[i], b = ref.weights.data<float>()[i];
    if (!(std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(b))))
      return fmt::format("token {} slot {}: weight {}, reference {}", i / width, i % width, a, b);
  }
  return "";
}

// The plugin's weights when the problem goes through a checkpoint convention: written out under
// that convention's names and read back by the adapter. The file lives only for the call.
LayerWeights through_checkpoint(const LayerWeights& w, const moe_problem& p, CheckpointSpec spec,
                                const std::string& name) {
  // Unique per call: two conformance calls of one process (two plugins checked in parallel
  // through the host API) must not write, read and remove one file.
  static std::atomic<uint64_t> calls{0};
  const auto file = std::filesystem::temp_directory_path() /
                    fmt::format("moe_conformance_{}_{}_{}.safetensors", name, ::getpid(),
                                calls.fetch_add(1, std::memory_order_relaxed));
  spec.path = file.string();
  // The conventions carry a router; the suite routes from its own logits, so zeros serve.
  HostTensor router(MOE_DTYPE_BF16, {p.experts + p.sink_experts, p.hidden}), bias;
  router.fill_bytes(0);
  if (p.routing_bias) {
    bias = HostTensor(MOE_DTYPE_F32, {p.experts});
    bias.fill_bytes(0);
  }
  write_safetensors(spec.path, export_layer(w, p, spec, router, bias));
  struct Remove {
    std::filesystem::path f;
    ~Remove() {
      std::error_code ec;  // never throws out of a destructor
      std::filesystem::remove(f, ec);
    }
  } remove{file};
  return load_layer(Checkpoint::open(spec.path), spec, p).weights;
}

// Why a gpu_sized problem is not run for `plugin`, or "".
std::string gpu_sized_skip(const Plugin& plugin, const ConformanceOptions& options) {
  if (!options.include_gpu_sized)
    return "GPU-sized model shape: run with --gpu-sized on a GPU machine";
  if (!plugin.device_memory())
    return fmt::format(
        "GPU-sized model shape: {} keeps its tensors in host memory; model shapes are checked "
        "on device-memory backends only",
        plugin.name());
  if (options.gpu_oracle == nullptr)
    return "GPU-sized model shape: no GPU oracle to compare with (the gpu_oracle plugin was not "
           "found; it is built with CUDA)";
  return "";
}

// Runs fn; returns why it threw, or nothing. Anything a plugin or the oracle throws ends only its
// case (an error), never the suite: the report is written whatever a plugin does.
template <class Fn>
std::optional<std::string> failure_of(Fn&& fn) {
  try {
    fn();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string(e.what());
  } catch (...) {
    return std::string("an exception that is not a std::exception");
  }
}

bool same_library(const Plugin& a, const Plugin& b) {
  return &a == &b || a.path() == b.path();
}

CaseProblem case_problem(const moe_problem& p) {
  return {.experts = p.experts,
          .top_k = p.top_k,
          .hidden = p.hidden,
          .intermediate = p.intermediate,
          .format = format_name(static_cast<moe_format>(p.format)),
          .input_format = input_format_name(static_cast<moe_input_format>(p.input_format)),
          .activation = activation_name(static_cast<moe_activation>(p.activation)),
          .routing = routing_name(static_cast<moe_routing>(p.routing))};
}

// The verdict of a compared output; the detail says by how much and where it is worst.
void judge_output(CaseResult& run, const HostTensor& out, const HostTensor& ref) {
  if (out.numel() == 0) {  // T = 0: nothing to measure (no error of 0 that reads like a match)
    run.status = CaseStatus::kPass;
    return;
  }
  const OutputComparison c = compare_outputs(out, ref);
  run.rel_err = c.rel_err;
  run.max_abs_err = c.max_abs_err;
  const auto& w = c.worst;
  if (!std::isfinite(c.rel_err)) {
    run.detail = fmt::format("token {} column {} is {} (not written?)", w.token, w.column, w.got);
  } else if (!(c.rel_err <= run.tolerance)) {
    run.detail = fmt::format(
        "relative L2 error {:.3e} exceeds tolerance {:.1e}; worst at token {} column {}: "
        "got {:.6g}, want {:.6g} (max abs error {:.3e})",
        c.rel_err, run.tolerance, w.token, w.column, w.got, w.want, c.max_abs_err);
  }
  run.status = run.detail.empty() ? CaseStatus::kPass : CaseStatus::kFail;
  if (run.status == CaseStatus::kFail) run.worst = w;
}

// The accumulate stage's starting output: the batch's hidden states (a residual stream, the
// common use) scaled to the oracle's RMS, in bf16, so that neither the old value nor the layer's
// result drowns the other in the comparison.
HostTensor accumulate_base(const HostTensor& hidden, const HostTensor& ref) {
  const int64_t n = ref.numel();
  double ref_sq = 0, hid_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref_sq += ref.data<double>()[i] * ref.data<double>()[i];
    const double h = bf16_to_float(hidden.data<uint16_t>()[i]);
    hid_sq += h * h;
  }
  const double scale = hid_sq > 0 ? std::sqrt(ref_sq / hid_sq) : 0.0;
  HostTensor base(MOE_DTYPE_BF16, hidden.shape());
  for (int64_t i = 0; i < n; ++i)
    base.data<uint16_t>()[i] =
        float_to_bf16(static_cast<float>(bf16_to_float(hidden.data<uint16_t>()[i]) * scale));
  return base;
}

// ref + base in f64: what a run with accumulate must produce.
HostTensor plus(const HostTensor& ref, const HostTensor& base) {
  HostTensor want = ref;
  for (int64_t i = 0; i < want.numel(); ++i)
    want.data<double>()[i] += bf16_to_float(base.data<uint16_t>()[i]);
  return want;
}

// The oracle's f64 output (poisoned with NaN before its run) finite everywhere: a value it left
// unwritten or got wrong is the oracle's error, not the plugin's failure.
void check_oracle_output(const HostTensor& out, const std::string& oracle) {
  const int64_t cols = out.shape().size() == 2 ? out.shape()[1] : 1;
  for (int64_t i = 0; i < out.numel(); ++i)
    MOE_CHECK(std::isfinite(out.data<double>()[i]), MOE_STATUS_INTERNAL,
              "the oracle '{}' gave {} at token {} column {}: an oracle error, not the plugin's",
              oracle, out.data<double>()[i], i / cols, i % cols);
}

constexpr float kSkippedSlotWeight = 1000.0f;  // with_skipped_weights_set's

// The one scenario a problem's accumulate stage runs on, per token count: padding (tokens without
// rows must keep their old value) when the file lists it, else the first listed.
Scenario accumulate_scenario(const ProblemFile& pf) {
  for (const Scenario sc : pf.scenarios)
    if (sc == Scenario::kPadding) return sc;
  return pf.scenarios.front();
}

// The routing a run is given: the reference's, with a weight of 1000 in every slot whose id is -1.
// "-1 = skip" means the weight is never read: a plugin that treats -1 as an expert (or multiplies
// its weight in) is off by far more than any tolerance, where the routing's own zero hid it.
Routing with_skipped_weights_set(Routing r) {
  for (int64_t i = 0; i < r.ids.numel(); ++i)
    if (r.ids.data<int32_t>()[i] == -1) r.weights.data<float>()[i] = kSkippedSlotWeight;
  return r;
}

}  // namespace

double default_tolerance(moe_format format) {
  return format_spec(format).tolerance;
}

double case_tolerance(const ProblemFile& pf, int64_t tokens) {
  const bool requantises = pf.problem.c().input_format != MOE_INPUT_BF16;
  return requantises && tokens == 1 ? pf.tolerance * kOneTokenFlipFactor : pf.tolerance;
}

const char* case_status_name(CaseStatus s) {
  switch (s) {
    case CaseStatus::kPass:
      return "pass";
    case CaseStatus::kFail:
      return "fail";
    case CaseStatus::kSkip:
      return "skip";
    case CaseStatus::kError:
      return "error";
  }
  return "invalid";
}

ProblemFile load_problem_file(const std::string& path) {
  using namespace detail;
  const YAML::Node root = load_yaml_file(path);
  check_keys(path, root,
             {"problem", "tokens", "tolerance", "scenarios", "gpu_sized", "description",
              "checkpoint", "ep_map"},
             "a problem file");
  MOE_CHECK(root["problem"], MOE_STATUS_CONFIG_ERROR, "{}: a problem file needs 'problem'", path);
  ProblemFile pf;
  pf.path = path;
  pf.name = std::filesystem::path(path).stem().string();
  pf.problem = parse_problem(path, root["problem"]);
  // A caller's EP map in place of the placement's (moe_problem.ep_map, which then decides): a
  // plugin that computes local ids from the placement alone fails such a file. A key of the
  // file, not of `problem:`, as configs cannot carry a map (each rank's is made from placement).
  if (const auto m = root["ep_map"]) {
    MOE_CHECK(m.IsSequence() && int64_t(m.size()) == pf.problem.raw().experts,
              MOE_STATUS_CONFIG_ERROR, "{}: ep_map must be a list of experts={} local ids (or -1)",
              where(path, m), pf.problem.raw().experts);
    std::vector<int32_t> map;
    for (const auto& v : m) {
      const int64_t id = read_scalar<int64_t>(path, v, "ep_map");
      MOE_CHECK(id >= -1 && id <= INT32_MAX, MOE_STATUS_CONFIG_ERROR,
                "{}: ep_map entries are local ids or -1, not {}", where(path, v), id);
      map.push_back(int32_t(id));
    }
    moe_problem c = pf.problem.c();
    c.ep_map = map.data();
    pf.problem = Problem(c);  // copies the map
    try {
      validate_problem(pf.problem.c());
    } catch (const Error& e) {
      MOE_FAIL(MOE_STATUS_CONFIG_ERROR, "{}: {}", where(path, m), e.what());
    }
  }
  // The default counts, the largest cut to max_tokens where it is smaller (as a config's tokens).
  const int64_t most = pf.problem.raw().max_tokens;
  pf.tokens = {0, 1, std::min<int64_t>(5, most), std::min<int64_t>(33, most)};
  pf.tokens.erase(std::unique(pf.tokens.begin(), pf.tokens.end()), pf.tokens.end());
  if (const auto t = root["tokens"]) {
    pf.tokens.clear();
    MOE_CHECK(t.IsSequence(), MOE_STATUS_CONFIG_ERROR, "{}: tokens must be a list", where(path, t));
    for (const auto& v : t) {
      pf.tokens.push_back(read_scalar<int64_t>(path, v, "tokens"));
      MOE_CHECK(pf.tokens.back() >= 0, MOE_STATUS_CONFIG_ERROR, "{}: tokens must be >= 0",
                where(path, v));
      MOE_CHECK(pf.tokens.back() <= pf.problem.raw().max_tokens, MOE_STATUS_CONFIG_ERROR,
                "{}: tokens {} is above the problem's max_tokens={}", where(path, v),
                pf.tokens.back(), pf.problem.raw().max_tokens);
    }
    MOE_CHECK(!pf.tokens.empty(), MOE_STATUS_CONFIG_ERROR,
              "{}: tokens is an empty list: nothing would be checked (leave it out for the "
              "default counts)",
              where(path, t));
  }
  pf.tolerance = root["tolerance"]
                     ? read_scalar<double>(path, root["tolerance"], "tolerance")
                     : default_tolerance(static_cast<moe_format>(pf.problem.raw().format));
  MOE_CHECK(pf.tolerance > 0 && std::isfinite(pf.tolerance), MOE_STATUS_CONFIG_ERROR,
            "{}: tolerance must be finite and > 0, got {}", path, pf.tolerance);
  if (const auto s = root["scenarios"]) {
    for (const auto& name : read_string_list(path, s, "scenarios")) {
      Scenario sc;
      MOE_CHECK(parse_scenario(name, &sc), MOE_STATUS_CONFIG_ERROR,
                "{}: scenario '{}' is not one of random, ties, padding, one_expert", where(path, s),
                name);
      pf.scenarios.push_back(sc);
    }
    MOE_CHECK(!pf.scenarios.empty(), MOE_STATUS_CONFIG_ERROR,
              "{}: scenarios is an empty list: nothing would run (leave it out for all of them)",
              where(path, s));
  } else {
    pf.scenarios.assign(std::begin(kAllScenarios), std::end(kAllScenarios));
  }
  if (root["gpu_sized"]) pf.gpu_sized = read_scalar<bool>(path, root["gpu_sized"], "gpu_sized");
  if (const auto ck = root["checkpoint"]) {
    check_keys(path, ck, {"convention", "interleaved_gate_up"}, "checkpoint");
    CheckpointSpec spec;
    spec.convention = read_scalar<std::string>(path, ck["convention"], "convention");
    spec.prefix = "model.layers.{layer}.mlp";
    if (ck["interleaved_gate_up"])
      spec.interleaved_gate_up =
          read_scalar<bool>(path, ck["interleaved_gate_up"], "interleaved_gate_up");
    pf.checkpoint = spec;
  }
  return pf;
}

std::vector<ProblemFile> load_problem_dir(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  MOE_CHECK(std::filesystem::exists(st), MOE_STATUS_NOT_FOUND,
            "problem directory '{}' does not exist", dir);
  MOE_CHECK(std::filesystem::is_directory(st), MOE_STATUS_NOT_FOUND,
            "problem directory '{}' is not a directory", dir);
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".yaml") paths.push_back(e.path().string());
  // An empty suite would pass with nothing checked: every caller (the CLI, the C API) refuses it.
  MOE_CHECK(!paths.empty(), MOE_STATUS_NOT_FOUND,
            "no problem files (*.yaml) in {}: nothing to check", dir);
  std::sort(paths.begin(), paths.end());
  std::vector<ProblemFile> out;
  for (const auto& p : paths) out.push_back(load_problem_file(p));
  return out;
}

Conformance::Conformance(std::shared_ptr<const Plugin> reference)
    : reference_(std::move(reference)) {
  MOE_CHECK(reference_ != nullptr, MOE_STATUS_NOT_FOUND,
            "the conformance suite needs the reference plugin, and none was found");
}

std::vector<CaseResult> Conformance::run(const std::shared_ptr<const Plugin>& plugin,
                                         const ProblemFile& pf,
                                         const ConformanceOptions& options) const {
  std::vector<CaseResult> results;
  const moe_problem p = pf.problem.c();
  // What the plugin's output is compared with; its routing is always the reference's.
  const std::shared_ptr<const Plugin> oracle = pf.gpu_sized ? options.gpu_oracle : reference_;
  auto result = [&](std::string stage, int64_t tokens, const char* scenario, uint64_t seed) {
    CaseResult r;
    r.plugin = plugin->name();
    r.plugin_path = plugin->path().string();
    r.plugin_version = plugin->info().version;
    r.plugin_abi = fmt::format("{}.{}", plugin->info().abi_major, plugin->info().abi_minor);
    r.params = case_problem(p);
    if (stage == "route") r.oracle = reference_->name();
    if ((stage == "run" || stage == "accumulate" || stage == "route_in_run") && oracle)
      r.oracle = oracle->name();
    r.problem = pf.name;
    r.stage = std::move(stage);
    r.tokens = tokens;
    r.scenario = scenario;
    r.seed = seed;
    r.tolerance = case_tolerance(pf, tokens);
    return r;
  };
  // A pass against oneself, or on an empty batch, proves less than a real one.
  auto pass_kind = [&](const CaseResult& c, const Plugin& judge) {
    if (c.tokens == 0) return PassKind::kEmpty;
    return same_library(*plugin, judge) ? PassKind::kSelf : PassKind::kReal;
  };

  CaseResult support = result("support", 0, "", options.seed);
  if (pf.gpu_sized) {
    support.detail = gpu_sized_skip(*plugin, options);
    if (!support.detail.empty()) return {support};
  }
  Support s, o;
  if (auto why = failure_of([&] {
        s = plugin->supports(p);
        if (s.supported && pf.gpu_sized) o = oracle->supports(p);
      })) {
    support.status = CaseStatus::kError;
    support.detail = *why;
    return {support};
  }
  if (!s.supported) {
    support.detail = fmt::format("unsupported ({}): {}", reason_name(s.reason), s.message);
    return {support};
  }
  if (pf.gpu_sized && !o.supported) {
    support.detail = fmt::format("the GPU oracle '{}' cannot check it ({}): {}", oracle->name(),
                                 reason_name(o.reason), o.message);
    return {support};
  }

  std::unique_ptr<Layer> layer, ref_layer;
  if (auto why = failure_of([&] {
        // Model shapes hold billions of weights: drawn on every core.
        const uint64_t weight_seed = mix_seed(options.seed, pf.name);
        LayerWeights weights =
            pf.gpu_sized ? random_weights_fast(p, weight_seed) : random_weights(p, weight_seed);
        ref_layer = std::make_unique<Layer>(oracle->prepare(p, weights.view(), {}));
        if (pf.checkpoint) weights = through_checkpoint(weights, p, *pf.checkpoint, pf.name);
        layer = std::make_unique<Layer>(plugin->prepare(p, weights.view(), {}));
      })) {
    CaseResult prepare = result("prepare", 0, "", options.seed);
    prepare.status = CaseStatus::kError;
    prepare.detail = *why;
    return {prepare};
  }

  const Scenario accumulate_on = accumulate_scenario(pf);
  for (const int64_t tokens : pf.tokens) {
    if (options.only_tokens && tokens != *options.only_tokens) continue;
    for (const Scenario sc : pf.scenarios) {
      if (options.only_scenario && sc != *options.only_scenario) continue;
      const uint64_t seed =
          mix_seed(options.seed, fmt::format("{}/{}/{}", pf.name, tokens, scenario_name(sc)));
      CaseResult run = result("run", tokens, scenario_name(sc), seed);
      if (tokens > p.max_tokens) {
        run.detail = fmt::format("tokens={} exceeds max_tokens={}", tokens, p.max_tokens);
        results.push_back(run);
        continue;
      }
      Batch batch;
      Routing routing, given;
      RunResult ref;
      if (auto why = failure_of([&] {
            batch = random_batch(p, tokens, seed, sc);
            // Routing is the reference's at every size: exact, and cheap next to the layer.
            routing = scenario_routing(*reference_, p, batch, sc);
            if (sc != Scenario::kOneExpert && plugin->can_route(p)) {
              CaseResult route = result("route", tokens, scenario_name(sc), seed);
              if (auto route_why = failure_of([&] {
                    route.detail = compare_routing(route_batch(*plugin, p, batch), routing);
                  })) {
                route.status = CaseStatus::kError;
                route.detail = *route_why;
              } else {
                route.status = route.detail.empty() ? CaseStatus::kPass : CaseStatus::kFail;
                route.pass_kind = pass_kind(route, *reference_);
              }
              results.push_back(route);
            }
            given = with_skipped_weights_set(routing);
            ref = run_layer(*ref_layer, p, batch.hidden, given, MOE_DTYPE_F64);
            check_oracle_output(ref.output, oracle->name());
            const RunResult out = run_layer(*layer, p, batch.hidden, given, MOE_DTYPE_BF16);
            run.ms = out.ms;
            judge_output(run, out.output, ref.output);
            run.pass_kind = pass_kind(run, *oracle);
          })) {
        run.status = CaseStatus::kError;
        run.detail = *why;
        run.rel_err = run.max_abs_err = std::nullopt;
      }
      results.push_back(run);
      // A plugin that routes in run() (ABI 1.6) takes the same batch from its logits in one call:
      // its ids and weights against the reference's routing, its output against the oracle's.
      // On the accumulate scenario and on ties (where a tie-break of its own shows).
      // A plugin whose supports() throws here fails this case, not the suite.
      bool routes = false;
      std::optional<std::string> asked;
      if (plugin->info().routes_in_run() && (sc == accumulate_on || sc == Scenario::kTies) &&
          sc != Scenario::kOneExpert && run.status != CaseStatus::kError)
        asked = failure_of([&] { routes = plugin->can_route(p); });
      if (asked || routes) {
        CaseResult rr = result("route_in_run", tokens, scenario_name(sc), seed);
        if (auto why = asked ? asked : failure_of([&] {
              Routing got;
              const RunResult out = run_layer_routing(*layer, p, batch, &got, MOE_DTYPE_BF16);
              rr.ms = out.ms;
              rr.detail = compare_routing(got, routing);
              if (rr.detail.empty())
                judge_output(rr, out.output, ref.output);
              else
                rr.status = CaseStatus::kFail;
              rr.pass_kind = pass_kind(rr, *oracle);
            })) {
          rr.status = CaseStatus::kError;
          rr.detail = *why;
        }
        results.push_back(rr);
      }
      // A plugin that declares accumulate (ABI 1.4) also adds onto a non-zero output: the same
      // batch and routing, compared with the oracle's result plus that output.
      if (tokens == 0 || !plugin->info().accumulates() || sc != accumulate_on ||
          run.status == CaseStatus::kError)
        continue;
      CaseResult acc = result("accumulate", tokens, scenario_name(sc), seed);
      if (auto why = failure_of([&] {
            const HostTensor base = accumulate_base(batch.hidden, ref.output);
            const RunResult out = run_layer_onto(*layer, p, batch.hidden, given, base);
            acc.ms = out.ms;
            judge_output(acc, out.output, plus(ref.output, base));
            acc.pass_kind = pass_kind(acc, *oracle);
          })) {
        acc.status = CaseStatus::kError;
        acc.detail = *why;
      }
      results.push_back(acc);
    }
  }
  return results;
}

}  // namespace moe
