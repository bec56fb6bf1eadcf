// moe-plugin-scanner [--parent-pid PID] <library>: loads one plugin library exactly as the core
// would (load_plugin: the ELF check, dlopen, the entry symbol, the table's checks, init, get_info,
// build info) and prints what it found as one JSON object on stdout (scan_json.hpp). The core runs
// it in a child process before loading a library itself (docs/design.md §2 rule 9), so that a
// library that crashes or hangs takes down only this process, and the core can say which. The
// core passes its pid (--parent-pid) and an absolute library path.
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "loading/scan_json.hpp"
#include "moe/logging.hpp"
#include "moe/registry.hpp"
#include "moe/sdk/error.hpp"

namespace {

nlohmann::json scan(const std::string& path) {
  nlohmann::json out = {{"protocol", moe::detail::kScanProtocol},
                        {"abi", {MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR}}};
  try {
    const auto plugin = moe::load_plugin(path);
    out["ok"] = true;
    out["info"] = moe::detail::info_to_json(plugin->info());
  } catch (const moe::Error& e) {
    out["ok"] = false;
    out["status"] = static_cast<int32_t>(e.status());
    out["error"] = e.what();
  } catch (const std::exception& e) {
    out["ok"] = false;
    out["status"] = static_cast<int32_t>(MOE_STATUS_INTERNAL);
    out["error"] = path + ": " + e.what();
  }
  return out;  // the Plugin is gone: its shutdown() has run, and a crash there still counts
}

// "--parent-pid PID": the pid, else 0 (none given), else -1 (not a pid).
pid_t parent_pid(int argc, char** argv) {
  if (argc != 4 || std::string_view(argv[1]) != "--parent-pid") return 0;
  char* end = nullptr;
  errno = 0;
  const long pid = std::strtol(argv[2], &end, 10);
  return end != argv[2] && *end == '\0' && errno == 0 && pid > 0 && pid == pid_t(pid) ? pid_t(pid)
                                                                                      : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const pid_t parent = parent_pid(argc, argv);
  const int library = parent > 0 ? 3 : 1;
  if (parent < 0 || argc != library + 1 || argv[library][0] == '-') {
    std::cerr << "usage: moe-plugin-scanner [--parent-pid PID] <plugin library>\n"
                 "Loads one moe-registry plugin and prints its info, or why it cannot be used, "
                 "as JSON. Run by the core's plugin discovery; not meant to be run by hand.\n";
    return 2;
  }
  // Die with the core (a core killed while scanning leaves no scanner behind), and leave no core
  // dump: crashing is what this process is for when a library is bad. The death signal is only
  // asked for now, after exec: a core that died before this line sends none, so check that the
  // parent is still the core (an orphan is re-parented to init or a subreaper).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && getppid() != parent) return 5;
  prctl(PR_SET_DUMPABLE, 0);
  // stdout carries only the answer: whatever the library prints goes to stderr.
  const int answer_fd = dup(STDOUT_FILENO);
  if (answer_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 3;
  moe::init_logging_from_env();
  const std::string answer = moe::detail::dump_json(scan(argv[library])) + "\n";
  std::fflush(stdout);
  size_t written = 0;
  while (written < answer.size()) {
    const ssize_t n = write(answer_fd, answer.data() + written, answer.size() - written);
    if (n <= 0) return 4;
    written += size_t(n);
  }
  return 0;
}
