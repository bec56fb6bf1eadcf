// The thin RAII C++ API over one plugin: Plugin wraps the function table, Layer owns a prepared
// moe_layer. Every failing status, and any exception a plugin lets escape an entry, becomes a
// moe::Error whose message names the plugin (destructors log instead). A Plugin that discovery
// knows from the plugin scanner loads its library into this process only when its table is first
// needed (docs/design.md §2 rule 9).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/options.hpp"

namespace moe {
namespace detail {
struct DeferredLoad;  // loading/deferred_load.hpp
}

// moe_build_info (ABI 1.2), when the plugin's table carries it.
struct BuildInfo {
  std::string sdk_version, compiler, cuda_runtime, targets;
};

// moe_plugin_info's decode rule (ABI 1.3, by format 1.5; docs/design.md §2.4): under
// `backend: auto`, a problem whose max_tokens is at most the rule's limit for its weight format
// ranks the plugin by `priority` instead of its usual one.
struct DecodeRule {
  int32_t priority = 0;
  int64_t max_tokens = 0;  // 0: no rule (so for every plugin older than ABI 1.3)
  // decode_max_tokens_by_format (ABI 1.5): per moe_format, 0 = max_tokens, > 0 its own limit,
  // -1 = no rule in that format. All 0 for an older plugin.
  std::array<int64_t, MOE_DECODE_FORMATS> by_format{};

  // `format`'s own entry (0 for a format past the array: max_tokens holds there).
  int64_t own(int format) const {
    return format >= 0 && format < MOE_DECODE_FORMATS ? by_format[size_t(format)] : 0;
  }
  // The limit for a problem in `format` (0: no rule there).
  int64_t limit(int format) const {
    const int64_t o = own(format);
    return o == 0 ? max_tokens : o < 0 ? 0 : o;
  }
  bool declared() const {
    if (max_tokens > 0) return true;
    for (int64_t v : by_format)
      if (v > 0) return true;
    return false;
  }
  bool covers(int64_t problem_max_tokens, int format) const {
    const int64_t lim = limit(format);
    return lim > 0 && problem_max_tokens <= lim;
  }
};

struct PluginInfo {
  std::string name, version, description;
  uint32_t abi_major = 0, abi_minor = 0;  // the function table's (moe_plugin_api) ABI version
  std::vector<std::string> aliases;
  int32_t priority = 0;
  DecodeRule decode;
  moe_memory memory = MOE_MEMORY_HOST;
  uint32_t format_mask = 0, activation_mask = 0, routing_mask = 0;
  uint32_t run_features = 0;  // MOE_RUN_FEATURE_* (ABI 1.4; 0 for an older plugin)
  std::optional<BuildInfo> build;

  bool accumulates() const { return (run_features & MOE_RUN_FEATURE_ACCUMULATE) != 0; }
  // run() routes when given router logits (ABI 1.6), for the problems its route() takes.
  bool routes_in_run() const { return (run_features & MOE_RUN_FEATURE_ROUTES) != 0; }

  // What `backend: auto` ranks it by for a layer of this capacity in this weight format.
  int32_t priority_for(int64_t max_tokens, int format) const {
    return decode.covers(max_tokens, format) ? decode.priority : priority;
  }
};

struct Support {
  bool supported = false;
  moe_reason reason = MOE_REASON_OTHER;
  std::string message;
  int32_t routes = -1;  // moe_support.routes: 1 / 0, or -1 from a plugin older than ABI 1.2
};

class Plugin;

// A prepared layer. Keeps its plugin loaded; destroyed through the plugin's table.
class Layer {
 public:
  Layer(std::shared_ptr<const Plugin> plugin, moe_layer* layer);
  Layer(Layer&&) noexcept = default;
  Layer& operator=(Layer&&) noexcept = default;
  ~Layer();

  const Plugin& plugin() const { return *plugin_; }
  moe_layer* get() const { return layer_.get(); }
  size_t workspace_size(int64_t tokens) const;
  // Fills struct_size and layer; tensors live in the plugin's memory.
  void run(moe_run_args args) const;

