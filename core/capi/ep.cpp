// moe_host_ep_*: expert parallelism over the caller's NCCL communicator (moe/ep.hpp's Group,
// borrowed: the group never destroys it) and one EP step on host tensors. A libmoe_core built
// without the CUDA toolkit's headers has no moe_ep: its entries check their arguments, then answer
// UNSUPPORTED.
#include <algorithm>
#include <cstring>

#include "handles.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/tensor_checks.hpp"

#ifdef MOE_WITH_EP
#include "moe/ep.hpp"
#include "moe/ep_plan.hpp"
#endif

struct moe_host_ep_group {
#ifdef MOE_WITH_EP
  std::unique_ptr<moe::ep::Group> group;
#endif
};

struct moe_host_ep_device_step {
#ifdef MOE_WITH_EP
  std::unique_ptr<moe::ep::DeviceStep> step;
#endif
  moe::device::RunMemory run_memory;  // the layer's (handles.hpp)
};

namespace moe::capi {
namespace {

constexpr double kDefaultTimeoutS = 120;

[[maybe_unused]] [[noreturn]] void no_expert_parallelism() {
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "this libmoe_core was built without expert parallelism (no CUDA toolkit headers, "
           "nccl.h, at build time)");
}

// One host tensor of a step, checked against [rows, cols] and copied.
[[maybe_unused]] HostTensor host_copy(const moe_tensor& t, const char* name, moe_dtype dtype,
                                      int64_t rows, int64_t cols) {
  sdk::check_tensor(t, name, dtype, {rows, cols});
  HostTensor out(dtype, {t.shape[0], t.shape[1]});
  if (out.bytes() > 0) std::memcpy(out.raw(), t.data, out.bytes());
  return out;
}

}  // namespace
}  // namespace moe::capi

using namespace moe::capi;  // NOLINT: the C entry points below are thin

