// moe run --config FILE [--tokens T] [--seed S]: one layer on the selected backend, checked
// against the reference.
#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "cli_numbers.hpp"
#include "commands.hpp"
#include "moe/config.hpp"
#include "moe/conformance.hpp"
#include "moe/runner.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/selection.hpp"
#include "run_ep.hpp"
#include "run_inputs.hpp"

namespace moe::tool {

namespace {

// The oracle's f64 output must fit a bf16 output: a value past bf16's range (inputs or weights
// too large for such a layer) would make every backend's output inf and read as a MISMATCH,
// where nothing is wrong with the backend.
void check_within_bf16(const HostTensor& ref) {
  const int64_t cols = ref.shape().size() == 2 ? ref.shape()[1] : 1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double v = ref.data<double>()[i];
    MOE_CHECK(!std::isnan(v), MOE_STATUS_INVALID_ARGUMENT,
              "the reference's output[{}, {}] is NaN: the inputs or weights make the layer's "
              "arithmetic undefined (nothing to compare)",
              i / cols, i % cols);
    MOE_CHECK(std::isfinite(bf16_to_float(float_to_bf16(static_cast<float>(v)))),
              MOE_STATUS_INVALID_ARGUMENT,
              "the reference's output[{}, {}] is {:g}, beyond bf16's range: the inputs or weights "
              "are too large for this layer's bf16 output (nothing to compare)",
              i / cols, i % cols, v);
  }
}

double sum_of(const HostTensor& bf16) {
  double s = 0;
  for (int64_t i = 0; i < bf16.numel(); ++i) s += bf16_to_float(bf16.data<uint16_t>()[i]);
  return s;
}

}  // namespace

