// Subcommands of the `moe` tool. Each registers its options on the CLI11 app and runs.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "moe/config.hpp"
#include "moe/registry.hpp"
#include "moe/selection.hpp"

namespace moe::tool {

// Discovery options shared by the subcommands: --plugin-dir, and a config's plugin_dirs.
struct Discovery {
  std::vector<std::string> plugin_dirs;
  std::vector<std::string> plugin_files;
  // config_dirs: a config's plugin_dirs (config_source names it in errors).
  Registry discover(const std::vector<std::string>& config_dirs = {},
                    const std::string& config_source = "") const;
};

void add_list(CLI::App& app, Discovery& d);
void add_describe(CLI::App& app, Discovery& d);
void add_select(CLI::App& app, Discovery& d);
void add_run(CLI::App& app, Discovery& d);
void add_conformance(CLI::App& app, Discovery& d);
void add_bench(CLI::App& app, Discovery& d);

// Process exit codes beyond 0 (success) and 1 (an error, printed).
constexpr int kExitUsage = 2;     // a bad command line; the (sub)command's usage is printed
constexpr int kExitMismatch = 3;  // a result disagrees with the reference

// An output file named on the command line (`what`: the option), checked before any work so that
// a long run does not end in a write error, and without creating it: not empty, not a directory,
// in a directory that exists and may be written, and writable if it exists (MOE_STATUS_IO_ERROR
// naming the option, the path and the reason).
void check_writable(const std::string& path, const char* what);
// One line appended to a record log, the write checked.
void append_line(const std::string& path, const std::string& line, const char* what);

// Set by a subcommand's callback; returned by main.
int& exit_code();

// The names of the bits set in a capability mask, e.g. "bf16,fp8_block"; "-" when none.
std::string mask_names(uint32_t mask, const char* (*name)(int));
// The same names as a list (a value newer than this build: "#<bit>").
std::vector<std::string> mask_list(uint32_t mask, const char* (*name)(int));
// One value's name by `name`, or "#<value>" for a value newer than this build.
std::string value_name(int value, const char* (*name)(int));
// The `name` arguments of the three capability masks.
const char* format_bit_name(int bit);
const char* activation_bit_name(int bit);
const char* routing_bit_name(int bit);

// "moe-registry 0.2.0, core ABI 1.2": `moe --version` and the first line of `moe list`.
std::string version_line();

// --strict (global): a config's fallback replacing the backend it names is an error.
bool& strict();
// Which rule of select_backend chose the plugin: "auto", "named" or "fallback".
std::string selection_rule(const Selection& selection, const Config& config);
// select_backend, warning when the fallback replaced the named backend (an error with --strict).
Selection select_checked(const Registry& registry, const Config& config, Ask ask = Ask::kNeeded);

}  // namespace moe::tool
