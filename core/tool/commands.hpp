// Subcommands of the `moe` tool. Each registers its options on the CLI11 app and runs.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "moe/registry.hpp"

namespace moe::tool {

// Discovery options shared by the subcommands: --plugin-dir, and a config's plugin_dirs.
struct Discovery {
  std::vector<std::string> plugin_dirs;
  std::vector<std::string> plugin_files;
  Registry discover(const std::vector<std::string>& config_dirs = {}) const;
};

void add_list(CLI::App& app, Discovery& d);
void add_describe(CLI::App& app, Discovery& d);
void add_select(CLI::App& app, Discovery& d);
void add_run(CLI::App& app, Discovery& d);
void add_conformance(CLI::App& app, Discovery& d);
void add_bench(CLI::App& app, Discovery& d);

// Process exit codes beyond 0 (success) and 1 (an error, printed).
constexpr int kExitMismatch = 3;  // a result disagrees with the reference

// Set by a subcommand's callback; returned by main.
int& exit_code();

// The names of the bits set in a capability mask, e.g. "bf16,fp8_block"; "-" when none.
std::string mask_names(uint32_t mask, const char* (*name)(int));
}  // namespace moe::tool
