// Layer over moe_host_layer: route and run with the tensors checked against the layer's problem
// and memory first, and workspaces taken from the layer's own memory (moe_host_layer_alloc), kept
// and grown with the batch.
#include <cstring>

#include "handles.hpp"
#include "status.hpp"
#include "tensors.hpp"

namespace moe::py {
namespace {

int64_t tokens_of(const moe_tensor& t) {
  return t.ndim >= 1 ? t.shape[0] : 0;
}

// The caller's workspace array, checked: u8, 1-D, at least `bytes`, in `where`.
void* given_workspace(nb::handle given, size_t bytes, Placement& where, Keep& keep) {
  const moe_tensor t =
      tensor_arg(given, "workspace", MOE_DTYPE_U8, {kAnyDim}, where, keep, Access::kWrite);
  if (size_t(t.shape[0]) < bytes)
    fail(MOE_STATUS_INVALID_ARGUMENT, "workspace: {} bytes, the call needs {}", t.shape[0], bytes);
  return bytes == 0 ? nullptr : t.data;
}

}  // namespace

Layer::Layer(moe_host_layer* handle) : handle_(handle) {
  info_.struct_size = sizeof info_;
  const moe_status s = moe_host_layer_info_get(handle_, &info_);
  if (s != MOE_STATUS_OK) {  // the destructor will not run: the handle is this call's to free
    const std::string why = moe_host_last_error();
    moe_host_layer_destroy(handle_);
    throw StatusError(s, why);
  }
}

Layer::~Layer() {
  for (auto* per_stream : {&run_ws_, &route_ws_})
    for (auto& [stream, ws] : *per_stream)
      if (ws.ptr != nullptr) moe_host_layer_free(handle_, ws.ptr);
  moe_host_layer_destroy(handle_);
}

size_t Layer::workspace_size(int64_t tokens) const {
  size_t bytes = 0;
  check(moe_host_layer_workspace_size(handle_, tokens, &bytes));
  return bytes;
}

size_t Layer::route_workspace_size(int64_t tokens) const {
  size_t bytes = 0;
  check(moe_host_layer_route_workspace_size(handle_, tokens, &bytes));
  return bytes;
}

// NOTES: a larger workspace replaces the old one with moe_host_layer_free, which for CUDA memory
// waits for the device, so a run still in flight on the stream never loses its workspace.
void* Layer::workspace(Workspace& ws, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (ws.bytes < bytes) {
    if (ws.ptr != nullptr) check(moe_host_layer_free(handle_, ws.ptr));
    ws = Workspace{};
    check(moe_host_layer_alloc(handle_, bytes, &ws.ptr));
    ws.bytes = bytes;
  }
  return ws.ptr;
}

nb::dict Layer::router_tensors() const {
  nb::dict d;
  const std::pair<const char*, const moe_tensor*> fields[] = {
      {"router_weight", &info_.router_weight},
      {"router_bias", &info_.router_bias},
      {"routing_bias", &info_.routing_bias}};
  for (const auto& [name, t] : fields) {
    if (t->data == nullptr) continue;
    size_t count = 1;
    nb::list shape;
    for (int32_t i = 0; i < t->ndim; ++i) {
      count *= size_t(t->shape[i]);
      shape.append(t->shape[i]);
    }
    const size_t bytes = count * (t->dtype == MOE_DTYPE_BF16 ? 2 : 4);  // bf16 or f32 (moe_host.h)
    d[name] = nb::make_tuple(nb::bytes(static_cast<const char*>(t->data), bytes),
                             dtype_name(t->dtype), nb::tuple(shape));
  }
  return d;
}

template <class Args>
void Layer::call(Args& a, nb::handle given, std::map<void*, Workspace>& own, Placement& where,
                 Keep& keep, moe_status (*entry)(const moe_host_layer*, const Args*)) {
  if (!given.is_none()) a.workspace = given_workspace(given, a.workspace_size, where, keep);
  nb::gil_scoped_release unlocked;
  std::unique_lock lock(mutex_, std::defer_lock);  // only the layer's own workspace needs it
  if (given.is_none()) {
    lock.lock();
    a.workspace = workspace(own[a.stream], a.workspace_size);
  }
  check(entry(handle_, &a));
}

namespace {

// The routing's selection bias and padding flags (route(), and run() given router logits): the
// bias exactly when the problem has routing_bias.
void routing_extras(const moe_problem& p, int64_t tokens, nb::handle bias, nb::handle is_padding,
                    Placement& where, Keep& keep, moe_tensor& bias_out, moe_tensor& padding_out) {
  if (p.routing_bias && bias.is_none())
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "bias: the problem has routing_bias, so routing needs a [{}] f32 selection bias",
         p.experts);
  if (!p.routing_bias && !bias.is_none())
    fail(MOE_STATUS_INVALID_ARGUMENT, "bias: given, but the problem has no routing_bias");
  if (!bias.is_none()) bias_out = tensor_arg(bias, "bias", MOE_DTYPE_F32, {p.experts}, where, keep);
  if (!is_padding.is_none())
    padding_out = tensor_arg(is_padding, "is_padding", MOE_DTYPE_U8, {tokens}, where, keep);
}

}  // namespace

