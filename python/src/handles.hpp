// The host C API's handles as C++ objects the module binds (one owner each, freed once), and the
// problem as a value. Each call checks its Python arguments (tensors.hpp) before it reaches the
// C API, and releases the GIL while the core and the plugin work.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "moe/host/moe_host.h"
#include "tensors.hpp"

namespace moe::py {

namespace nb = nanobind;

// A moe_problem by value; its ep_map is NULL (the core makes it from the placement fields).
struct Problem {
  moe_problem c{};
  static Problem parse(const std::string& text);  // a config's `problem:` mapping, YAML or JSON
  static Problem copy(const moe_problem& p);
  std::string to_json() const;  // every key of a config's `problem:`
};

class Selection {
 public:
  explicit Selection(moe_host_selection* handle);
  ~Selection();
  Selection(const Selection&) = delete;
  Selection& operator=(const Selection&) = delete;

  moe_host_selection_info info() const;
  nb::dict options() const;
  const moe_host_selection* handle() const { return handle_; }

 private:
  moe_host_selection* handle_;
};

// Workspace bytes from the layer's own memory, grown when a batch needs more.
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

class Layer {
 public:
  explicit Layer(moe_host_layer* handle);
  ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const moe_host_layer_info& info() const { return info_; }
  const moe_host_layer* handle() const { return handle_; }
  size_t workspace_size(int64_t tokens) const;
  size_t route_workspace_size(int64_t tokens) const;
  // Tensors in the layer's memory; outputs written in place. `stream`: a cudaStream_t, 0 = default.
  // `workspace`: None = the layer's own (allocated and grown here), else a caller's 1-D u8 array
  // of at least the workspace size in the layer's memory, so that the call allocates nothing
  // (torch's caching allocator, CUDA graph capture).
  void route(nb::handle logits, nb::handle topk_ids, nb::handle topk_weights, nb::handle bias,
             nb::handle is_padding, nb::handle workspace, uintptr_t stream, bool stream_is_current);
  // With router_logits (not None; ABI 1.6) the plugin routes the batch itself in the same call,
  // into topk_ids and topk_weights (then outputs), with bias and is_padding as route() takes them
  // (read only with router_logits: Layer.run_routed passes them, Layer.run None).
  void run(nb::handle hidden, nb::handle topk_ids, nb::handle topk_weights, nb::handle output,
           nb::handle workspace, uintptr_t stream, nb::handle router_logits, nb::handle bias,
           nb::handle is_padding, bool stream_is_current);
  // A checkpoint's router (moe_host_layer_prepare_checkpoint), copied out of the layer's host
  // memory: {"router_weight": (bytes, "bf16", (rows, H)), ...}, only those the checkpoint has.
  nb::dict router_tensors() const;
  // The CUDA device the weights went to (the caller's current one at prepare); -1 = not known.
  int32_t device_id = -1;

 private:
  void* workspace(Workspace& ws, size_t bytes);
  // Sets a.workspace (the caller's `given`, checked, or the own one of a.stream, grown under the
  // lock) and calls `entry` without the GIL.
  template <class Args>
  void call(Args& a, nb::handle given, std::map<void*, Workspace>& own, Placement& where,
            Keep& keep, moe_status (*entry)(const moe_host_layer*, const Args*));

  moe_host_layer* handle_;
  moe_host_layer_info info_{};
  std::mutex mutex_;  // the workspaces: one call at a time
  // The own workspaces, one per stream the layer's calls ran on: calls queued on two streams never
  // share one (the layer's own state still wants one stream at a time: docs/design.md §10).
  std::map<void*, Workspace> run_ws_, route_ws_;
};

// Expert parallelism over a communicator the caller owns (moe_host_ep_group), or a single rank.
class EpGroup {
 public:
  // `nccl_comm`: the address of an initialised ncclComm_t, borrowed (never destroyed here); the
  // collective checks of moe_host_ep_group_create run against `layer`.
  EpGroup(uintptr_t nccl_comm, const Layer& layer, double timeout_s);
  EpGroup() = default;  // a single rank: no communicator, no NCCL
  ~EpGroup();
  EpGroup(const EpGroup&) = delete;
  EpGroup& operator=(const EpGroup&) = delete;

  int32_t rank() const;
  int32_t world() const;
  // One step for this rank's tokens; host arrays, `out` written in place.
  void step(const Layer& layer, nb::handle hidden, nb::handle topk_ids, nb::handle topk_weights,
            nb::handle out);
  // Destroys the group now (the communicator stays the caller's); later calls are errors, and so
  // is closing it while a device step made from it is open.
  void close();
  // For EpDeviceStep: the group's handle (null: a single rank), checked open.
  moe_host_ep_group* open_handle() const;

 private:
  friend class EpDeviceStep;
  moe_host_ep_group* handle_ = nullptr;  // null: a single rank, or closed
  bool closed_ = false;                  // set under the GIL first: no new call starts
  std::mutex mutex_;        // a step (the GIL released) and the destruction never overlap
  bool destroyed_ = false;  // under mutex_: a step that got past closed_ finds the group gone
  std::atomic<int> open_steps_{0};  // EpDeviceSteps that borrow the group (closed without the GIL)
};

// moe_host_ep_device_step over a group: the step that stays on the device, on tensors in the
// layer's memory and a stream. Borrows the group (the Python side keeps it alive) and the layer.
class EpDeviceStep {
 public:
  EpDeviceStep(EpGroup& group, const Layer& layer, int64_t max_tokens, bool ragged, int64_t chunks);
  ~EpDeviceStep();
  EpDeviceStep(const EpDeviceStep&) = delete;
  EpDeviceStep& operator=(const EpDeviceStep&) = delete;
  void run(nb::handle hidden, nb::handle topk_ids, nb::handle topk_weights, nb::handle out,
           uintptr_t stream, bool stream_is_current);
  void close();

 private:
  EpGroup* group_;
  std::mutex mutex_;                           // a run and a close never overlap
  moe_host_ep_device_step* handle_ = nullptr;  // null once closed
  const moe_problem problem_;
  Placement where_;
};

class Registry {
 public:
  Registry(const std::vector<std::string>& plugin_dirs,
           const std::vector<std::string>& plugin_files, bool use_env, bool use_default,
           const std::optional<std::string>& core_plugin_dir,
           const std::optional<std::string>& scanner);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  nb::list plugins() const;
  nb::list skipped() const;
  std::string describe(const std::string& name, const Problem* problem) const;
  nb::dict supports(const std::string& name, const Problem& problem) const;
  Selection* select(const std::optional<std::string>& path, const std::optional<std::string>& text,
                    bool ask_every) const;
  // backend None = auto (the C API's NULL).
  Layer* prepare(const std::optional<std::string>& backend, const Problem& problem,
                 nb::dict weights, nb::dict options, uintptr_t stream) const;
  // One layer of a config's `checkpoint:` (a path or the YAML text); backend None = the config's.
  Layer* prepare_checkpoint(const std::optional<std::string>& path,
                            const std::optional<std::string>& text,
                            const std::optional<std::string>& backend, uintptr_t stream) const;
  nb::dict conformance(const std::string& plugin_path, const std::optional<std::string>& problems,
                       const std::optional<std::string>& report, uint64_t seed,
                       bool gpu_sized) const;

 private:
  moe_host_registry* handle_ = nullptr;
};

}  // namespace moe::py
