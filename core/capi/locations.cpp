// Where the host API looks when the caller does not say: beside this library, not beside the
// running executable (a host program's executable, e.g. python3, says nothing about where the
// core is). Installed: <libdir>/libmoe_core.so with <libdir>/moe_registry/plugins,
// <prefix>/libexec/moe_registry/moe-plugin-scanner and <prefix>/share/moe_registry/problems;
// build tree: <build>/lib/libmoe_core.so with <build>/plugins, <build>/bin and the source tree's
// configs/problems. The relative paths come from core/CMakeLists.txt.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "handles.hpp"

#ifndef MOE_CAPI_PLUGIN_DIR_FROM_LIB
#define MOE_CAPI_PLUGIN_DIR_FROM_LIB "moe_registry/plugins"
#endif
#ifndef MOE_CAPI_SCANNER_DIR_FROM_LIB
#define MOE_CAPI_SCANNER_DIR_FROM_LIB "../libexec/moe_registry"
#endif
#ifndef MOE_CAPI_PROBLEMS_FROM_LIB
#define MOE_CAPI_PROBLEMS_FROM_LIB "../share/moe_registry/problems"
#endif
#ifndef MOE_CAPI_PROBLEMS_FROM_BUILD_LIB
#define MOE_CAPI_PROBLEMS_FROM_BUILD_LIB "../../configs/problems"
#endif

namespace moe::capi {
namespace fs = std::filesystem;
namespace {

// The directory of the library holding this function; empty if the loader cannot say.
fs::path library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_dir), &info) == 0 || info.dli_fname == nullptr)
    return {};
  std::error_code ec;
  const fs::path lib = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : lib.parent_path();
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

std::string default_core_plugin_dir() {
  const fs::path dir = library_dir();
  if (env_set("MOE_CORE_PLUGIN_DIR") || dir.empty()) return "";
  std::error_code ec;
  for (const char* rel : {MOE_CAPI_PLUGIN_DIR_FROM_LIB, "../plugins"})
    if (fs::is_directory(dir / rel, ec)) return (dir / rel).lexically_normal().string();
  return "";
}

std::string default_scanner() {
  const fs::path dir = library_dir();
  if (env_set("MOE_PLUGIN_SCANNER") || dir.empty()) return "";
  for (const char* rel : {MOE_CAPI_SCANNER_DIR_FROM_LIB, "../bin"}) {
    const fs::path exe = (dir / rel / "moe-plugin-scanner").lexically_normal();
    std::error_code ec;
    if (fs::is_regular_file(exe, ec) && ::access(exe.c_str(), X_OK) == 0) return exe.string();
  }
  return "";
}

std::string default_problem_dir() {
  const fs::path dir = library_dir();
  MOE_CHECK(!dir.empty(), MOE_STATUS_NOT_FOUND,
            "cannot find the conformance problem set: the loader does not say where libmoe_core "
            "is; give problems_dir");
  std::vector<std::string> looked;
  for (const char* rel : {MOE_CAPI_PROBLEMS_FROM_LIB, MOE_CAPI_PROBLEMS_FROM_BUILD_LIB}) {
    const fs::path problems = (dir / rel).lexically_normal();
    std::error_code ec;
    if (fs::is_directory(problems, ec)) return problems.string();
    looked.push_back(problems.string());
  }
  MOE_FAIL(MOE_STATUS_NOT_FOUND,
           "cannot find the conformance problem set: looked in {} (installed) and {} (build "
           "tree); give problems_dir",
           looked[0], looked[1]);
}

}  // namespace moe::capi