void add_run(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand("run",
                                 "Run one MoE layer on the backend the config selects, on "
                                 "random inputs of the problem's shape, and compare it "
                                 "with the reference");
  static std::string config;
  static int64_t tokens = -1;
  static uint64_t seed = 0;
  static bool seed_given = false;
  static std::string inputs, output, checkpoint, ep_jsonl;
  static bool ep_skew = false;
  static int32_t ep_empty_rank = -1, ep_bench = 0, ep_chunks = 1;
  cmd->add_option("--config", config, "YAML config")->required();
  cmd->add_option("--inputs", inputs,
                  "safetensors file with hidden_states [T, H] (bf16, or f32: the router takes "
                  "them in checkpoint.router_dtype) and optionally router_logits [T, E] (f32: used "
                  "whenever present, needed without a router weight)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--checkpoint", checkpoint,
                  "Read the checkpoint from this path instead of the config's checkpoint.path");
  cmd->add_option("--output", output,
                  "Write the layer output here: safetensors, output [T, H] bf16");
  cmd->add_option("--tokens", tokens,
                  "Tokens in the batch (default: the config's tokens, else 16 or max_tokens if "
                  "smaller)")
      ->check(integer_in(0));
  cmd->add_option_function<uint64_t>(
         "--seed", [](const uint64_t& s) { seed = s, seed_given = true; },
         "Random seed (default: the config's seed, else 1)")
      ->check(seed_value());
  cmd->add_flag("--strict", strict(),
                "The config's fallback replacing the backend it names is an error");
  cmd->add_flag("--ep-skew", ep_skew,
                "Expert parallel: route every token to rank 0's experts (skewed routing)");
  cmd->add_option("--ep-empty-rank", ep_empty_rank, "Expert parallel: this rank has no tokens")
      ->check(integer_in(0, INT32_MAX));
  cmd->add_option("--ep-bench", ep_bench,
                  "Expert parallel: time this many steps next to NCCL's all-to-all and one GPU")
      ->check(integer_in(0, INT32_MAX));
  cmd->add_option("--ep-chunks", ep_chunks,
                  "Expert parallel with --ep-bench: also time the device step with each rank's "
                  "rows in this many chunks, their exchanges overlapping the layer (1 to 64)")
      ->check(integer_in(1, 64));
  cmd->add_option("--ep-jsonl", ep_jsonl,
                  "Expert parallel with --ep-bench: each rank appends its record (with ep_size) "
                  "to this file");
  cmd->callback([&d, cmd] {
    MOE_CHECK(ep_chunks == 1 || ep_bench > 0, MOE_STATUS_INVALID_ARGUMENT,
              "--ep-chunks {} times the device step in chunks, which only --ep-bench N does: give "
              "it too",
              ep_chunks);
    MOE_CHECK(
        cmd->count("--ep-jsonl") == 0 || ep_bench > 0, MOE_STATUS_INVALID_ARGUMENT,
        "--ep-jsonl {} holds --ep-bench's records, which only --ep-bench N times: give it too",
        ep_jsonl);
    MOE_CHECK(tokens < 0 || inputs.empty(), MOE_STATUS_INVALID_ARGUMENT,
              "--tokens {} and --inputs {} both size the batch: the file's hidden_states give its "
              "tokens, so drop --tokens",
              tokens, inputs);
    if (cmd->count("--output") > 0) check_writable(output, "--output");
    if (cmd->count("--ep-jsonl") > 0) check_writable(ep_jsonl, "--ep-jsonl");
    Config cfg = Config::load_file(config);
    if (cmd->count("--checkpoint") > 0) {
      MOE_CHECK(!checkpoint.empty(), MOE_STATUS_INVALID_ARGUMENT,
                "--checkpoint is empty: give a checkpoint path (or leave the flag out for the "
                "config's)");
      MOE_CHECK(cfg.checkpoint.has_value(), MOE_STATUS_CONFIG_ERROR,
                "--checkpoint given, but {} has no checkpoint section (it names the convention)",
                config);
      cfg.checkpoint->path = checkpoint;
    }
    if (cfg.problem.raw().ep_placement != MOE_EP_NONE) {
      MOE_CHECK(ep_empty_rank < cfg.problem.raw().ep_size, MOE_STATUS_INVALID_ARGUMENT,
                "--ep-empty-rank {} is not a rank of ep_size={} ({})", ep_empty_rank,
                cfg.problem.raw().ep_size, config);
      run_expert_parallel(cfg, d,
                          {tokens >= 0 ? tokens : cfg.tokens, seed_given ? seed : cfg.seed, ep_skew,
                           ep_empty_rank, ep_bench, inputs, output, ep_jsonl, ep_chunks});
      return;
    }
    // Expert-parallel flags on a single-GPU config would do nothing: say so instead (their
    // defaults, which ask for nothing, pass).
    for (const auto& [flag, set] :
         {std::pair{"--ep-skew", ep_skew}, std::pair{"--ep-empty-rank", ep_empty_rank >= 0},
          std::pair{"--ep-bench", ep_bench > 0}, std::pair{"--ep-chunks", ep_chunks != 1},
          std::pair{"--ep-jsonl", cmd->count("--ep-jsonl") > 0}})
      MOE_CHECK(!set, MOE_STATUS_INVALID_ARGUMENT,
                "{} is for expert-parallel configs, and {} has no ep_placement", flag, config);
    const Registry r = d.discover(cfg.plugin_dirs, cfg.source);
    const Selection sel = select_checked(r, cfg);
    const auto reference = r.oracle();  // routes (when the backend does not) and checks the run
    const moe_problem p = cfg.problem.c();
    const int64_t t = tokens >= 0 ? tokens : cfg.tokens;
    const uint64_t s = seed_given ? seed : cfg.seed;
    // Before any input is drawn (an --inputs file's tokens are checked as it is read; the
    // config's own tokens when it was loaded).
    MOE_CHECK(!inputs.empty() || t <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
              "{} tokens (--tokens) are above max_tokens={} of {} (raise it there, or run fewer)",
              t, p.max_tokens, config);

    const RunInputs in = make_run_inputs(cfg, t, s, inputs);
    const LayerWeights& weights = in.weights;
    const Batch& batch = in.batch;
    const Plugin& router = sel.plugin->can_route(p) ? *sel.plugin : *reference;
    const Routing routing = route_batch(router, p, batch);
    const Layer layer = sel.plugin->prepare(p, weights.view(), sel.options);
    const RunResult out = run_layer(layer, p, batch.hidden, routing);
    const Layer ref_layer = reference->prepare(p, weights.view(), {});
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    check_within_bf16(ref.output);
    const double err = relative_l2(out.output, ref.output);
    const double tol = default_tolerance(static_cast<moe_format>(p.format));
    const bool empty = out.output.numel() == 0;

    std::cout << fmt::format("backend:   {} ({})\n", sel.plugin->name(), sel.rule)
              << fmt::format("problem:   {}\n", describe_problem(p))
              << fmt::format("weights:   {}\n", in.weights_from)
              << fmt::format("inputs:    {}  routed by: {}\n", in.batch_from, router.name())
              << fmt::format("checksum:  sum={:.6f} fnv1a={:016x}\n", sum_of(out.output),
                             fnv1a(out.output.raw(), out.output.bytes()))
              << (empty ? std::string("rel_err:   none (0 tokens: nothing to compare)\n")
                        : fmt::format(
                              "rel_err:   {:.3e} against the reference (tolerance {:.0e}) {}\n",
                              err, tol, err <= tol ? "ok" : "MISMATCH"))
              << fmt::format("time:      {:.3f} ms (one run, wall clock, incl. stream sync)\n",
                             out.ms);
    if (!output.empty()) {
      write_safetensors(output, {{"output", out.output}});
      std::cout << "output:    " << output << "\n";
    }
    if (!(err <= tol)) exit_code() = kExitMismatch;
  });
}

}  // namespace moe::tool
