// moe: list, describe and select plugins, run a layer, and run the conformance suite.
#include <fmt/format.h>

#include <iostream>
#include <new>

#include "commands.hpp"
#include "moe/logging.hpp"
#include "moe/sdk/error.hpp"

namespace {

// A bad command line: what is wrong, then the usage of the (sub)command it was meant for, and
// exit status 2, as other command-line tools do (CLI11's own codes, 105 and the like, say little).
int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  std::string what = e.what();
  if (app.get_subcommands().empty()) {  // no subcommand recognised: say which ones there are
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    const std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && !rest.front().empty() && rest.front()[0] != '-')
      what = fmt::format("'{}' is not a subcommand; the subcommands are {}", rest.front(),
                         fmt::join(names, ", "));
    else if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)
      what = fmt::format("a subcommand is required: {}", fmt::join(names, ", "));
  }
  std::cerr << "error: " << what << "\n\n" << app.help();
  return moe::tool::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"moe-registry: Mixture-of-Experts backends as plugins, chosen by a YAML config",
               "moe"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  app.set_version_flag("--version", moe::tool::version_line(),
                       "The project version and the core ABI version");
  std::string level;
  app.add_option("--log-level", level,
                 "trace, debug, info, warn (default), error or off; "
                 "MOE_LOG_LEVEL sets it too")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  moe::tool::Discovery discovery;
  app.add_option("--plugin-dir", discovery.plugin_dirs,
                 "Also search this directory for plugins (before MOE_PLUGIN_PATH and the "
                 "default directories); repeatable");
  app.add_flag("--strict", moe::tool::strict(),
               "A config's fallback replacing the backend it names is an error, not a warning "
               "(run, bench, select)");
  app.parse_complete_callback([&] {
    if (!level.empty()) moe::set_log_level(level);
  });
  moe::tool::add_list(app, discovery);
  moe::tool::add_describe(app, discovery);
  moe::tool::add_select(app, discovery);
  moe::tool::add_run(app, discovery);
  moe::tool::add_conformance(app, discovery);
  moe::tool::add_bench(app, discovery);
  try {
    moe::init_logging_from_env();  // first: every log line, from here on, goes to stderr
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  } catch (const moe::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory (std::bad_alloc); in run and bench the problem's "
                 "weights and the batch are what grow: check experts, hidden, intermediate and "
                 "the tokens\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return moe::tool::exit_code();
}
