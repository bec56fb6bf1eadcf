// How the SDK turns a backend class into a moe_plugin_api. Included by backend.hpp after the
// declarations it reads (BackendInfo, Verdict, PrepareRequest, RunFn), never on its own:
// capability masks from the declared lists, the one backend object between init() and
// shutdown(), the layer box with its owner, and one guarded entry per table slot. Plugin authors
// read backend.hpp; nothing here is theirs to call.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/error.hpp"
#include "moe/sdk/extensions.hpp"
#include "moe/sdk/guard.hpp"
#include "moe/sdk/host_log.hpp"
#include "moe/sdk/options.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/version.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::sdk {

// The lists as ABI masks (bit 1 << value); values past 31 cannot be expressed and are refused.
template <class E>
uint32_t mask_of(const std::vector<E>& values) {
  uint32_t mask = 0;
  for (const E v : values) {
    MOE_CHECK(int(v) >= 0 && int(v) < 32, MOE_STATUS_INTERNAL,
              "capability value {} does not fit a 32-bit mask", int(v));
    mask |= 1u << int(v);
  }
  return mask;
}

template <class E>
std::string names_of(const std::vector<E>& values, const char* (*name)(E)) {
  std::string out;
  for (const E v : values) out += (out.empty() ? "" : ", ") + std::string(name(v));
  return out;
}

template <class E>
bool listed(const std::vector<E>& values, int32_t v) {
  return std::find(values.begin(), values.end(), static_cast<E>(v)) != values.end();
}

namespace detail {

template <class B>
concept HasWorkspace = requires(const B& b, const typename B::Layer& l) {
  { b.workspace_size(l, int64_t{}) } -> std::convertible_to<size_t>;
};
template <class B>
concept Routes = requires(const B& b, const moe_problem& p, const moe_route_args& a) {
  b.route(p, a, int64_t{});
};
template <class B>
concept HasRouteWorkspace = requires(const B& b, const moe_problem& p) {
  { b.route_workspace_size(p, int64_t{}) } -> std::convertible_to<size_t>;
};
// A backend whose run() can route a batch inside its own launch (ABI 1.6 routing in the run
// call): routes_in_run(layer, args) says whether this run does; the SDK then checks the routing
// arguments as always but launches no route() of its own.
template <class B>
concept RoutesInRun = requires(const B& b, const typename B::Layer& l, const moe_run_args& a) {
  { b.routes_in_run(l, a) } -> std::convertible_to<bool>;
};
template <class B>
concept HasCanRoute = requires(const B& b, const moe_problem& p) {
  { b.can_route(p) } -> std::same_as<Verdict>;
};
template <class B>
concept Describes = requires(const B& b, const moe_problem& p) {
  { b.describe_layout(p) } -> std::convertible_to<std::string>;
};
template <class B>
concept Benchmarks = requires(const B& b, const moe_bench_args& a, const RunFn& run) {
  b.benchmark(a, run);
};
template <class B>
concept HasMemory = requires {
  typename B::Memory;
};

// Memory that lives on one of several devices, the caller's current one (CUDA): a layer runs
// only where it was prepared.
template <class B>
concept HasDevice = HasMemory<B> && requires {
  { B::Memory::current_device() } -> std::convertible_to<int32_t>;
};

template <class B>
const BackendInfo& static_info();

// The one backend object, made by init() and dropped by shutdown(). Never destroyed itself: the
// host may call shutdown() while the process exits.
template <class B>
struct Instance {
  struct State {
    std::mutex mutex;
    std::unique_ptr<B> owned;
    std::atomic<const B*> current{nullptr};
    // The layers made and not yet destroyed: a pointer handed back is looked up here before it
    // is read, so a foreign, destroyed or made-up layer is refused rather than dereferenced.
    std::mutex layers_mutex;
    std::unordered_set<const moe_layer*> layers;
  };
  static State& state() {
    static State* s = new State();
    return *s;
  }

