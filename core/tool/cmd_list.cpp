// moe list [--json] | describe NAME | select --config FILE [--json]. `list` and `describe` without
// a config print what discovery learned from the plugin scanner and load no plugin; `select`
// asks every plugin (loading each one its declared capabilities do not already rule out).
#include <fmt/format.h>

#include <exception>
#include <iostream>

#include "commands.hpp"
#include "json_reports.hpp"
#include "moe/checkpoint.hpp"
#include "moe/config.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/selection.hpp"

namespace moe::tool {
namespace {

void print_plugin(const Plugin& p, bool verbose) {
  const PluginInfo& i = p.info();
  std::string aliases;
  for (const auto& a : i.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
  std::cout << fmt::format("{}  (version {}, ABI {}.{}, {}, {} memory)\n", i.name, i.version,
                           i.abi_major, i.abi_minor, priority_text(i), memory_name(i.memory));
  if (!aliases.empty()) std::cout << "  aliases:     " << aliases << "\n";
  std::cout << "  formats:     " << mask_names(i.format_mask, format_bit_name) << "\n"
            << "  activations: " << mask_names(i.activation_mask, activation_bit_name) << "\n"
            << "  routes:      " << mask_names(i.routing_mask, routing_bit_name) << "\n";
  if (verbose) {
    std::cout << "  about:       " << i.description << "\n";
    if (i.build)
      std::cout << fmt::format("  built with:  SDK {}, {}, CUDA runtime {}, targets {}\n",
                               i.build->sdk_version, i.build->compiler, i.build->cuda_runtime,
                               i.build->targets);
  }
  std::cout << "  file:        " << p.path().string() << "\n";
}

}  // namespace

void add_list(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand("list",
                                 "Plugins found, their ABI and capabilities, and every "
                                 "library skipped with the reason");
  static bool json = false;
  cmd->add_flag("--json", json, "One JSON document instead of the text report");
  cmd->callback([&d] {
    const Registry r = d.discover();
    if (json) {
      std::cout << list_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
      return;
    }
    std::cout << fmt::format(
        "{}\nsearched: {}\n\n", version_line(),
        r.searched().empty() ? "(nothing)" : fmt::format("{}", fmt::join(r.searched(), ", ")));
    std::cout << r.plugins().size() << " plugin(s):\n";
    for (const auto& p : r.plugins()) print_plugin(*p, false);
    if (!r.skipped().empty()) {
      std::cout << "\n" << r.skipped().size() << " skipped:\n";
      for (const auto& s : r.skipped()) std::cout << "  " << s.reason << "\n";
    }
  });
}

void add_describe(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand("describe",
                                 "Everything about one plugin (by name or alias); with "
                                 "--config, whether it supports that problem and "
                                 "its prepared layout");
  static std::string name, config, checkpoint;
  cmd->add_option("name", name, "Plugin name or alias")->required();
  cmd->add_option("--config", config, "A config whose problem to check");
  cmd->add_option("--checkpoint", checkpoint,
                  "With --config: read the checkpoint from this path instead of the config's "
                  "checkpoint.path");
  cmd->callback([&d] {
    std::optional<Config> cfg;
    if (!config.empty()) cfg = Config::load_file(config);
    MOE_CHECK(checkpoint.empty() || (cfg && cfg->checkpoint), MOE_STATUS_CONFIG_ERROR,
              "--checkpoint needs --config with a checkpoint section (it names the convention)");
    if (!checkpoint.empty()) cfg->checkpoint->path = checkpoint;
    const Registry r =
        d.discover(cfg ? cfg->plugin_dirs : std::vector<std::string>{}, cfg ? cfg->source : "");
    const auto plugin = r.find(name);
    MOE_CHECK(plugin != nullptr, MOE_STATUS_NOT_FOUND, "no plugin named '{}'; available: {}", name,
              r.names());
    print_plugin(*plugin, true);
    if (!cfg) return;
    const moe_problem p = cfg->problem.c();
    const Support s = declared_support(*plugin, p);  // as `moe select` answers
    std::cout << "  problem:     " << describe_problem(p) << "\n  supported:   "
              << (s.supported ? "yes"
                              : fmt::format("no ({}): {}", reason_name(s.reason), s.message))
              << "\n";
    if (cfg->checkpoint) {
      // What loading would convert, previewed on the first expert, the shared expert and the
      // sinks; a checkpoint that cannot be read yet is said, not an error of describe.
      std::string what;
      try {
        const auto conv =
            preview_conversions(Checkpoint::open(cfg->checkpoint->path), *cfg->checkpoint, p);
        what = conv.empty() ? fmt::format("stored as {}, nothing converted",
                                          format_name(static_cast<moe_format>(p.format)))
                            : "converted at load: " + describe_conversions(conv, false);
      } catch (const Error& e) {
        what = fmt::format("not read ({})", e.what());
      }
      std::cout << fmt::format("  checkpoint:  {} ({}): {}\n", cfg->checkpoint->path,
                               cfg->checkpoint->convention, what);
    }
    std::cout << plugin->layout_section(p, s.supported);
  });
}

void add_select(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand("select",
                                 "Which backend a config selects, and why every other "
                                 "one was not chosen");
  static std::string config;
  static bool json = false;
  cmd->add_option("--config", config, "YAML config")->required();
  cmd->add_flag("--json", json,
                "One JSON document: the chosen plugin, the rule and every plugin's answer");
  cmd->callback([&d] {
    const Config cfg = Config::load_file(config);
    const Registry r = d.discover(cfg.plugin_dirs, cfg.source);
    if (!json) {
      const Selection sel = select_checked(r, cfg, Ask::kEvery);
      std::cout << "problem: " << describe_problem(cfg.problem.c()) << "\n" << sel.explain();
      // What the chosen backend does with the problem: its layout and, where it has one, the
      // rule that picks a kernel or row layout by batch size.
      if (auto layout = sel.plugin->describe_layout(cfg.problem.c()))
        std::cout << "layout (" << sel.plugin->info().name << "):\n" << *layout << "\n";
      return;
    }
    // A script gets the document even when no plugin fits (then "selected" is null), and the
    // error, on stderr, and exit status of the text report.
    std::optional<Selection> sel;
    std::exception_ptr failure;
    std::string error;
    try {
      sel = select_checked(r, cfg, Ask::kEvery);
    } catch (const Error& e) {
      failure = std::current_exception();
      error = e.what();
    }
    std::cout << select_json(cfg, r, sel, error)
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    if (failure) std::rethrow_exception(failure);
  });
}

}  // namespace moe::tool
