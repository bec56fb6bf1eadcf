// Discovery and loading of plugin libraries with Boost.DLL (RTLD_NOW | RTLD_LOCAL).
#include "moe/registry.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <regex>
#include <set>

#include "elf_check.hpp"
#include "loading/table_leases.hpp"
#include "moe/logging.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/extensions.hpp"

#ifndef MOE_INSTALL_PLUGIN_DIR_FULL
#define MOE_INSTALL_PLUGIN_DIR_FULL ""
#endif

namespace fs = std::filesystem;

namespace moe {
namespace {

// Libraries stay loaded until exit (docs/design.md §2 rule 8): objects from them may live anywhere.
void keep_loaded(boost::dll::shared_library&& lib) {
  static auto* libs = new std::vector<boost::dll::shared_library>();
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  libs->push_back(std::move(lib));
}

PluginInfo read_info(const fs::path& path, const moe_plugin_api* api) {
  moe_plugin_info raw{};
  raw.struct_size = sizeof(raw);
  const moe_status st = api->get_info(&raw);
  MOE_CHECK(st == MOE_STATUS_OK, st, "{}: get_info failed: {}", path.string(), api->last_error());
  MOE_CHECK(raw.name != nullptr, MOE_STATUS_INVALID_ARGUMENT, "{}: get_info gave no name",
            path.string());
  static const std::regex kName("[a-z0-9_]+");
  MOE_CHECK(std::regex_match(raw.name, kName), MOE_STATUS_INVALID_ARGUMENT,
            "{}: plugin name '{}' must match [a-z0-9_]+", path.string(), raw.name);
  PluginInfo info;
  info.name = raw.name;
  info.version = raw.version ? raw.version : "";
  info.description = raw.description ? raw.description : "";
  for (int32_t i = 0; i < raw.num_aliases && raw.aliases != nullptr; ++i) {
    if (raw.aliases[i] != nullptr) info.aliases.emplace_back(raw.aliases[i]);
  }
  info.priority = raw.priority;
  info.memory = static_cast<moe_memory>(raw.memory);
  MOE_CHECK(info.memory == MOE_MEMORY_HOST || info.memory == MOE_MEMORY_CUDA_DEVICE,
            MOE_STATUS_INVALID_ARGUMENT, "{}: unknown memory kind {}", path.string(), raw.memory);
  info.format_mask = raw.format_mask;
  info.activation_mask = raw.activation_mask;
  info.routing_mask = raw.routing_mask;
  if (MOE_STRUCT_HAS(api, moe_plugin_api, ext)) {
    sdk::check_extension_chain(api->ext, (path.string() + ": moe_plugin_api.ext").c_str());
    if (const auto* b = sdk::find_extension<moe_build_info>(api->ext, MOE_EXT_BUILD_INFO)) {
      auto str = [](const char* s) { return std::string(s != nullptr ? s : "?"); };
      info.build =
          BuildInfo{str(b->sdk_version), str(b->compiler), str(b->cuda_runtime), str(b->targets)};
    }
  }
  return info;
}

void check_table(const fs::path& path, const moe_plugin_api* api) {
  const std::string where = path.string();
  MOE_CHECK(api != nullptr, MOE_STATUS_INVALID_ARGUMENT, "{}: {}() returned NULL", where,
            MOE_PLUGIN_ENTRY_SYMBOL);
  // struct_size, abi_major and abi_minor are frozen at the front of the table forever.
  constexpr size_t kHead = offsetof(moe_plugin_api, abi_minor) + sizeof(uint32_t);
  MOE_CHECK(api->struct_size >= kHead, MOE_STATUS_ABI_MISMATCH,
            "{}: function table struct_size={} is too small to hold a version", where,
            api->struct_size);
  MOE_CHECK(api->abi_major == MOE_ABI_VERSION_MAJOR, MOE_STATUS_ABI_MISMATCH,
            "{}: plugin ABI {}.{} is incompatible with this core's ABI {}.{} (MAJOR must match)",
            where, api->abi_major, api->abi_minor, MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR);
  MOE_CHECK(api->struct_size >= MOE_PLUGIN_API_MIN_SIZE, MOE_STATUS_ABI_MISMATCH,
            "{}: function table struct_size={} is smaller than the minimum {} of ABI {}.0", where,
            api->struct_size, MOE_PLUGIN_API_MIN_SIZE, MOE_ABI_VERSION_MAJOR);
  const std::pair<const void*, const char*> required[] = {
      {reinterpret_cast<const void*>(api->init), "init"},
      {reinterpret_cast<const void*>(api->last_error), "last_error"},
      {reinterpret_cast<const void*>(api->get_info), "get_info"},
      {reinterpret_cast<const void*>(api->supports), "supports"},
      {reinterpret_cast<const void*>(api->prepare), "prepare"},
      {reinterpret_cast<const void*>(api->destroy_layer), "destroy_layer"},
      {reinterpret_cast<const void*>(api->workspace_size), "workspace_size"},
      {reinterpret_cast<const void*>(api->run), "run"},
  };
  for (const auto& [fn, name] : required)
    MOE_CHECK(fn != nullptr, MOE_STATUS_INVALID_ARGUMENT, "{}: required entry '{}' is NULL", where,
              name);
}

}  // namespace

std::shared_ptr<Plugin> load_plugin(const fs::path& path) {
  const std::string where = path.string();
  std::error_code fs_ec;
  MOE_CHECK(fs::is_regular_file(path, fs_ec), MOE_STATUS_NOT_FOUND, "{}: no such file", where);
  const std::string elf = detail::elf_problem(path);
  MOE_CHECK(elf.empty(), MOE_STATUS_INVALID_ARGUMENT, "{}: {}", where, elf);

  boost::dll::shared_library lib;
  boost::dll::fs::error_code ec;
  dlerror();  // clear, so the message below is this load's
  lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* why = dlerror();
    MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{}: cannot be loaded: {}", where,
             why ? why : ec.message());
  }
  MOE_CHECK(lib.has(MOE_PLUGIN_ENTRY_SYMBOL), MOE_STATUS_NOT_FOUND,
            "{}: has no entry point '{}': not a moe-registry plugin", where,
            MOE_PLUGIN_ENTRY_SYMBOL);
  auto entry = lib.get<const moe_plugin_api*()>(MOE_PLUGIN_ENTRY_SYMBOL);
  const moe_plugin_api* api = nullptr;
  try {
    api = entry();
  } catch (...) {
    MOE_FAIL(MOE_STATUS_INTERNAL, "{}: {}() threw an exception", where, MOE_PLUGIN_ENTRY_SYMBOL);
  }
  keep_loaded(std::move(lib));
  check_table(path, api);
  // A hold of our own while get_info is asked (init() comes first); the Plugin takes its own.
  detail::acquire_table(api, where);
  struct Hold {
    const moe_plugin_api* api;
    const std::string& where;
    ~Hold() { detail::release_table(api, where); }
  } hold{api, where};
  PluginInfo info = read_info(path, api);
  if (info.memory == MOE_MEMORY_CUDA_DEVICE) {
    MOE_CHECK(api->mem_alloc && api->mem_free && api->mem_copy && api->stream_sync,
              MOE_STATUS_INVALID_ARGUMENT,
              "{}: a plugin with device memory must provide mem_alloc, mem_free, mem_copy and "
              "stream_sync",
              where);
  }
  return std::make_shared<Plugin>(path, api, std::move(info));
}

