#include "moe/plugin.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "loading/bench_runs.hpp"
#include "loading/entry_guard.hpp"
#include "loading/table_leases.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"

namespace moe {

// Every call through the table below goes through detail::guarded (entry_guard.hpp): a raw plugin
// may throw anything out of an entry, and that must become a moe::Error naming it, not terminate().
using detail::guarded;

Plugin::Plugin(std::filesystem::path path, const moe_plugin_api* api, PluginInfo info)
    : path_(std::move(path)), api_(nullptr), info_(std::move(info)) {
  info_.abi_major = api->abi_major;
  info_.abi_minor = api->abi_minor;
  detail::acquire_table(api, path_.string());  // released by ~Plugin
  api_.store(api, std::memory_order_release);
}

Plugin::Plugin(std::filesystem::path path, PluginInfo info,
               std::shared_ptr<const detail::DeferredLoad> deferred)
    : path_(std::move(path)),
      api_(nullptr),
      info_(std::move(info)),
      deferred_(std::move(deferred)) {}

Plugin::~Plugin() {
  if (const moe_plugin_api* api = api_.load(std::memory_order_acquire))
    detail::release_table(api, info_.name);
}

bool Plugin::answers_to(std::string_view name) const {
  if (name == info_.name) return true;
  for (const auto& a : info_.aliases)
    if (name == a) return true;
  return false;
}

void Plugin::check(moe_status status, std::string_view what) const {
  if (status == MOE_STATUS_OK) return;
  throw Error(status, fmt::format("plugin '{}' {}: {} ({})", info_.name, what,
                                  detail::last_error_of(info_.name, table().last_error),
                                  status_name(status)));
}

void Plugin::log_failure(moe_status status, std::string_view what) const noexcept {
  try {
    const moe_plugin_api* api = api_.load(std::memory_order_acquire);
    spdlog::warn("plugin '{}' {}: {} ({})", info_.name, what,
                 api ? detail::last_error_of(info_.name, api->last_error) : "not loaded",
                 status_name(status));
  } catch (...) {  // called where nothing may throw
  }
}

Support Plugin::supports(const moe_problem& problem) const {
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  answer.routes = -1;  // a plugin older than ABI 1.2 leaves it
  const moe_plugin_api& api = table();
  check(guarded(info_.name, "supports", [&] { return api.supports(&problem, &answer); }),
        "supports");
  answer.message[MOE_SUPPORT_MESSAGE_CAP - 1] = '\0';
  return {answer.supported != 0, static_cast<moe_reason>(answer.reason), answer.message,
          answer.routes};
}

Layer Plugin::prepare(const moe_problem& problem, const moe_weights& weights,
                      const Options& options, void* stream) const {
  std::vector<moe_option> opts;
  for (const auto& [k, v] : options) opts.push_back({k.c_str(), v.c_str()});
  moe_prepare_args args{};
  args.struct_size = sizeof(args);
  args.problem = &problem;
  args.weights = &weights;
  args.options = opts.data();
  args.num_options = static_cast<int64_t>(opts.size());
  args.stream = stream;
  moe_layer* layer = nullptr;
  const moe_plugin_api& api = table();
  check(guarded(info_.name, "prepare", [&] { return api.prepare(&args, &layer); }), "prepare");
  MOE_CHECK(layer != nullptr, MOE_STATUS_INTERNAL, "plugin '{}' prepare returned no layer",
            info_.name);
  return Layer(shared_from_this(), layer);
}

bool Plugin::can_route(const moe_problem& problem) const {
  const moe_plugin_api& api = table();
  if (api.route == nullptr || api.route_workspace_size == nullptr) return false;
  const Support s = supports(problem);
  if (s.routes >= 0) return s.routes == 1;
  return problem.routing >= 0 && problem.routing < 32 &&
         (info_.routing_mask >> problem.routing & 1u);
}

size_t Plugin::route_workspace_size(const moe_problem& problem, int64_t tokens) const {
  size_t bytes = 0;
  const moe_plugin_api& api = table();
  check(guarded(info_.name, "route_workspace_size",
                [&] { return api.route_workspace_size(&problem, tokens, &bytes); }),
        "route_workspace_size");
  return bytes;
}

void Plugin::route(moe_route_args args) const {
  const moe_plugin_api& api = table();
  MOE_CHECK(api.route != nullptr, MOE_STATUS_UNSUPPORTED, "plugin '{}' does not route", info_.name);
  args.struct_size = sizeof(args);
  check(guarded(info_.name, "route", [&] { return api.route(&args); }), "route");
}

std::optional<std::string> Plugin::describe_layout(const moe_problem& problem) const {
  const moe_plugin_api& api = table();
  if (api.describe_layout == nullptr) return std::nullopt;
  size_t needed = 0;
  check(guarded(info_.name, "describe_layout",
                [&] { return api.describe_layout(&problem, nullptr, 0, &needed); }),
        "describe_layout");
  std::string text(needed, '\0');
  check(guarded(info_.name, "describe_layout",
                [&] { return api.describe_layout(&problem, text.data(), text.size(), &needed); }),
        "describe_layout");
  text.resize(std::strlen(text.c_str()));
  return text;
}

std::string Plugin::layout_section(const moe_problem& problem, bool supported) const {
  try {
    const auto layout = describe_layout(problem);
    return layout ? "  layout:\n" + *layout + "\n" : std::string();
  } catch (const Error& e) {
    if (supported) throw;
    return fmt::format("  layout:      none ({})\n", e.what());
  }
}

bool Plugin::has_device_timing() const {
  const moe_plugin_api* api = &table();
  return MOE_STRUCT_HAS(api, moe_plugin_api, benchmark) && api->benchmark != nullptr;
}

std::vector<double> Plugin::benchmark(const std::vector<moe_run_args>& runs, int warmup,
                                      int iterations, bool graph) const {
  MOE_CHECK(!runs.empty() && iterations > 0, MOE_STATUS_INVALID_ARGUMENT,
            "benchmark needs run sets and iterations > 0");
  for (const moe_run_args& run : runs) check_run_features(run);
  std::vector<double> times(size_t(iterations), 0.0);
  const moe_plugin_api& api = table();
  if (has_device_timing()) {
    const std::vector<unsigned char> packed = detail::pack_bench_runs(runs, info_.abi_minor);
    moe_bench_args args{};
    args.struct_size = sizeof(args);
    args.runs = reinterpret_cast<const moe_run_args*>(packed.data());
    args.num_runs = static_cast<int32_t>(runs.size());
    args.warmup = warmup;
    args.iterations = iterations;
    args.use_graph = graph ? 1 : 0;
    args.times_ms = times.data();
    check(guarded(info_.name, "benchmark", [&] { return api.benchmark(&args); }), "benchmark");
    return times;
  }
  auto once = [&](size_t i) {
    moe_run_args a = runs[i % runs.size()];
    a.struct_size = sizeof(a);
    check(guarded(info_.name, "run", [&] { return api.run(&a); }), "run");
    sync(a.stream);
  };
  for (int i = 0; i < warmup; ++i) once(size_t(i));
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    once(size_t(warmup + i));
    times[size_t(i)] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return times;
}

void Plugin::check_run_features(moe_run_args args) const {
  args.struct_size = sizeof(args);  // as the plugin will get it: every field read
  // An older plugin never reads `accumulate`: it would overwrite the output, silently wrong.
  MOE_CHECK(!sdk::run_accumulates(args) || info_.accumulates(), MOE_STATUS_UNSUPPORTED,
            "plugin '{}' (ABI {}.{}) does not declare MOE_RUN_FEATURE_ACCUMULATE: it cannot add "
            "a layer's result into the output",
            info_.name, info_.abi_major, info_.abi_minor);
  // Nor router_logits: it would run from whatever topk_ids and topk_weights hold.
  MOE_CHECK(!sdk::run_routes(args) || info_.routes_in_run(), MOE_STATUS_UNSUPPORTED,
            "plugin '{}' (ABI {}.{}) does not declare MOE_RUN_FEATURE_ROUTES: it cannot route in "
            "run(); route() first, then run from topk_ids and topk_weights",
            info_.name, info_.abi_major, info_.abi_minor);
  sdk::check_routing_fields_of_run(args);
}

double Plugin::host_us_per_call(const std::vector<moe_run_args>& runs, int calls) const {
  MOE_CHECK(!runs.empty() && calls > 0, MOE_STATUS_INVALID_ARGUMENT,
            "host_us_per_call needs run sets and calls > 0");
  const moe_plugin_api& api = table();
  for (const moe_run_args& run : runs) check_run_features(run);
  auto call = [&](size_t i) {
    moe_run_args a = runs[i % runs.size()];
    a.struct_size = sizeof(a);
    check(guarded(info_.name, "run", [&] { return api.run(&a); }), "run");
  };
  auto sync_all = [&] {
    for (const moe_run_args& a : runs) sync(a.stream);
  };
  call(0);  // the first call may validate or allocate what later ones reuse
  sync_all();
  // Each call timed alone on idle streams: back to back, a plugin that launches several kernels
  // per call fills the launch queue and the CPU then waits for the GPU inside the call (measured:
  // trtllm_style "took" 60-1650 us per call that way; bench/NOTES.md).
  std::vector<double> us(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call(size_t(i));
    us[size_t(i)] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    sync_all();
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void* Plugin::alloc(size_t bytes) const {
  if (!device_memory()) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    MOE_CHECK(p != nullptr, MOE_STATUS_OUT_OF_MEMORY, "cannot allocate {} host bytes", bytes);
    return p;
  }
  void* p = nullptr;
  const moe_plugin_api& api = table();
  check(guarded(info_.name, "mem_alloc", [&] { return api.mem_alloc(bytes == 0 ? 1 : bytes, &p); }),
        "mem_alloc");
  return p;
}

void Plugin::free(void* ptr) const noexcept {
  if (ptr == nullptr) return;
  if (!device_memory()) {
    std::free(ptr);
    return;
  }
  // Memory of a device plugin came from its table, so the table is loaded.
  const moe_plugin_api* api = api_.load(std::memory_order_acquire);
  if (api == nullptr) return;
  const moe_status st = detail::guarded_noexcept(
      info_.name, "mem_free", [&] { return api->mem_free(ptr); }, MOE_STATUS_INTERNAL);
  if (st != MOE_STATUS_OK) log_failure(st, "mem_free");
}

void Plugin::copy(void* dst, const void* src, size_t bytes, moe_memcpy_kind kind) const {
  if (bytes == 0) return;
  if (!device_memory()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const moe_plugin_api& api = table();
  check(
      guarded(info_.name, "mem_copy", [&] { return api.mem_copy(dst, src, bytes, kind, nullptr); }),
      "mem_copy");
}

void Plugin::sync(void* stream) const {
  if (!device_memory()) return;
  const moe_plugin_api& api = table();
  check(guarded(info_.name, "stream_sync", [&] { return api.stream_sync(stream); }), "stream_sync");
}

Layer::Layer(std::shared_ptr<const Plugin> plugin, moe_layer* layer)
    : plugin_(plugin), layer_(layer, Deleter{plugin}) {}

Layer::~Layer() = default;

void Layer::Deleter::operator()(moe_layer* layer) const noexcept {
  if (layer == nullptr) return;
  const moe_status st = detail::guarded_noexcept(
      plugin->name(), "destroy_layer", [&] { return plugin->api().destroy_layer(layer); },
      MOE_STATUS_INTERNAL);
  if (st != MOE_STATUS_OK) plugin->log_failure(st, "destroy_layer");
}

size_t Layer::workspace_size(int64_t tokens) const {
  size_t bytes = 0;
  const Plugin& p = *plugin_;
  p.check(guarded(p.name(), "workspace_size",
                  [&] { return p.api().workspace_size(layer_.get(), tokens, &bytes); }),
          "workspace_size");
  return bytes;
}

void Layer::run(moe_run_args args) const {
  args.struct_size = sizeof(args);
  args.layer = layer_.get();
  const Plugin& p = *plugin_;
  p.check_run_features(args);
  p.check(guarded(p.name(), "run", [&] { return p.api().run(&args); }), "run");
}

Buffer::Buffer(std::shared_ptr<const Plugin> plugin, size_t bytes)
    : plugin_(std::move(plugin)), data_(plugin_->alloc(bytes)), bytes_(bytes) {}

Buffer::Buffer(Buffer&& o) noexcept
    : plugin_(std::move(o.plugin_)),
      data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (plugin_) plugin_->free(data_);
    plugin_ = std::move(o.plugin_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Buffer::~Buffer() {
  if (plugin_) plugin_->free(data_);
}

void Buffer::upload(const void* host, size_t bytes) const {
  MOE_CHECK(bytes <= bytes_, MOE_STATUS_INVALID_ARGUMENT,
            "upload of {} bytes into a {}-byte buffer", bytes, bytes_);
  plugin_->copy(data_, host, bytes, MOE_MEMCPY_HOST_TO_DEVICE);
}

void Buffer::download(void* host, size_t bytes) const {
  MOE_CHECK(bytes <= bytes_, MOE_STATUS_INVALID_ARGUMENT,
            "download of {} bytes from a {}-byte buffer", bytes, bytes_);
  plugin_->copy(host, data_, bytes, MOE_MEMCPY_DEVICE_TO_HOST);
}

}  // namespace moe