 private:
  struct Deleter {
    std::shared_ptr<const Plugin> plugin;
    void operator()(moe_layer* layer) const noexcept;
  };
  std::shared_ptr<const Plugin> plugin_;
  std::unique_ptr<moe_layer, Deleter> layer_;
};

class Plugin : public std::enable_shared_from_this<Plugin> {
 public:
  // A loaded plugin, made by the loader (loader.cpp) once the table has passed its checks. Every
  // loaded Plugin holds a lease on its table: init() when the first is made, shutdown() when the
  // last goes.
  Plugin(std::filesystem::path path, const moe_plugin_api* api, PluginInfo info);
  // A plugin known from the plugin scanner's answer (`info`), not loaded yet (registry.cpp). Its
  // library is loaded into this process (dlopen, the table's checks, init) the first time its
  // table is needed: supports, prepare, route, benchmark, device memory, api(). Name, info and
  // path never load it.
  Plugin(std::filesystem::path path, PluginInfo info,
         std::shared_ptr<const detail::DeferredLoad> deferred);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const PluginInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  // Whether its library is loaded in this process (always, for one made by load_plugin).
  bool loaded() const { return api_.load(std::memory_order_acquire) != nullptr; }
  // Loads it unless it is: only the file the scanner read, and only if it answers to the same
  // names here. Throws moe::Error("plugin '<name>' cannot be loaded in this process: <why>");
  // every later use of its table throws the same, without trying again.
  void load() const;
  const moe_plugin_api& api() const { return table(); }  // loads it
  bool answers_to(std::string_view name) const;          // its name or one of its aliases
  bool device_memory() const { return info_.memory == MOE_MEMORY_CUDA_DEVICE; }

  Support supports(const moe_problem& problem) const;
  Layer prepare(const moe_problem& problem, const moe_weights& weights, const Options& options,
                void* stream = nullptr) const;

  // Whether route() takes this problem: the plugin's supports() answer (ABI 1.2), else its
  // routing_mask. False means: route with another plugin (the reference).
  bool can_route(const moe_problem& problem) const;
  size_t route_workspace_size(const moe_problem& problem, int64_t tokens) const;
  void route(moe_route_args args) const;  // fills struct_size
  std::optional<std::string> describe_layout(const moe_problem& problem) const;
  // `moe describe`'s layout section: "  layout:\n<text>\n", "" when the plugin describes none,
  // and for a problem it refuses (`supported` false) that it cannot plan a layout for, one line
  // "  layout:      none (<why>)" instead of the error (an error for a supported problem).
  std::string layout_section(const moe_problem& problem, bool supported) const;

  // Per-iteration times in ms of `iterations` runs after `warmup`, cycling through `runs`: with
  // device events when the plugin implements benchmark() (ABI 1.1), else run + sync on a host
  // clock. `graph`: ask the plugin to replay CUDA graphs.
  std::vector<double> benchmark(const std::vector<moe_run_args>& runs, int warmup, int iterations,
                                bool graph) const;
  bool has_device_timing() const;
  // Host microseconds of one run through the C ABI (validation, workspace carving, the
  // launches), the median of `calls` calls cycling through `runs`, each timed alone with the
  // streams idle (synced between calls, outside the time): what an engine pays on the CPU per
  // layer and step, without the waits of a full launch queue. Meaningful for plugins that launch
  // asynchronous device work; a host plugin computes inside run(), so its figure is its whole run.
  double host_us_per_call(const std::vector<moe_run_args>& runs, int calls) const;

  // Memory of the plugin's kind (host plugins: plain host memory).
  void* alloc(size_t bytes) const;
  void free(void* ptr) const noexcept;
  void copy(void* dst, const void* src, size_t bytes, moe_memcpy_kind kind) const;
  void sync(void* stream = nullptr) const;

  // Refuses a run this plugin would get wrong (before any call takes it: run, benchmark,
  // host_us_per_call): accumulate or router_logits where its run_features lack them (an older
  // plugin never reads those fields), routing_bias or is_padding without router_logits.
  // `args` as this build's struct (its struct_size set here, as every caller sets it before the
  // plugin sees it).
  void check_run_features(moe_run_args args) const;

  // Throws moe::Error("plugin '<name>' <what>: <last_error>") unless status is OK.
  void check(moe_status status, std::string_view what) const;
  // The same message as a warning, for paths that must not throw (destructors, free).
  void log_failure(moe_status status, std::string_view what) const noexcept;

 private:
  const moe_plugin_api& table() const;  // loads it

  std::filesystem::path path_;
  mutable std::atomic<const moe_plugin_api*> api_;  // null until loaded
  PluginInfo info_;
  std::shared_ptr<const detail::DeferredLoad> deferred_;  // null: loaded when made
  mutable std::mutex load_mutex_;
  mutable std::optional<std::pair<moe_status, std::string>> load_failure_;
};

// A buffer in a plugin's memory (device for CUDA plugins), freed through that plugin.
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::shared_ptr<const Plugin> plugin, size_t bytes);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  void upload(const void* host, size_t bytes) const;
  void download(void* host, size_t bytes) const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace moe
