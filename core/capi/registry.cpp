// moe_host_registry_*: discovery, the plugins found and the libraries skipped, support and
// `moe describe` for one plugin.
#include <fmt/format.h>

#include <optional>

#include "handles.hpp"
#include "moe/sdk/enum_names.hpp"

namespace moe::capi {
namespace {

// The names of the bits set in `mask`, by `name_of` (an unknown bit as "unknown(N)").
template <class Enum>
std::vector<std::string> mask_names(uint32_t mask, const char* (*name_of)(Enum)) {
  std::vector<std::string> out;
  for (uint32_t bit = 0; bit < 32; ++bit) {
    if ((mask & (1u << bit)) == 0) continue;
    const std::string name = name_of(static_cast<Enum>(bit));
    out.push_back(name == "invalid" || name.empty() ? fmt::format("unknown({})", bit) : name);
  }
  return out;
}

std::vector<const char*> pointers(const std::vector<std::string>& strings) {
  std::vector<const char*> out;
  for (const auto& s : strings) out.push_back(s.c_str());
  return out;
}

moe_host_plugin_strings strings_of(const Plugin& plugin) {
  const PluginInfo& i = plugin.info();
  moe_host_plugin_strings s;
  s.path = plugin.path().string();
  s.aliases = i.aliases;
  s.formats = mask_names(i.format_mask, &format_name);
  s.activations = mask_names(i.activation_mask, &activation_name);
  s.routings = mask_names(i.routing_mask, &routing_name);
  s.alias_ptrs = pointers(s.aliases);
  s.format_ptrs = pointers(s.formats);
  s.activation_ptrs = pointers(s.activations);
  s.routing_ptrs = pointers(s.routings);
  return s;
}

std::string joined(const std::vector<std::string>& items) {
  return items.empty() ? "(none)" : fmt::format("{}", fmt::join(items, ", "));
}

// The text of moe_host_describe, as `moe describe [--config]` prints it.
std::string describe(const Plugin& plugin, const moe_host_plugin_strings& s,
                     const moe_problem* problem) {
  const PluginInfo& i = plugin.info();
  std::string out = fmt::format("{}  (version {}, ABI {}.{}, {}, {} memory)\n", i.name, i.version,
                                i.abi_major, i.abi_minor, priority_text(i), memory_name(i.memory));
  if (!s.aliases.empty()) out += "  aliases:     " + joined(s.aliases) + "\n";
  out += "  formats:     " + joined(s.formats) + "\n";
  out += "  activations: " + joined(s.activations) + "\n";
  out += "  routes:      " + joined(s.routings) + "\n";
  out += "  about:       " + i.description + "\n";
  if (i.build)
    out += fmt::format("  built with:  SDK {}, {}, CUDA runtime {}, targets {}\n",
                       i.build->sdk_version, i.build->compiler, i.build->cuda_runtime,
                       i.build->targets);
  out += "  file:        " + s.path + "\n";
  if (problem == nullptr) return out;
  const Problem p = read_problem(problem, "problem");
  const moe_problem c = p.c();
  const Support support = plugin.supports(c);
  out += "  problem:     " + describe_problem(c) + "\n  supported:   " +
         (support.supported
              ? std::string("yes")
              : fmt::format("no ({}): {}", reason_name(support.reason), support.message)) +
         "\n";
  out += plugin.layout_section(c, support.supported);
  return out;
}

size_t index_of(const moe_host_registry& r, const char* name) {
  MOE_CHECK(name != nullptr, MOE_STATUS_INVALID_ARGUMENT, "name is NULL");
  const auto& plugins = r.registry.plugins();
  for (size_t i = 0; i < plugins.size(); ++i)
    if (plugins[i]->answers_to(name)) return i;
  MOE_FAIL(MOE_STATUS_NOT_FOUND, "no plugin named '{}'; available: {}", name, r.registry.names());
}

size_t checked_index(int64_t index, size_t count, const char* what) {
  MOE_CHECK(index >= 0 && size_t(index) < count, MOE_STATUS_INVALID_ARGUMENT,
            "{} index {} is out of range: there are {}", what, index, count);
  return size_t(index);
}

}  // namespace
}  // namespace moe::capi

using namespace moe::capi;  // NOLINT: the C entry points below are thin

