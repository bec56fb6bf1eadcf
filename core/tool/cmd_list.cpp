// moe list | describe NAME | select --config FILE
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "moe/config.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/selection.hpp"

namespace moe::tool {
namespace {

const char* fmt_name(int i) {
  return format_name(static_cast<moe_format>(i));
}
const char* act_name(int i) {
  return activation_name(static_cast<moe_activation>(i));
}
const char* route_name(int i) {
  return routing_name(static_cast<moe_routing>(i));
}

void print_plugin(const Plugin& p, bool verbose) {
  const PluginInfo& i = p.info();
  std::string aliases;
  for (const auto& a : i.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
  std::cout << fmt::format("{}  (version {}, ABI {}.{}, priority {}, {} memory)\n", i.name,
                           i.version, p.api().abi_major, p.api().abi_minor, i.priority,
                           memory_name(i.memory));
  if (!aliases.empty()) std::cout << "  aliases:     " << aliases << "\n";
  std::cout << "  formats:     " << mask_names(i.format_mask, fmt_name) << "\n"
            << "  activations: " << mask_names(i.activation_mask, act_name) << "\n"
            << "  routes:      " << mask_names(i.routing_mask, route_name) << "\n";
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
  cmd->callback([&d] {
    const Registry r = d.discover();
    std::cout << fmt::format(
        "core ABI {}.{}\nsearched: {}\n\n", MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR,
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
  static std::string name, config;
  cmd->add_option("name", name, "Plugin name or alias")->required();
  cmd->add_option("--config", config, "A config whose problem to check");
  cmd->callback([&d] {
    std::optional<Config> cfg;
    if (!config.empty()) cfg = Config::load_file(config);
    const Registry r = d.discover(cfg ? cfg->plugin_dirs : std::vector<std::string>{});
    const auto plugin = r.find(name);
    MOE_CHECK(plugin != nullptr, MOE_STATUS_NOT_FOUND, "no plugin named '{}'; available: {}", name,
              r.names());
    print_plugin(*plugin, true);
    if (!cfg) return;
    const moe_problem p = cfg->problem.c();
    const Support s = plugin->supports(p);
    std::cout << "  problem:     " << describe_problem(p) << "\n  supported:   "
              << (s.supported ? "yes"
                              : fmt::format("no ({}): {}", reason_name(s.reason), s.message))
              << "\n";
    if (auto layout = plugin->describe_layout(p)) std::cout << "  layout:\n" << *layout << "\n";
  });
}

void add_select(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand("select",
                                 "Which backend a config selects, and why every other "
                                 "one was not chosen");
  static std::string config;
  cmd->add_option("--config", config, "YAML config")->required();
  cmd->callback([&d] {
    const Config cfg = Config::load_file(config);
    const Registry r = d.discover(cfg.plugin_dirs);
    std::cout << "problem: " << describe_problem(cfg.problem.c()) << "\n"
              << select_backend(r, cfg).explain();
  });
}

}  // namespace moe::tool