std::vector<fs::path> plugin_files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".so") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<fs::path> default_plugin_dirs() {
  std::vector<fs::path> dirs;
  boost::dll::fs::error_code ec;
  const fs::path exe_dir = boost::dll::program_location(ec).parent_path();
  if (!ec) {
    dirs.push_back(exe_dir / ".." / "plugins");
    dirs.push_back(exe_dir / ".." / "lib" / "moe_registry" / "plugins");
  }
  if (*MOE_INSTALL_PLUGIN_DIR_FULL) dirs.emplace_back(MOE_INSTALL_PLUGIN_DIR_FULL);
  std::vector<fs::path> existing;
  std::set<fs::path> seen;
  for (const auto& d : dirs) {
    std::error_code e;
    if (!fs::is_directory(d, e)) continue;
    const fs::path canon = fs::canonical(d, e);
    if (!e && seen.insert(canon).second) existing.push_back(canon);
  }
  return existing;
}

Registry Registry::discover(const DiscoveryOptions& options) {
  init_logging_from_env();
  Registry r;
  for (const auto& file : options.files) r.add_file(file, /*strict=*/true);
  for (const auto& dir : options.config_dirs) {
    std::error_code ec;
    MOE_CHECK(fs::is_directory(dir, ec), MOE_STATUS_NOT_FOUND,
              "plugin directory '{}' (from plugin_dirs) does not exist", dir);
    r.add_dir(dir);
  }
  if (options.use_env) {
    if (const char* env = std::getenv("MOE_PLUGIN_PATH"); env && *env) {
      std::string paths(env);
      size_t start = 0;
      while (start <= paths.size()) {
        const size_t end = std::min(paths.find(':', start), paths.size());
        const std::string dir = paths.substr(start, end - start);
        std::error_code ec;
        if (!dir.empty() && fs::is_directory(dir, ec)) {
          r.add_dir(dir);
        } else if (!dir.empty()) {
          spdlog::warn("MOE_PLUGIN_PATH entry '{}' is not a directory; ignored", dir);
        }
        start = end + 1;
      }
    }
  }
  if (options.use_default) {
    for (const auto& dir : default_plugin_dirs()) r.add_dir(dir);
  }
  return r;
}

void Registry::add_dir(const fs::path& dir) {
  searched_.push_back(dir.string());
  for (const auto& file : plugin_files_in(dir)) add_file(file, /*strict=*/false);
}

void Registry::add_file(const fs::path& path, bool strict) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(path, ec);
  for (const auto& p : plugins_) {
    if (fs::weakly_canonical(p->path(), ec) == canon) return;  // same file found twice
  }
  try {
    add_loaded(load_plugin(path));
  } catch (const Error& e) {
    skipped_.push_back({path.string(), e.what()});
    spdlog::warn("skipped plugin library {}", e.what());
    if (strict) throw;
  }
}

void Registry::add_loaded(std::shared_ptr<Plugin> plugin) {
  std::vector<std::string> names = plugin->info().aliases;
  names.push_back(plugin->name());
  for (const auto& existing : plugins_) {
    for (const auto& n : names) {
      MOE_CHECK(!existing->answers_to(n), MOE_STATUS_INVALID_ARGUMENT,
                "{}: duplicate plugin name '{}', already provided by {} (the first found wins)",
                plugin->path().string(), n, existing->path().string());
    }
  }
  spdlog::debug("loaded plugin '{}' from {}", plugin->name(), plugin->path().string());
  plugins_.push_back(std::move(plugin));
}

std::shared_ptr<Plugin> Registry::find(std::string_view name) const {
  for (const auto& p : plugins_)
    if (p->answers_to(name)) return p;
  return nullptr;
}

std::string Registry::names() const {
  std::string out;
  for (const auto& p : plugins_) {
    if (!out.empty()) out += ", ";
    out += p->name();
    if (!p->info().aliases.empty()) {
      out += " (";
      for (size_t i = 0; i < p->info().aliases.size(); ++i)
        out += (i ? ", " : "") + p->info().aliases[i];
      out += ")";
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace moe
