// A backend in C++: the plugin declares a class, the SDK builds the C function table and every
// guard around it (docs/design.md §11). A plugin's plugin.cpp is its declaration (in an anonymous
// namespace, so two plugins' classes never meet) plus
//
//   MOE_EXPORT_BACKEND(MyBackend)
//
// The class (every member const; one object lives from init() to shutdown()):
//
//   struct MyBackend {
//     using Layer = MyLayer;                                  // what prepare() makes
//     static moe::sdk::BackendInfo info();                    // name, capability lists, ...
//     moe::sdk::Verdict supports(const moe_problem& p) const; // beyond the declared lists
//     std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const;
//     void run(Layer& layer, const moe_run_args& args) const;
//     // optional:
//     size_t workspace_size(const Layer& layer, int64_t tokens) const;   // default 0
//     void route(const moe_problem& p, const moe_route_args& args, int64_t tokens) const;
//     size_t route_workspace_size(const moe_problem& p, int64_t tokens) const;  // default 0
//     moe::sdk::Verdict can_route(const moe_problem& p) const;  // kernel limits; default yes
//     std::string describe_layout(const moe_problem& p) const;
//     void benchmark(const moe_bench_args& args, const moe::sdk::RunFn& run) const;
//     using Memory = MyMemory;  // device memory; default host memory. A struct of statics:
//       static constexpr moe_memory kind;  void* alloc(size_t);  void free(void*);
//       void copy(void* dst, const void* src, size_t, int32_t moe_memcpy_kind, void* stream);
//       void sync(void* stream);  const char* runtime_version();   (in-tree: moe::gpu::CudaMemory)
//       optional: int32_t current_device();  the calling thread's device: recorded at prepare,
//       and a run with another device current is refused (the layer's memory lives there)
//   };
//
// What the SDK checks before the class sees a call: struct sizes and extension chains, the
// problem (normalised, validated; enum values this build does not know are refused), the
// declared formats / activations / routing methods, supports() before prepare(), the weights
// against the problem, the options array, and that a layer handed back was made by this plugin.
// Exceptions become statuses (moe::Refusal: UNSUPPORTED, or a "no" from supports()).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/error.hpp"
#include "moe/sdk/extensions.hpp"
#include "moe/sdk/guard.hpp"
#include "moe/sdk/host_log.hpp"
#include "moe/sdk/options.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/verdict.hpp"
#include "moe/sdk/version.hpp"
#include "moe/sdk/weights.hpp"

// The SDK's definition of the ABI's opaque layer: the base of every layer an SDK plugin makes.
struct moe_layer {
  virtual ~moe_layer() = default;
  const moe_plugin_api* owner = nullptr;  // the table of the plugin that made it
};

namespace moe::sdk {

struct BackendInfo {
  const char* name = nullptr;  // unique, [a-z0-9_]+
  const char* version = "";
  const char* description = "";
  std::vector<const char*> aliases;  // other names it answers to (vLLM moe_backend spellings)
  int32_t priority = 0;              // higher wins under `backend: auto`
  // A decode rule (ABI 1.3): a problem whose max_tokens is <= decode_max_tokens ranks the backend
  // by decode_priority instead (a kernel that wins only on small batches). 0: no rule.
  int32_t decode_priority = 0;
  int64_t decode_max_tokens = 0;
  // The rule's limit in some formats instead of decode_max_tokens (ABI 1.5): {format, limit}, the
  // limit > 0, or -1 for no decode rule in that format (a kernel that wins up to larger batches on
  // 4-bit weights than on bf16 ones, or not at all on fp8_block).
  std::vector<std::pair<moe_format, int64_t>> decode_max_tokens_by_format = {};
  // run() honours moe_run_args.accumulate (ABI 1.4; read it with sdk::run_accumulates): the output
  // gains the layer's result instead of being overwritten. Without it the SDK refuses such runs.
  bool accumulates = false;
  // What it may support, as explicit lists: a value added to the ABI later is never claimed.
  std::vector<moe_format> formats;
  std::vector<moe_activation> activations;
  std::vector<moe_routing> routings;  // methods its route() implements; empty: it does not route
  const char* targets = "host";       // build info: what its kernels were compiled for
};

// What prepare() receives: everything already checked.
struct PrepareRequest {
  const moe_problem& problem;  // normalised, validated, and supported (supports() said yes)
  const moe_weights& weights;  // host memory, borrowed for the call; checked against the problem
  const Options& options;      // the YAML `options:` map
  void* stream;                // cudaStream_t for uploads, NULL = default
};

using RunFn = std::function<void(const moe_run_args&)>;

}  // namespace moe::sdk

// The table builder reads the declarations above.
#include "moe/sdk/backend_table.hpp"  // IWYU pragma: export

namespace moe::sdk {

// The function table of backend B, built once (static storage duration). Never throws: a table
// that cannot be built is replaced by one whose init() fails with the reason.
template <class B>
const moe_plugin_api* plugin_api() noexcept {
  try {
    return detail::table<B>();
  } catch (const std::exception& e) {
    set_last_error(e.what());
  } catch (...) {
    set_last_error("building the function table threw");
  }
  return detail::broken_table();
}

}  // namespace moe::sdk

// The plugin's one exported symbol, returning backend `Backend`'s table.
#define MOE_EXPORT_BACKEND(Backend)                                             \
  extern "C" MOE_PLUGIN_EXPORT const moe_plugin_api* moe_plugin_get_api(void) { \
    return ::moe::sdk::plugin_api<Backend>();                                   \
  }
