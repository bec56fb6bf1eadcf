// Loading one plugin library in this process (docs/design.md §2 rules 2, 8): a look at the file,
// dlopen with Boost.DLL (RTLD_NOW | RTLD_LOCAL), the table's checks, init and get_info. The plugin
// scanner (core/scanner) runs exactly this in a child process first, so a library that crashes
// or hangs here is found out there.
#include "loading/loader.hpp"

#include <dlfcn.h>

#include <boost/dll/shared_library.hpp>
#include <mutex>
#include <regex>

#include "loading/elf_check.hpp"
#include "loading/entry_guard.hpp"
#include "loading/table_leases.hpp"
#include "moe/registry.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/extensions.hpp"

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
  moe_plugin_info raw{};  // zeros: what a plugin older than 1.3 (1.5) leaves of the decode rule
  raw.struct_size = sizeof(raw);
  const std::string where = path.string();
  const moe_status st = detail::guarded(where, "get_info", [&] { return api->get_info(&raw); });
  MOE_CHECK(st == MOE_STATUS_OK, st, "{}: get_info failed: {}", where,
            detail::last_error_of(where, api->last_error));
  MOE_CHECK(raw.name != nullptr, MOE_STATUS_INVALID_ARGUMENT, "{}: get_info gave no name",
            path.string());
  static const std::regex kName("[a-z0-9_]+");
  MOE_CHECK(std::regex_match(raw.name, kName), MOE_STATUS_INVALID_ARGUMENT,
            "{}: plugin name '{}' must match [a-z0-9_]+", path.string(), raw.name);
  PluginInfo info;
  info.name = raw.name;
  info.abi_major = api->abi_major;
  info.abi_minor = api->abi_minor;
  info.version = raw.version ? raw.version : "";
  info.description = raw.description ? raw.description : "";
  for (int32_t i = 0; i < raw.num_aliases && raw.aliases != nullptr; ++i) {
    if (raw.aliases[i] != nullptr) info.aliases.emplace_back(raw.aliases[i]);
  }
  info.priority = raw.priority;
  MOE_CHECK(raw.decode_max_tokens >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: get_info gave decode_max_tokens={}: it must be >= 0 (0 = no decode rule)", where,
            raw.decode_max_tokens);
  info.decode = DecodeRule{raw.decode_priority, raw.decode_max_tokens, {}};
  // 1.5: past a 1.4 struct's end; a 1.4 plugin writes nothing there and leaves the zeros.
  if (info.abi_minor >= 5) {
    for (int f = 0; f < MOE_DECODE_FORMATS; ++f) {
      const int64_t v = raw.decode_max_tokens_by_format[f];
      MOE_CHECK(v >= -1, MOE_STATUS_INVALID_ARGUMENT,
                "{}: get_info gave decode_max_tokens_by_format[{}]={}: it must be >= -1 (0 = "
                "decode_max_tokens, -1 = no decode rule in that format)",
                where, f, v);
      info.decode.by_format[size_t(f)] = v;
    }
  }
  info.memory = static_cast<moe_memory>(raw.memory);
  MOE_CHECK(info.memory == MOE_MEMORY_HOST || info.memory == MOE_MEMORY_CUDA_DEVICE,
            MOE_STATUS_INVALID_ARGUMENT, "{}: unknown memory kind {}", path.string(), raw.memory);
  info.format_mask = raw.format_mask;
  info.activation_mask = raw.activation_mask;
  info.routing_mask = raw.routing_mask;
  // 1.4: in a 1.3 plugin's struct this word is tail padding, so only a 1.4 table is believed
  // (check_table has admitted MAJOR 1 only).
  // Each bit means something from the minor that defined it on: an older plugin's other bits
  // are not what this core would read them as.
  info.run_features = info.abi_minor >= 4 ? raw.run_features : 0u;
  if (info.abi_minor < 6) info.run_features &= MOE_RUN_FEATURE_ACCUMULATE;
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

namespace detail {

OpenedTable open_table(const fs::path& path) {
  const std::string where = path.string();
  std::error_code fs_ec;
  const fs::file_status st = fs::status(path, fs_ec);
  MOE_CHECK(fs::exists(st), MOE_STATUS_NOT_FOUND, "{}: no such file", where);
  MOE_CHECK(fs::is_regular_file(st), MOE_STATUS_NOT_FOUND,
            "{}: not a regular file (a plugin is a "
            "shared library)",
            where);
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
  auto* const entry = &lib.get<const moe_plugin_api*()>(MOE_PLUGIN_ENTRY_SYMBOL);
  keep_loaded(std::move(lib));  // before any call into it: what the call leaves must stay valid
  const moe_plugin_api* api =
      detail::guarded(where, MOE_PLUGIN_ENTRY_SYMBOL, [&] { return entry(); });
  check_table(path, api);
  // The caller's hold, taken before get_info is asked (init() comes first); given back here only
  // when a check below fails.
  detail::acquire_table(api, where);
  struct Hold {
    const moe_plugin_api* api;
    const std::string& where;
    bool kept = false;
    ~Hold() {
      if (!kept) detail::release_table(api, where);
    }
  } hold{api, where};
  PluginInfo info = read_info(path, api);
  if (info.memory == MOE_MEMORY_CUDA_DEVICE) {
    MOE_CHECK(api->mem_alloc && api->mem_free && api->mem_copy && api->stream_sync,
              MOE_STATUS_INVALID_ARGUMENT,
              "{}: a plugin with device memory must provide mem_alloc, mem_free, mem_copy and "
              "stream_sync",
              where);
  }
  hold.kept = true;
  return {api, std::move(info)};
}

}  // namespace detail

std::shared_ptr<Plugin> load_plugin(const fs::path& path) {
  detail::OpenedTable table = detail::open_table(path);
  // The Plugin takes a hold of its own; the loader's is given back once it has.
  struct Hold {
    const moe_plugin_api* api;
    std::string where;
    ~Hold() { detail::release_table(api, where); }
  } hold{table.api, path.string()};
  return std::make_shared<Plugin>(path, table.api, std::move(table.info));
}

}  // namespace moe
