// Registry and Selection over moe_host_registry / moe_host_selection: discovery, `moe list`,
// `moe describe`, `moe select`, prepare and `moe conformance` as calls.
#include <nanobind/stl/string.h>

#include <array>
#include <cstring>

#include "handles.hpp"
#include "moe/sdk/weights.hpp"
#include "status.hpp"
#include "tensors.hpp"

namespace moe::py {
namespace {

nb::list string_list(const char* const* items, int32_t count) {
  nb::list out;
  for (int32_t i = 0; i < count; ++i) out.append(items[i]);
  return out;
}

std::vector<const char*> c_strings(const std::vector<std::string>& strings, const char* name) {
  std::vector<const char*> out;
  for (size_t i = 0; i < strings.size(); ++i)
    out.push_back(c_text(strings[i], fmt::format("{}[{}]", name, i)));
  return out;
}

moe::WeightField weight_field(const std::string& key) {
  std::string known;
  for (const auto& [name, field] : moe::kWeightFields) {
    if (key == name) return field;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  fail(MOE_STATUS_INVALID_ARGUMENT, "weights: unknown key '{}'; known keys: {}", key, known);
}

}  // namespace

Registry::Registry(const std::vector<std::string>& plugin_dirs,
                   const std::vector<std::string>& plugin_files, bool use_env, bool use_default,
                   const std::optional<std::string>& core_plugin_dir,
                   const std::optional<std::string>& scanner) {
  const auto dirs = c_strings(plugin_dirs, "plugin_dirs");
  const auto files = c_strings(plugin_files, "plugin_files");
  auto o = sized<moe_host_registry_options>();
  o.plugin_dirs = dirs.data();
  o.num_plugin_dirs = int32_t(dirs.size());
  o.plugin_files = files.data();
  o.num_plugin_files = int32_t(files.size());
  o.use_env = use_env;
  o.use_default = use_default;
  o.core_plugin_dir = c_text(core_plugin_dir, "core_plugin_dir");
  o.scanner = c_text(scanner, "scanner");
  nb::gil_scoped_release unlocked;  // the scanner runs in child processes
  check(moe_host_registry_open(&o, &handle_));
}

Registry::~Registry() {
  moe_host_registry_destroy(handle_);
}

nb::list Registry::plugins() const {
  int64_t count = 0;
  check(moe_host_registry_plugin_count(handle_, &count));
  nb::list out;
  for (int64_t i = 0; i < count; ++i) {
    auto p = sized<moe_host_plugin_info>();
    check(moe_host_registry_plugin_info(handle_, i, &p));
    nb::dict d;
    d["name"] = p.name;
    d["version"] = p.version;
    d["description"] = p.description;
    d["path"] = p.path;
    d["aliases"] = string_list(p.aliases, p.num_aliases);
    d["priority"] = p.priority;
    d["decode_priority"] = p.decode_priority;
    d["decode_max_tokens"] = p.decode_max_tokens;
    nb::list by_format;  // ABI 1.5: indexed by moe_format, as moe_host_plugin_info holds it
    for (int f = 0; f < MOE_DECODE_FORMATS; ++f) by_format.append(p.decode_max_tokens_by_format[f]);
    d["decode_max_tokens_by_format"] = by_format;
    d["memory"] = p.memory == MOE_MEMORY_HOST ? "host" : "cuda_device";
    d["abi"] = nb::make_tuple(p.abi_major, p.abi_minor);
    d["formats"] = string_list(p.formats, p.num_formats);
    d["activations"] = string_list(p.activations, p.num_activations);
    d["routings"] = string_list(p.routings, p.num_routings);
    d["accumulates"] = (p.run_features & MOE_RUN_FEATURE_ACCUMULATE) != 0;  // host API 1.9
    d["routes_in_run"] = (p.run_features & MOE_RUN_FEATURE_ROUTES) != 0;
    out.append(d);
  }
  return out;
}

nb::list Registry::skipped() const {
  int64_t count = 0;
  check(moe_host_registry_skipped_count(handle_, &count));
  nb::list out;
  for (int64_t i = 0; i < count; ++i) {
    auto s = sized<moe_host_skipped_library>();
    check(moe_host_registry_skipped(handle_, i, &s));
    out.append(nb::make_tuple(s.path, s.reason));
  }
  return out;
}

std::string Registry::describe(const std::string& name, const Problem* problem) const {
  const moe_problem* p = problem ? &problem->c : nullptr;
  size_t needed = 0;
  const char* plugin = c_text(name, "name");
  nb::gil_scoped_release unlocked;  // may load the plugin
  check(moe_host_describe(handle_, plugin, p, nullptr, 0, &needed));
  std::vector<char> text(needed);
  check(moe_host_describe(handle_, plugin, p, text.data(), text.size(), &needed));
  return text.data();
}

nb::dict Registry::supports(const std::string& name, const Problem& problem) const {
  auto answer = sized<moe_support>();
  answer.routes = -1;
  const char* plugin = c_text(name, "name");
  {
    nb::gil_scoped_release unlocked;
    check(moe_host_supports(handle_, plugin, &problem.c, &answer));
  }
  nb::dict d;
  d["supported"] = answer.supported == 1;
  d["message"] = answer.message;
  d["routes"] = answer.routes < 0 ? nb::object(nb::none()) : nb::bool_(answer.routes == 1);
  return d;
}

Selection* Registry::select(const std::optional<std::string>& path,
                            const std::optional<std::string>& text, bool ask_every) const {
  auto a = sized<moe_host_select_args>();
  a.config_path = c_text(path, "config (a path)");
  a.config_text = c_text(text, "config (YAML text)");
  a.ask_every = ask_every;
  moe_host_selection* handle = nullptr;
  {
    nb::gil_scoped_release unlocked;
    check(moe_host_select(handle_, &a, &handle));
  }
  return new Selection(handle);
}

namespace {

// An option's value as a config's `options:` would spell it: strings as they are, numbers by
// str(), booleans true / false; None or a container is refused, naming the key.
// (NumPy and torch scalars arrive as their Python values: moe_registry's plain_scalar.)
std::string option_value(const std::string& key, nb::handle value) {
  if (nb::isinstance<nb::bool_>(value)) return nb::cast<bool>(value) ? "true" : "false";
  if (!nb::isinstance<nb::str>(value) && !nb::isinstance<nb::int_>(value) &&
      !nb::isinstance<nb::float_>(value))
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "options['{}']: a {} is not an option value (a string, number or bool, as a config's "
         "options: holds)",
         key, nb::cast<std::string>(nb::str(nb::handle(value.type()).attr("__name__"))));
  return nb::cast<std::string>(nb::str(value));
}

}  // namespace

Layer* Registry::prepare(const std::optional<std::string>& backend, const Problem& problem,
                         nb::dict weights, nb::dict options, uintptr_t stream) const {
  // Canonical weights, all in host memory or all on one CUDA device (the C API copies those to
  // the host: moe_host_prepare_args.weights_memory).
  Placement at{kEitherMemory, -1};
  Keep keep;
  auto w = sized<moe_weights>();
  for (const auto& [key, value] : weights) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    if (value.is_none()) continue;
    w.*weight_field(name) = tensor_arg(value, "weights['" + name + "']", at, keep);
  }
  std::vector<std::string> option_text;
  for (const auto& [key, value] : options) {
    option_text.push_back(nb::cast<std::string>(nb::str(key)));
    option_text.push_back(option_value(option_text.back(), value));
  }
  std::vector<moe_option> opts;
  for (size_t i = 0; i < option_text.size(); i += 2)
    opts.push_back({c_text(option_text[i], "options (a key)"),
                    c_text(option_text[i + 1], "options['" + option_text[i] + "']")});

