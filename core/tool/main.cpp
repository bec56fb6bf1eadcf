// moe: list, describe and select plugins, run a layer, and run the conformance suite.
#include <spdlog/spdlog.h>

#include <iostream>

#include "commands.hpp"
#include "moe/logging.hpp"
#include "moe/sdk/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"moe-registry: Mixture-of-Experts backends as plugins, chosen by a YAML config"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  std::string level;
  app.add_option("--log-level", level,
                 "trace, debug, info, warn (default), error or off; "
                 "MOE_LOG_LEVEL sets it too");
  moe::tool::Discovery discovery;
  app.add_option("--plugin-dir", discovery.plugin_dirs,
                 "Also search this directory for plugins (before MOE_PLUGIN_PATH and the "
                 "default directories); repeatable");
  app.parse_complete_callback([&] {
    moe::init_logging_from_env();
    if (!level.empty()) moe::set_log_level(level);
  });
  moe::tool::add_list(app, discovery);
  moe::tool::add_describe(app, discovery);
  moe::tool::add_select(app, discovery);
  moe::tool::add_run(app, discovery);
  moe::tool::add_conformance(app, discovery);
  moe::tool::add_bench(app, discovery);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const moe::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return moe::tool::exit_code();
}