extern "C" {

moe_status moe_host_registry_open(const moe_host_registry_options* options,
                                  moe_host_registry** registry) {
  return guarded([&] {
    deref(registry, "registry") = nullptr;
    moe_host_registry_options defaults{};
    defaults.use_env = 1;
    defaults.use_default = 1;
    const moe_host_registry_options o =
        options == nullptr
            ? defaults
            : read_args(options, MOE_HOST_REGISTRY_OPTIONS_MIN_SIZE, "moe_host_registry_options");
    moe::DiscoveryOptions d;
    d.config_dirs = read_paths(o.plugin_dirs, o.num_plugin_dirs, "plugin_dirs");
    d.files = read_paths(o.plugin_files, o.num_plugin_files, "plugin_files");
    // An empty path is not "the default" (NULL is): it would load every plugin unscanned, or
    // refuse the built-in ones as foreign.
    MOE_CHECK(o.core_plugin_dir == nullptr || *o.core_plugin_dir != '\0',
              MOE_STATUS_INVALID_ARGUMENT, "core_plugin_dir is an empty path (NULL: the default)");
    MOE_CHECK(o.scanner == nullptr || *o.scanner != '\0', MOE_STATUS_INVALID_ARGUMENT,
              "scanner is an empty path (NULL: the default)");
    d.use_env = o.use_env != 0;
    d.use_default = o.use_default != 0;
    d.core_plugin_dir = o.core_plugin_dir ? o.core_plugin_dir : default_core_plugin_dir();
    d.scanner = o.scanner ? o.scanner : default_scanner();
    auto r = std::make_unique<moe_host_registry>(moe_host_registry{moe::Registry::discover(d), {}});
    for (const auto& p : r->registry.plugins()) r->strings.push_back(strings_of(*p));
    *registry = r.release();
  });
}

moe_status moe_host_registry_destroy(moe_host_registry* registry) {
  return guarded([&] { delete registry; });
}

moe_status moe_host_registry_plugin_count(const moe_host_registry* registry, int64_t* count) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    deref(count, "count") = int64_t(r.registry.plugins().size());
  });
}

moe_status moe_host_registry_plugin_info(const moe_host_registry* registry, int64_t index,
                                         moe_host_plugin_info* info) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    const size_t i = checked_index(index, r.registry.plugins().size(), "plugin");
    const moe::PluginInfo& p = r.registry.plugins()[i]->info();
    const moe_host_plugin_strings& s = r.strings[i];
    moe_host_plugin_info out{};
    out.name = p.name.c_str();
    out.version = p.version.c_str();
    out.description = p.description.c_str();
    out.path = s.path.c_str();
    out.aliases = s.alias_ptrs.data();
    out.num_aliases = int32_t(s.alias_ptrs.size());
    out.priority = p.priority;
    out.memory = p.memory;
    out.abi_major = p.abi_major;
    out.abi_minor = p.abi_minor;
    out.formats = s.format_ptrs.data();
    out.num_formats = int32_t(s.format_ptrs.size());
    out.activations = s.activation_ptrs.data();
    out.num_activations = int32_t(s.activation_ptrs.size());
    out.routings = s.routing_ptrs.data();
    out.num_routings = int32_t(s.routing_ptrs.size());
    out.decode_priority = p.decode.priority;
    out.decode_max_tokens = p.decode.max_tokens;
    for (int f = 0; f < MOE_DECODE_FORMATS; ++f)
      out.decode_max_tokens_by_format[f] = p.decode.by_format[size_t(f)];
    out.run_features = p.run_features;
    write_out(info, MOE_HOST_PLUGIN_INFO_MIN_SIZE, "moe_host_plugin_info", out);
  });
}

moe_status moe_host_registry_skipped_count(const moe_host_registry* registry, int64_t* count) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    deref(count, "count") = int64_t(r.registry.skipped().size());
  });
}

moe_status moe_host_registry_skipped(const moe_host_registry* registry, int64_t index,
                                     moe_host_skipped_library* skipped) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    const auto& s =
        r.registry.skipped()[checked_index(index, r.registry.skipped().size(), "skipped library")];
    moe_host_skipped_library out{};
    out.path = s.path.c_str();
    out.reason = s.reason.c_str();
    write_out(skipped, MOE_HOST_SKIPPED_LIBRARY_MIN_SIZE, "moe_host_skipped_library", out);
  });
}

moe_status moe_host_supports(const moe_host_registry* registry, const char* name,
                             const moe_problem* problem, moe_support* answer) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    moe::sdk::check_struct(answer, MOE_SUPPORT_MIN_SIZE, "moe_support");
    const auto& plugin = *r.registry.plugins()[index_of(r, name)];
    std::optional<moe::Problem> p;
    try {
      p.emplace(read_problem(problem, "problem"));
    } catch (const moe::Refusal& no) {  // a value no backend knows: answered, then UNSUPPORTED
      moe::sdk::answer_support(answer, no.reason(), no.what(), 0);
      throw;
    }
    const moe::Support s = moe::declared_support(plugin, p->c());  // as selection answers
    moe::sdk::answer_support(answer, s.supported ? MOE_REASON_NONE : s.reason, s.message, s.routes);
  });
}

moe_status moe_host_describe(const moe_host_registry* registry, const char* name,
                             const moe_problem* problem, char* buf, size_t cap, size_t* needed) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    const size_t i = index_of(r, name);
    write_text(describe(*r.registry.plugins()[i], r.strings[i], problem), buf, cap, needed);
  });
}

}  // extern "C"