  static const B& get() {
    const B* b = state().current.load(std::memory_order_acquire);
    MOE_CHECK(b != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "plugin '{}' is not initialised: init() was not called, or shutdown() was",
              static_info<B>().name);
    return *b;
  }
  static void make() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.owned != nullptr) return;
    s.owned = std::make_unique<B>();
    s.current.store(s.owned.get(), std::memory_order_release);
  }
  static void drop() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    s.current.store(nullptr, std::memory_order_release);
    s.owned.reset();
  }
};

// BackendInfo kept for the life of the process: moe_plugin_info points into it.
template <class B>
const BackendInfo& static_info() {
  static const BackendInfo info = B::info();
  return info;
}

template <class B>
struct LayerBox final : moe_layer {
  std::unique_ptr<typename B::Layer> impl;
  Problem problem;  // as prepared, its EP map owned: what a run that routes (ABI 1.6) routes for
  int32_t device = -1;  // HasDevice: the device current at prepare, where the layer's memory is
};

template <class B>
const moe_plugin_api* table();

template <class B>
void check_live(const moe_layer* layer) {
  MOE_CHECK(layer != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer is NULL");
  auto& s = Instance<B>::state();
  std::lock_guard lock(s.layers_mutex);
  MOE_CHECK(s.layers.count(layer) == 1, MOE_STATUS_INVALID_ARGUMENT,
            "the layer is not a live layer of plugin '{}' (destroyed, or another plugin's)",
            static_info<B>().name);
}

template <class B>
LayerBox<B>& box_of(moe_layer* layer) {
  check_live<B>(layer);
  return *static_cast<LayerBox<B>*>(layer);
}

template <class B>
typename B::Layer& layer_of(moe_layer* layer) {
  return *box_of<B>(layer).impl;
}

// Refuses what the declaration does not list, then asks the backend; throws moe::Refusal, or
// returns the backend's yes.
template <class B>
Verdict require_supported(const B& b, const moe_problem& p) {
  const BackendInfo& info = static_info<B>();
  const auto f = static_cast<moe_format>(p.format);
  const auto a = static_cast<moe_activation>(p.activation);
  if (!listed(info.formats, p.format))
    MOE_REFUSE(MOE_REASON_FORMAT, "{} takes only {} weights, not {}", info.name,
               names_of(info.formats, format_name), format_name(f));
  if (!listed(info.activations, p.activation))
    MOE_REFUSE(MOE_REASON_ACTIVATION, "{} takes only the activations {}, not {}", info.name,
               names_of(info.activations, activation_name), activation_name(a));
  Verdict v = b.supports(p);
  if (!v.ok()) throw Refusal(v.reason, v.message);
  return v;
}

// Whether route() takes `p`: a listed method within the backend's limits.
template <class B>
Verdict routes(const B& b, const moe_problem& p) {
  const BackendInfo& info = static_info<B>();
  if constexpr (!Routes<B>) {
    return Verdict::no(MOE_REASON_ROUTING, fmt::format("{} does not route", info.name));
  } else {
    if (!listed(info.routings, p.routing))
      return Verdict::no(MOE_REASON_ROUTING,
                         fmt::format("{} does not route {}", info.name,
                                     routing_name(static_cast<moe_routing>(p.routing))));
    if constexpr (HasCanRoute<B>) return b.can_route(p);
    return Verdict::yes();
  }
}

template <class B>
struct Entries {
  static moe_status init(const moe_host_api* host) {
    return guarded([&] {
      init_host(host, static_info<B>().name);
      Instance<B>::make();
    });
  }

  static const char* last_error() { return sdk::last_error(); }

  static moe_status get_info(moe_plugin_info* out) {
    return guarded([&] {
      check_struct(out, MOE_PLUGIN_INFO_MIN_SIZE, "moe_plugin_info");
      const BackendInfo& i = static_info<B>();
      MOE_CHECK(i.decode_max_tokens >= 0, MOE_STATUS_INTERNAL,
                "plugin '{}' declares decode_max_tokens={}: it must be >= 0 (0 = no decode rule)",
                i.name, i.decode_max_tokens);
      moe_plugin_info info{};
      info.struct_size = sizeof(info);
      info.name = i.name;
      info.version = i.version;
      info.description = i.description;
      info.aliases = i.aliases.empty() ? nullptr : i.aliases.data();
      info.num_aliases = static_cast<int32_t>(i.aliases.size());
      info.priority = i.priority;
      // 1.3 and 1.5: an older caller's shorter struct gets none (write_struct writes what fits).
      info.decode_priority = i.decode_priority;
      info.decode_max_tokens = i.decode_max_tokens;
      for (const auto& [format, limit] : i.decode_max_tokens_by_format) {  // 1.5
        MOE_CHECK(format >= 0 && format < MOE_DECODE_FORMATS, MOE_STATUS_INTERNAL,
                  "plugin '{}' declares a decode limit for format {}: formats are 0..{}", i.name,
                  int(format), MOE_DECODE_FORMATS - 1);
        MOE_CHECK(limit > 0 || limit == -1, MOE_STATUS_INTERNAL,
                  "plugin '{}' declares decode_max_tokens_by_format {}={}: it must be > 0, or -1 "
                  "for no decode rule in that format",
                  i.name, int(format), limit);
        MOE_CHECK(info.decode_max_tokens_by_format[format] == 0, MOE_STATUS_INTERNAL,
                  "plugin '{}' declares format {}'s decode limit twice", i.name, int(format));
        info.decode_max_tokens_by_format[format] = limit;
      }
      info.run_features = i.accumulates ? MOE_RUN_FEATURE_ACCUMULATE : 0u;  // 1.4
      if (Routes<B>) info.run_features |= MOE_RUN_FEATURE_ROUTES;           // 1.6
      if constexpr (HasMemory<B>)
        info.memory = B::Memory::kind;
      else
        info.memory = MOE_MEMORY_HOST;
      info.format_mask = mask_of(i.formats);
      info.activation_mask = mask_of(i.activations);
      info.routing_mask = Routes<B> ? mask_of(i.routings) : 0;
      write_struct(out, info);
    });
  }

  static moe_status supports(const moe_problem* problem, moe_support* answer) {
    return guarded([&] {
      check_struct(answer, MOE_SUPPORT_MIN_SIZE, "moe_support");
      moe_problem p;
      try {
        p = read_problem(problem);
      } catch (const Refusal& r) {  // a value this build does not know
        answer_support(answer, r.reason(), r.what(), 0);
        return;
      }
      const B& b = Instance<B>::get();
      const int32_t route = routes(b, p).ok() ? 1 : 0;  // asked apart: routing needs no weights
      try {
        const Verdict yes = require_supported(b, p);
        answer_support(answer, MOE_REASON_NONE, yes.message, route);
      } catch (const Refusal& r) {
        answer_support(answer, r.reason(), r.what(), route);
      }
    });
  }

  static moe_status prepare(const moe_prepare_args* args, moe_layer** out) {
    return guarded([&] {
      check_struct(args, MOE_PREPARE_ARGS_MIN_SIZE, "moe_prepare_args");
      check_extension_chain(args->ext, "moe_prepare_args.ext");
      MOE_CHECK(out != nullptr, MOE_STATUS_INVALID_ARGUMENT, "layer (out) is NULL");
      MOE_CHECK(args->weights != nullptr, MOE_STATUS_INVALID_ARGUMENT, "weights is NULL");
      const moe_problem p = read_problem(args->problem);
      const B& b = Instance<B>::get();
      require_supported(b, p);
      check_extension_chain(args->weights->ext, "moe_weights.ext");
      check_weights(p, *args->weights);
      const Options options = read_options(args->options, args->num_options);
      auto box = std::make_unique<LayerBox<B>>();
      if constexpr (HasDevice<B>) box->device = B::Memory::current_device();
      box->impl = b.prepare(PrepareRequest{p, *args->weights, options, args->stream});
      box->problem = Problem(p);  // the caller's EP map and ext are borrowed for this call only
      box->problem.raw().ext = nullptr;
      MOE_CHECK(box->impl != nullptr, MOE_STATUS_INTERNAL, "{}: prepare made no layer",
                static_info<B>().name);
      box->owner = table<B>();
      auto& s = Instance<B>::state();
      std::lock_guard lock(s.layers_mutex);
      s.layers.insert(box.get());
      *out = box.release();
    });
  }

  static moe_status destroy_layer(moe_layer* layer) {
    return guarded([&] {
      if (layer == nullptr) return;
      auto& s = Instance<B>::state();
      {
        std::lock_guard lock(s.layers_mutex);
        MOE_CHECK(s.layers.erase(layer) == 1, MOE_STATUS_INVALID_ARGUMENT,
                  "the layer is not a live layer of plugin '{}' (destroyed, or another plugin's)",
                  static_info<B>().name);
      }
      delete static_cast<LayerBox<B>*>(layer);
    });
  }

  static moe_status workspace_size(const moe_layer* layer, int64_t tokens, size_t* bytes) {
    return guarded([&] {
      MOE_CHECK(bytes != nullptr, MOE_STATUS_INVALID_ARGUMENT, "bytes must not be NULL");
      MOE_CHECK(tokens >= 0, MOE_STATUS_INVALID_ARGUMENT, "tokens={} must be >= 0", tokens);
      const LayerBox<B>& box = box_of<B>(const_cast<moe_layer*>(layer));
      // A run of more is refused, so a size for it would only mislead (and a backend's formula
      // need not hold past the buffers it made at prepare).
      const int64_t max_tokens = box.problem.raw().max_tokens;
      MOE_CHECK(tokens <= max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
                "workspace_size: {} tokens exceed max_tokens={} of this layer (a run of them is "
                "refused); raise max_tokens in the problem",
                tokens, max_tokens);
      if constexpr (HasWorkspace<B>)
        *bytes = Instance<B>::get().workspace_size(*box.impl, tokens);
      else
        *bytes = 0;
      *bytes = std::max(*bytes, routing_workspace(box.problem.c(), tokens));
    });
  }

  // Workspace bytes a run that routes needs for the routing (ABI 1.6: the run's workspace serves
  // both, the routing first): 0 where the backend does not route `p`.
  static size_t routing_workspace(const moe_problem& p, int64_t tokens) {
    if constexpr (Routes<B> && HasRouteWorkspace<B>) {
      const B& b = Instance<B>::get();
      if (routes(b, p).ok()) return b.route_workspace_size(p, tokens);
    }
    return 0;
  }

  // A run that routes (ABI 1.6): routes into the run's topk tensors as route() would, on the
  // run's stream and workspace, before the layer runs from them; or leaves that to the layer's
  // run where the backend routes inside its own launch (RoutesInRun).
  static void route_in_run(const typename B::Layer& layer, const moe_run_args& args,
                           const moe_problem& p) {
    const B& b = Instance<B>::get();
    const char* name = static_info<B>().name;
    const Verdict v = routes(b, p);
    MOE_CHECK(v.ok(), MOE_STATUS_UNSUPPORTED,
              "plugin '{}' cannot route in run() (router_logits given): {}", name, v.message);
    const moe_tensor& logits = args.router_logits;
    MOE_CHECK(logits.ndim != 2 || args.hidden.ndim != 2 || logits.shape[0] == args.hidden.shape[0],
              MOE_STATUS_INVALID_ARGUMENT,
              "router_logits has {} rows but hidden {}: one row of logits per token",
              logits.shape[0], args.hidden.shape[0]);
    const moe_route_args r = route_args_of_run(args, p);
    const int64_t tokens = check_route_tensors(p, r);
    // The run's own tensors too, before the routing writes its outputs: a run refused for its
    // hidden states or output leaves topk_ids and topk_weights as they were (the backend's run
    // checks them again, with its output dtypes and its workspace).
    check_run_tensors(p, args, 0, /*wide_output_ok=*/true);
    size_t need = 0;  // the verdict above is routing_workspace's
    if constexpr (HasRouteWorkspace<B>) need = b.route_workspace_size(p, tokens);
    MOE_CHECK(need == 0 || (args.workspace != nullptr && args.workspace_size >= need),
              MOE_STATUS_CAPACITY_EXCEEDED,
              "workspace of {} bytes is smaller than the {} bytes routing {} tokens needs",
              args.workspace_size, need, tokens);
    if constexpr (RoutesInRun<B>)
      if (b.routes_in_run(layer, args)) return;
    if constexpr (Routes<B>) b.route(p, r, tokens);
  }

  // A layer's weights and kernels' state live on the device current at prepare: a run launched
  // with another device current would read them from the wrong device (an illegal address, or a
  // generic launch error sticky for that context). Refused, naming both devices.
  static void check_device(const LayerBox<B>& box) {
    const int32_t current = B::Memory::current_device();
    MOE_CHECK(current == box.device, MOE_STATUS_INVALID_ARGUMENT,
              "plugin '{}' prepared this layer on device {}, but device {} is current: make "
              "device {} current (cudaSetDevice, torch.cuda.set_device) for the layer's runs",
              static_info<B>().name, box.device, current, box.device);
  }

  static void run_checked(const moe_run_args& caller) {
    check_struct(&caller, MOE_RUN_ARGS_MIN_SIZE, "moe_run_args");
    // A caller built against an older header passes a shorter struct: the backend gets this
    // build's, the fields past the caller's bytes zero (no accumulate, no routing), so nothing it
    // reads or keeps of the run (a whole copy: ValidatedRuns) reaches past the caller's struct.
    const moe_run_args args = read_struct(&caller, moe_run_args{});
    check_extension_chain(args.ext, "moe_run_args.ext");
    check_routing_fields_of_run(args);
    LayerBox<B>& box = box_of<B>(args.layer);
    if constexpr (HasDevice<B>) check_device(box);
    MOE_CHECK(!run_accumulates(args) || static_info<B>().accumulates, MOE_STATUS_UNSUPPORTED,
              "plugin '{}' cannot add into the output (moe_run_args.accumulate=1): its "
              "run_features lack MOE_RUN_FEATURE_ACCUMULATE",
              static_info<B>().name);
    if (run_routes(args)) {
      const moe_problem p = box.problem.c();
      route_in_run(*box.impl, args, p);
    }
    Instance<B>::get().run(*box.impl, args);
  }

  static moe_status run(const moe_run_args* args) {
    return guarded([&] {
      MOE_CHECK(args != nullptr, MOE_STATUS_INVALID_ARGUMENT, "moe_run_args is NULL");
      run_checked(*args);
    });
  }

  static moe_status route_workspace_size(const moe_problem* problem, int64_t tokens,
                                         size_t* bytes) {
    return guarded([&] {
      const moe_problem p = read_problem(problem);
      MOE_CHECK(bytes != nullptr && tokens >= 0, MOE_STATUS_INVALID_ARGUMENT,
                "bytes must not be NULL and tokens={} >= 0", tokens);
      if constexpr (HasRouteWorkspace<B>)
        *bytes = Instance<B>::get().route_workspace_size(p, tokens);
      else
        *bytes = 0;
    });
  }

  static moe_status route(const moe_route_args* args) {
    return guarded([&] {
      check_struct(args, MOE_ROUTE_ARGS_MIN_SIZE, "moe_route_args");
      check_extension_chain(args->ext, "moe_route_args.ext");
      const moe_problem p = read_problem(args->problem);
      const B& b = Instance<B>::get();
      const Verdict v = routes(b, p);
      if (!v.ok()) throw Refusal(v.reason, v.message);
      const int64_t tokens = check_route_tensors(p, *args);
      if constexpr (Routes<B>) b.route(p, *args, tokens);
    });
  }

  static moe_status describe_layout(const moe_problem* problem, char* buf, size_t cap,
                                    size_t* needed) {
    return guarded([&] {
      MOE_CHECK(needed != nullptr, MOE_STATUS_INVALID_ARGUMENT, "needed must not be NULL");
      const std::string text = Instance<B>::get().describe_layout(read_problem(problem));
      *needed = text.size() + 1;
      if (buf != nullptr && cap > 0) {
        const size_t n = std::min(cap - 1, text.size());
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
      }
    });
  }

  static moe_status benchmark(const moe_bench_args* args) {
    return guarded([&] {
      check_struct(args, MOE_BENCH_ARGS_MIN_SIZE, "moe_bench_args");
      check_extension_chain(args->ext, "moe_bench_args.ext");
      // The backend sees the runs as this build's structs, whatever the caller's size.
      const std::vector<moe_run_args> runs = read_bench_runs(*args);
      moe_bench_args own = read_struct(args, moe_bench_args{});
      own.runs = runs.data();
      Instance<B>::get().benchmark(own, RunFn(run_checked));
    });
  }

  static moe_status mem_alloc(size_t bytes, void** ptr) {
    return guarded([&] {
      MOE_CHECK(ptr != nullptr, MOE_STATUS_INVALID_ARGUMENT, "ptr must not be NULL");
      *ptr = B::Memory::alloc(bytes);
    });
  }
  static moe_status mem_free(void* ptr) {
    return guarded([&] { B::Memory::free(ptr); });
  }
  static moe_status mem_copy(void* dst, const void* src, size_t bytes, int32_t kind, void* stream) {
    return guarded([&] { B::Memory::copy(dst, src, bytes, kind, stream); });
  }
  static moe_status stream_sync(void* stream) {
    return guarded([&] { B::Memory::sync(stream); });
  }

  static moe_status shutdown(const moe_shutdown_args* args) {
    return guarded([&] {
      check_struct(args, MOE_SHUTDOWN_ARGS_MIN_SIZE, "moe_shutdown_args");
      check_extension_chain(args->ext, "moe_shutdown_args.ext");
      Instance<B>::drop();
    });
  }
};

template <class B>
const moe_build_info* build_info() {
  static const moe_build_info info = [] {
    moe_build_info b{};
    b.header = {sizeof(moe_build_info), MOE_EXT_BUILD_INFO, nullptr};
    b.sdk_version = kSdkVersion;
    b.compiler = kCompiler;
    if constexpr (HasMemory<B>)
      b.cuda_runtime = B::Memory::runtime_version();
    else
      b.cuda_runtime = "none";
    b.targets = static_info<B>().targets;
    return b;
  }();
  return &info;
}

// The table handed out when building the real one failed (out of memory in B::info(), say): it
// loads, and its init() reports why, so nothing throws through moe_plugin_get_api.
const moe_plugin_api* broken_table() noexcept;

template <class B>
const moe_plugin_api* table() {
  using E = Entries<B>;
  static const moe_plugin_api api = [] {
    moe_plugin_api t{};
    t.struct_size = sizeof(t);
    t.abi_major = MOE_ABI_VERSION_MAJOR;
    t.abi_minor = MOE_ABI_VERSION_MINOR;
    t.init = E::init;
    t.last_error = E::last_error;
    t.get_info = E::get_info;
    t.supports = E::supports;
    t.prepare = E::prepare;
    t.destroy_layer = E::destroy_layer;
    t.workspace_size = E::workspace_size;
    t.run = E::run;
    if constexpr (Routes<B>) {
      t.route_workspace_size = E::route_workspace_size;
      t.route = E::route;
    }
    if constexpr (Describes<B>) t.describe_layout = E::describe_layout;
    if constexpr (HasMemory<B>) {
      t.mem_alloc = E::mem_alloc;
      t.mem_free = E::mem_free;
      t.mem_copy = E::mem_copy;
      t.stream_sync = E::stream_sync;
    }
    if constexpr (Benchmarks<B>) t.benchmark = E::benchmark;
    t.ext = &build_info<B>()->header;
    t.shutdown = E::shutdown;
    return t;
  }();
  return &api;
}

}  // namespace detail

}  // namespace moe::sdk
