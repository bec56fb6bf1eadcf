// YAML configuration: which backend, where plugins live, the problem, and backend options.
//
//   backend: auto                 # or a plugin name or alias; auto = highest priority that fits
//   fallback: [trtllm_style, reference]
//   plugin_dirs: [build/plugins]  # relative to the current directory
//   problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, format: bf16, ...}
//   options: {key: value}         # for the plugin `backend:` names (refused under auto), and
//                                 # per plugin: {trtllm_style: {gemm_tiles: tokens}} goes to
//                                 # trtllm_style's prepare() whenever it is the one chosen
//   tokens: 16                    # default batch for `moe run`
//   seed: 1
//   checkpoint:                   # optional: real weights instead of random ones
//     path: build/fixtures/checkpoints/mixtral     # file, index json or directory
//     convention: mixtral         # mixtral | deepseek | qwen_moe | gpt_oss | stacked
//     prefix: "model.layers.{layer}.block_sparse_moe"
//     layer: 0
//     interleaved_gate_up: false
//     tp_size: 1
//     tp_rank: 0
//     router_dtype: bf16          # or fp32: precision of the router GEMM (docs/design.md §3.4)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "moe/checkpoint.hpp"
#include "moe/plugin.hpp"
#include "moe/sdk/problem.hpp"

namespace moe {

struct Config {
  std::string source = "<string>";  // file path or "<string>", for messages
  std::string backend = "auto";
  std::vector<std::string> fallback;
  std::vector<std::string> plugin_dirs;
  Problem problem;
  Options options;  // plain entries: the named backend's
  struct PluginOptions {
    std::string plugin;  // a plugin's name or alias
    Options options;
    std::string where;  // "<source>:<line>:<col>" of its key, for messages
  };
  std::vector<PluginOptions> plugin_options;  // options: {NAME: {...}}, in the config's order
  int64_t tokens = 16;
  uint64_t seed = 1;
  std::optional<CheckpointSpec> checkpoint;

  // Throw moe::Error(CONFIG_ERROR) with "<source>:<line>:<col>: ..." for syntax errors, unknown
  // keys, wrong types and invalid problems.
  static Config load_file(const std::string& path);
  static Config parse(const std::string& text, const std::string& source = "<string>");
};

}  // namespace moe