  auto a = sized<moe_host_prepare_args>();
  a.backend = c_text(backend, "backend");
  a.problem = &problem.c;
  a.weights = &w;
  a.options = opts.empty() ? nullptr : opts.data();
  a.num_options = int64_t(opts.size());
  a.stream = reinterpret_cast<void*>(stream);
  a.weights_memory = at.memory == MOE_MEMORY_CUDA_DEVICE ? MOE_MEMORY_CUDA_DEVICE : MOE_MEMORY_HOST;
  a.weights_device = at.memory == MOE_MEMORY_CUDA_DEVICE ? at.device_id : 0;
  moe_host_layer* handle = nullptr;
  {
    nb::gil_scoped_release unlocked;
    check(moe_host_layer_prepare(handle_, &a, &handle));
  }
  return new Layer(handle);
}

Layer* Registry::prepare_checkpoint(const std::optional<std::string>& path,
                                    const std::optional<std::string>& text,
                                    const std::optional<std::string>& backend,
                                    uintptr_t stream) const {
  const std::unique_ptr<Selection> selection(select(path, text, false));
  auto a = sized<moe_host_checkpoint_args>();
  a.selection = selection->handle();
  a.backend = c_text(backend, "backend");
  a.stream = reinterpret_cast<void*>(stream);
  moe_host_layer* handle = nullptr;
  {
    nb::gil_scoped_release unlocked;
    check(moe_host_layer_prepare_checkpoint(handle_, &a, &handle));
  }
  return new Layer(handle);
}

nb::dict Registry::conformance(const std::string& plugin_path,
                               const std::optional<std::string>& problems,
                               const std::optional<std::string>& report, uint64_t seed,
                               bool gpu_sized) const {
  auto a = sized<moe_host_conformance_args>();
  a.plugin_path = c_text(plugin_path, "plugin");
  a.problems_dir = c_text(problems, "problems");
  a.report_path = c_text(report, "report");
  a.seed = seed;
  a.gpu_sized = gpu_sized;
  auto s = sized<moe_host_conformance_summary>();
  {
    nb::gil_scoped_release unlocked;
    check(moe_host_conformance(handle_, &a, &s));
  }
  nb::dict d;
  d["passed"] = s.pass;
  d["failed"] = s.fail;
  d["errors"] = s.error;
  d["skipped"] = s.skip;
  d["empty"] = s.empty;
  d["self_checked"] = s.self;
  d["seed"] = s.seed;
  return d;
}

Selection::Selection(moe_host_selection* handle) : handle_(handle) {}

Selection::~Selection() {
  moe_host_selection_destroy(handle_);
}

moe_host_selection_info Selection::info() const {
  auto i = sized<moe_host_selection_info>();
  check(moe_host_selection_info_get(handle_, &i));
  return i;
}

nb::dict Selection::options() const {
  const auto i = info();
  nb::dict d;
  for (int64_t k = 0; k < i.num_options; ++k) d[i.options[k].key] = i.options[k].value;
  return d;
}

}  // namespace moe::py