extern "C" {

moe_status moe_host_ep_group_create(const moe_host_ep_group_args* args, moe_host_ep_group** group) {
  return guarded([&] {
    deref(group, "group") = nullptr;
    const moe_host_ep_group_args a =
        read_args(args, MOE_HOST_EP_GROUP_ARGS_MIN_SIZE, "moe_host_ep_group_args");
    MOE_CHECK(a.nccl_comm != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_ep_group_args.nccl_comm is NULL: pass the engine's initialised ncclComm_t");
    [[maybe_unused]] const auto& l = deref(a.layer, "moe_host_ep_group_args.layer");
#ifndef MOE_WITH_EP
    no_expert_parallelism();
#else
    const moe_problem& p = l.problem_c;
    const moe::Plugin& plugin = l.layer.plugin();
    auto g = std::make_unique<moe_host_ep_group>();
    g->group = moe::ep::Group::borrow(a.nccl_comm, p.ep_rank, p.ep_size, plugin.shared_from_this(),
                                      a.timeout_s > 0 ? a.timeout_s : kDefaultTimeoutS,
                                      moe::config_digest(p, plugin.name(), 0));
    *group = g.release();
#endif
  });
}

moe_status moe_host_ep_group_destroy(moe_host_ep_group* group) {
  return guarded([&] { delete group; });
}

moe_status moe_host_ep_group_rank(const moe_host_ep_group* group, int32_t* rank, int32_t* world) {
  return guarded([&] {
    [[maybe_unused]] const auto& g = deref(group, "group");
    int32_t& r = deref(rank, "rank");
    int32_t& w = deref(world, "world");
#ifndef MOE_WITH_EP
    (void)r, (void)w;
    no_expert_parallelism();
#else
    r = g.group->rank();
    w = g.group->world();
#endif
  });
}

moe_status moe_host_ep_step(moe_host_ep_group* group, const moe_host_ep_step_args* args) {
  return guarded([&] {
    const moe_host_ep_step_args a =
        read_args(args, MOE_HOST_EP_STEP_ARGS_MIN_SIZE, "moe_host_ep_step_args");
    [[maybe_unused]] const auto& l = deref(a.layer, "moe_host_ep_step_args.layer");
#ifndef MOE_WITH_EP
    (void)group;
    no_expert_parallelism();
#else
    const moe_problem& p = l.problem_c;
    const int64_t width = moe::topk_width(p);
    const int64_t rows = a.hidden.ndim >= 1 ? a.hidden.shape[0] : 0;
    MOE_CHECK(rows <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,  // before copying them
              "moe_host_ep_step_args.hidden: {} tokens is more than the layer's max_tokens={}",
              rows, p.max_tokens);
    // Copied on the host below: device memory there would be a fault, not an error.
    moe::device::RunMemory::host_only("moe_host_ep_step")
        .check_step("moe_host_ep_step_args", a.hidden, a.topk_ids, a.topk_weights, a.output);
    const moe::HostTensor hidden = host_copy(a.hidden, "moe_host_ep_step_args.hidden",
                                             MOE_DTYPE_BF16, moe::sdk::kAnyDim, p.hidden);
    const int64_t tokens = hidden.shape()[0];
    const moe::Routing routing{
        host_copy(a.topk_ids, "moe_host_ep_step_args.topk_ids", MOE_DTYPE_I32, tokens, width),
        host_copy(a.topk_weights, "moe_host_ep_step_args.topk_weights", MOE_DTYPE_F32, tokens,
                  width)};
    moe::sdk::check_tensor(a.output, "moe_host_ep_step_args.output", MOE_DTYPE_BF16,
                           {tokens, p.hidden});
    moe::ep::Group* g = group != nullptr ? group->group.get() : nullptr;
    // A shared expert split off at prepare (handles.hpp): the routed layer's problem, and the
    // shared layer run once per token at home.
    moe::ep::SharedExpert shared;
    if (l.shared) shared = {&*l.shared, l.shared_problem.c()};
    const moe::HostTensor out = moe::ep::run_step(g, l.layer, l.shared ? l.routed_problem.c() : p,
                                                  hidden, routing, nullptr, shared);
    if (out.bytes() > 0) std::memcpy(a.output.data, out.raw(), out.bytes());
#endif
  });
}

// moe_host_ep_device_step_args.chunks' bound (moe_host.h): ep::DeviceStep's.
constexpr int64_t kMaxStepChunks = 64;
#ifdef MOE_WITH_EP
static_assert(kMaxStepChunks == moe::ep::DeviceStep::kMaxChunks, "the C API's chunk bound");
#endif

moe_status moe_host_ep_device_step_create(moe_host_ep_group* group,
                                          const moe_host_ep_device_step_args* args,
                                          moe_host_ep_device_step** step) {
  return guarded([&] {
    deref(step, "step") = nullptr;
    const moe_host_ep_device_step_args a =
        read_args(args, MOE_HOST_EP_DEVICE_STEP_ARGS_MIN_SIZE, "moe_host_ep_device_step_args");
    [[maybe_unused]] const auto& l = deref(a.layer, "moe_host_ep_device_step_args.layer");
    MOE_CHECK(a.ragged == 0 || a.ragged == 1, MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_ep_device_step_args.ragged must be 0 or 1, not {}", a.ragged);
    MOE_CHECK(a.chunks >= 0 && a.chunks <= kMaxStepChunks, MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_ep_device_step_args.chunks must be 0 to {} (0 and 1: one chunk), not {}",
              kMaxStepChunks, a.chunks);
#ifndef MOE_WITH_EP
    (void)group;
    no_expert_parallelism();
#else
    // A shared expert (split off at prepare) is added on each rank's tokens after the exchange.
    moe::ep::SharedExpert shared;
    if (l.shared) shared = {&*l.shared, l.shared_problem.c()};
    auto s = std::make_unique<moe_host_ep_device_step>();
    s->run_memory = l.run_memory;
    s->step = std::make_unique<moe::ep::DeviceStep>(
        group != nullptr ? group->group.get() : nullptr, l.layer,
        l.shared ? l.routed_problem.c() : l.problem_c, a.max_tokens, shared, a.ragged == 1,
        int32_t(std::max<int64_t>(a.chunks, 1)));
    *step = s.release();
#endif
  });
}

moe_status moe_host_ep_device_step_destroy(moe_host_ep_device_step* step) {
  return guarded([&] { delete step; });
}

moe_status moe_host_ep_device_step_run(const moe_host_ep_device_step* step,
                                       const moe_host_ep_device_run_args* args) {
  return guarded([&] {
    [[maybe_unused]] const auto& s = deref(step, "step");
    const moe_host_ep_device_run_args a =
        read_args(args, MOE_HOST_EP_DEVICE_RUN_ARGS_MIN_SIZE, "moe_host_ep_device_run_args");
#ifndef MOE_WITH_EP
    no_expert_parallelism();
#else
    s.run_memory.check_step("moe_host_ep_device_run_args", a.hidden, a.topk_ids, a.topk_weights,
                            a.output);
    s.step->run(a.hidden, a.topk_ids, a.topk_weights, a.output, a.stream);
#endif
  });
}

}  // extern "C"
