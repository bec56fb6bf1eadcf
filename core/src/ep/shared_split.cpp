// split_shared_expert: a problem's weight-1 shared expert as a layer of one expert of its own,
// so the EP step can run it once per token, on the token's home rank (moe/ep.hpp).
#include "moe/ep.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::ep {
namespace {

// A shared tensor as expert 0's, over the same bytes: matrices and block scales gain a leading
// dimension of 1; a lone scale or scale_2 is [1] either way (docs/design.md §3.1).
moe_tensor as_expert0(const moe_tensor& t) {
  if (t.data == nullptr || (t.ndim == 1 && t.shape[0] == 1)) return t;
  MOE_CHECK(t.ndim >= 1 && t.ndim < MOE_TENSOR_MAX_DIMS, MOE_STATUS_SHAPE_MISMATCH,
            "split_shared_expert: a shared tensor of {} dimensions has no room for the expert's",
            t.ndim);
  moe_tensor out = t;
  out.ndim = t.ndim + 1;
  bool strided = false;
  for (int d = 0; d < t.ndim; ++d) strided = strided || t.strides[d] != 0;
  for (int d = t.ndim; d > 0; --d) {
    out.shape[d] = t.shape[d - 1];
    out.strides[d] = t.strides[d - 1];
  }
  out.shape[0] = 1;
  out.strides[0] = strided ? t.shape[0] * t.strides[0] : 0;  // one expert: never stepped over
  return out;
}

}  // namespace

SharedSplit split_shared_expert(const moe_problem& p, const moe_weights& w) {
  MOE_CHECK(p.shared_intermediate > 0, MOE_STATUS_INVALID_ARGUMENT,
            "split_shared_expert: the problem has no shared expert (shared_intermediate=0)");
  SharedSplit s;
  s.routed = Problem(p);
  s.routed.raw().shared_intermediate = 0;
  // finalize() would rebuild the map from the placement: a caller's map (the routed weights are
  // in its local order) stays.
  if (p.ep_map != nullptr)
    normalize_problem(s.routed.raw());
  else
    s.routed.finalize();
  s.routed_weights = w;
  for (moe_tensor* t : {&s.routed_weights.shared_w13, &s.routed_weights.shared_w13_scale,
                        &s.routed_weights.shared_w13_scale_2, &s.routed_weights.shared_w2,
                        &s.routed_weights.shared_w2_scale, &s.routed_weights.shared_w2_scale_2})
    *t = moe_tensor{};

  moe_problem& q = s.shared.raw();  // one expert, always chosen, in the layer's arithmetic
  q.experts = 1;
  q.top_k = 1;
  q.hidden = p.hidden;
  q.intermediate = p.shared_intermediate;
  q.format = p.format;
  q.input_format = p.input_format;
  q.activation = p.activation;
  q.gelu_tanh = p.gelu_tanh;
  q.activation_alpha = p.activation_alpha;
  q.activation_limit = p.activation_limit;
  q.routing = MOE_ROUTING_SOFTMAX_TOPK;
  q.renormalize = 0;
  q.max_tokens = p.max_tokens;
  s.shared.finalize();
  moe_weights& e = s.shared_weights;
  e.struct_size = sizeof(moe_weights);
  e.w13 = as_expert0(w.shared_w13);
  e.w13_scale = as_expert0(w.shared_w13_scale);
  e.w13_scale_2 = as_expert0(w.shared_w13_scale_2);
  e.w2 = as_expert0(w.shared_w2);
  e.w2_scale = as_expert0(w.shared_w2_scale);
  e.w2_scale_2 = as_expert0(w.shared_w2_scale_2);
  // A static activation's scales are the routed experts' (a shared expert's own input_scale is
  // not read, docs/design.md §3.4).
  e.a13_scale = w.a13_scale;
  e.a2_scale = w.a2_scale;
  return s;
}

}  // namespace moe::ep