void Layer::route(nb::handle logits, nb::handle topk_ids, nb::handle topk_weights, nb::handle bias,
                  nb::handle is_padding, nb::handle workspace_given, uintptr_t stream,
                  bool stream_is_current) {
  const moe_problem& p = *info_.problem;
  const int64_t width = MOE_TOPK_WIDTH(&p);
  Placement where{info_.memory, device_id};
  where.stream = stream;
  where.stream_is_current = stream_is_current;
  Keep keep;
  auto a = sized<moe_route_args>();
  a.logits = tensor_arg(logits, "logits", MOE_DTYPE_F32, {kAnyDim, p.experts + p.sink_experts},
                        where, keep);
  const int64_t tokens = tokens_of(a.logits);
  a.topk_ids =
      tensor_arg(topk_ids, "topk_ids", MOE_DTYPE_I32, {tokens, width}, where, keep, Access::kWrite);
  a.topk_weights = tensor_arg(topk_weights, "topk_weights", MOE_DTYPE_F32, {tokens, width}, where,
                              keep, Access::kWrite);
  routing_extras(p, tokens, bias, is_padding, where, keep, a.bias, a.is_padding);
  a.stream = reinterpret_cast<void*>(stream);
  a.workspace_size = route_workspace_size(tokens);
  call(a, workspace_given, route_ws_, where, keep, moe_host_layer_route);
}

void Layer::run(nb::handle hidden, nb::handle topk_ids, nb::handle topk_weights, nb::handle output,
                nb::handle workspace_given, uintptr_t stream, nb::handle router_logits,
                nb::handle bias, nb::handle is_padding, bool stream_is_current) {
  const moe_problem& p = *info_.problem;
  const int64_t width = MOE_TOPK_WIDTH(&p);
  Placement where{info_.memory, device_id};
  where.stream = stream;
  where.stream_is_current = stream_is_current;
  Keep keep;
  auto a = sized<moe_run_args>();
  a.hidden = tensor_arg(hidden, "hidden", MOE_DTYPE_BF16, {kAnyDim, p.hidden}, where, keep);
  const int64_t tokens = tokens_of(a.hidden);
  // Routing in the call (ABI 1.6) writes the ids and weights; else the call reads them.
  const Access routed = router_logits.is_none() ? Access::kRead : Access::kWrite;
  a.topk_ids =
      tensor_arg(topk_ids, "topk_ids", MOE_DTYPE_I32, {tokens, width}, where, keep, routed);
  a.topk_weights =
      tensor_arg(topk_weights, "topk_weights", MOE_DTYPE_F32, {tokens, width}, where, keep, routed);
  a.output =
      tensor_arg(output, "out", MOE_DTYPE_BF16, {tokens, p.hidden}, where, keep, Access::kWrite);
  if (!router_logits.is_none()) {  // ABI 1.6: the plugin routes in this call
    a.router_logits = tensor_arg(router_logits, "router_logits", MOE_DTYPE_F32,
                                 {tokens, p.experts + p.sink_experts}, where, keep);
    routing_extras(p, tokens, bias, is_padding, where, keep, a.routing_bias, a.is_padding);
  }
  a.stream = reinterpret_cast<void*>(stream);
  a.workspace_size = workspace_size(tokens);
  call(a, workspace_given, run_ws_, where, keep, moe_host_layer_run);
}

}  // namespace moe::py
