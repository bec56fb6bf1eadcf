// What the host C API's opaque handles hold, and the guard every moe_host_* function runs its
// body in: the SDK's ABI guard (moe/sdk/guard.hpp: status + thread-local message), so no
// exception crosses into the host program.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device/run_memory.hpp"
#include "loading/entry_guard.hpp"
#include "moe/config.hpp"
#include "moe/host/moe_host.h"
#include "moe/plugin.hpp"
#include "moe/registry.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/extensions.hpp"
#include "moe/sdk/guard.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/selection.hpp"

// Strings a registry hands out in moe_host_plugin_info, kept beside its plugins.
struct moe_host_plugin_strings {
  std::string path;
  std::vector<std::string> aliases, formats, activations, routings;
  std::vector<const char*> alias_ptrs, format_ptrs, activation_ptrs, routing_ptrs;
};

struct moe_host_registry {
  moe::Registry registry;
  std::vector<moe_host_plugin_strings> strings;  // [plugins], in registry.plugins() order
};

struct moe_host_selection {
  moe::Config config;
  moe::Selection selection;
  std::string backend, explanation;
  moe_problem problem{};  // config.problem.c(): its ep_map points into config
  std::vector<moe_option> options;
};

struct moe_host_layer {
  moe_host_layer(moe::Problem p, moe::Layer l) : problem(std::move(p)), layer(std::move(l)) {}

  moe::Problem problem;
  moe_problem problem_c{};  // problem.c()
  moe::Layer layer;
  std::shared_ptr<const moe::Plugin> router;  // null: none routes the problem in this memory
  std::string router_name, no_router_reason;
  // From a checkpoint (moe_host_layer_prepare_checkpoint): its router, for the caller's GEMM.
  moe::HostTensor router_weight, router_bias, routing_bias;
  int64_t real_experts = 0;
  std::string router_dtype, weights_from = "weights";
  // An expert-parallel problem's weight-1 shared expert, split off at prepare (moe/ep.hpp,
  // split_shared_expert): `layer` then holds the routed experts (problem `routed_problem`) and
  // `shared` the shared expert (`shared_problem`); moe_host_ep_step runs both, each token's shared
  // part once at home, and moe_host_layer_run refuses the layer. `problem` stays the caller's.
  std::optional<moe::Layer> shared;
  moe::Problem routed_problem, shared_problem;
  // Where the tensors of moe_host_layer_run and moe_host_layer_route must live (the plugin's
  // memory, on the device current at prepare), checked before the plugin reads them.
  moe::device::RunMemory run_memory;
};

namespace moe::capi {

// Runs `fn`; returns OK, or the status of what it threw with the message kept for
// moe_host_last_error (something not derived from std::exception is INTERNAL, described).
template <class Fn>
moe_status guarded(Fn&& fn) noexcept {
  return sdk::guarded([&] {
    try {
      fn();
    } catch (const std::exception&) {
      throw;
    } catch (...) {
      throw Error(MOE_STATUS_INTERNAL, "the core threw " + detail::describe_current_exception());
    }
  });
}

// `ptr`, or INVALID_ARGUMENT "<name> is NULL".
template <class T>
T& deref(T* ptr, const char* name) {
  MOE_CHECK(ptr != nullptr, MOE_STATUS_INVALID_ARGUMENT, "{} is NULL", name);
  return *ptr;
}

// The C API's text out-parameter: *needed = the text's size with its NUL; up to cap - 1 bytes
// and a NUL into buf (cap == 0: only the size is asked, buf may be NULL).
inline void write_text(const std::string& text, char* buf, size_t cap, size_t* needed) {
  MOE_CHECK(cap == 0 || buf != nullptr, MOE_STATUS_INVALID_ARGUMENT, "buf is NULL with cap={}",
            cap);
  deref(needed, "needed") = text.size() + 1;
  if (cap == 0) return;
  const size_t n = std::min(text.size(), cap - 1);
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

// A caller's input struct, checked (NULL, struct_size, its extension chain as the plugin ABI
// checks one) and read over `defaults`.
template <class T>
T read_args(const T* args, size_t min_size, const char* name, T defaults = {}) {
  sdk::check_struct(args, min_size, name);
  T out = sdk::read_struct(args, defaults);
  if constexpr (requires { out.ext; })
    sdk::check_extension_chain(out.ext, fmt::format("{}.ext", name).c_str());
  return out;
}

// Writes `value` into a caller's output struct (checked) where it fits.
template <class T>
void write_out(T* out, size_t min_size, const char* name, const T& value) {
  sdk::check_struct(out, min_size, name);
  sdk::write_struct(out, value);
}

// Where a caller's weights live (moe_host_prepare_args.weights_memory, weights_device).
struct WeightsPlace {
  moe_memory memory = MOE_MEMORY_HOST;
  int32_t device = 0;  // CUDA ordinal, for device memory
};

// Prepares `weights` with the backend `config` selects for its problem (layer.cpp): the layer
// handle both prepare entry points return. Device weights are copied to the host first.
std::unique_ptr<moe_host_layer> prepare_layer(const moe_host_registry& registry,
                                              const Config& config, const moe_weights& weights,
                                              const Options& options, void* stream,
                                              WeightsPlace place = {});

// A caller's problem: checked, its EP map made when it has none, normalised and validated.
Problem read_problem(const moe_problem* problem, const char* name);

// NULL-terminated strings of a caller's array, each checked.
std::vector<std::string> read_strings(const char* const* items, int32_t count, const char* name);
// read_strings of file system paths: an empty one is refused, naming its index.
std::vector<std::string> read_paths(const char* const* items, int32_t count, const char* name);
// A caller's backend name: NULL is `unset` (auto, or the selection's choice); an empty string is
// refused, naming the field, since it is more often an unset variable than a wish for auto.
std::string read_backend(const char* backend, const std::string& unset, const char* name);

// The directories and files beside this library (locations.cpp): "" where there is none, or
// where the environment (MOE_CORE_PLUGIN_DIR, MOE_PLUGIN_SCANNER) already says.
std::string default_core_plugin_dir();
std::string default_scanner();
std::string default_problem_dir();  // throws NOT_FOUND saying where it looked

}  // namespace moe::capi
