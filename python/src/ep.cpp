// EpGroup over moe_host_ep_group: expert-parallel steps through the caller's NCCL communicator
// (an int address: vLLM's PyNcclCommunicator.comm.value), with host arrays checked first.
#include "handles.hpp"
#include "status.hpp"
#include "tensors.hpp"

namespace moe::py {
namespace {

// A step's four tensors (hidden, topk ids and weights, out) checked against problem `p` in
// `where`, into the args struct `a` of either step.
template <class Args>
void step_tensors(Args& a, const moe_problem& p, nb::handle hidden, nb::handle topk_ids,
                  nb::handle topk_weights, nb::handle out, Placement& where, Keep& keep) {
  const int64_t width = MOE_TOPK_WIDTH(&p);
  a.hidden = tensor_arg(hidden, "hidden", MOE_DTYPE_BF16, {kAnyDim, p.hidden}, where, keep);
  const int64_t tokens = a.hidden.shape[0];
  a.topk_ids = tensor_arg(topk_ids, "topk_ids", MOE_DTYPE_I32, {tokens, width}, where, keep);
  a.topk_weights =
      tensor_arg(topk_weights, "topk_weights", MOE_DTYPE_F32, {tokens, width}, where, keep);
  a.output =
      tensor_arg(out, "out", MOE_DTYPE_BF16, {tokens, p.hidden}, where, keep, Access::kWrite);
}

}  // namespace

EpGroup::EpGroup(uintptr_t nccl_comm, const Layer& layer, double timeout_s) {
  auto a = sized<moe_host_ep_group_args>();
  a.nccl_comm = reinterpret_cast<void*>(nccl_comm);
  a.layer = layer.handle();
  a.timeout_s = timeout_s;
  nb::gil_scoped_release unlocked;  // a collective: it waits for the other ranks
  check(moe_host_ep_group_create(&a, &handle_));
}

EpGroup::~EpGroup() {
  moe_host_ep_group_destroy(handle_);
}

void EpGroup::close() {
  if (closed_) return;
  if (open_steps_ > 0)
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "the expert-parallel group still has {} open device step(s): close them first",
         open_steps_.load());
  closed_ = true;                   // under the GIL: no call starts from here
  nb::gil_scoped_release unlocked;  // a step on another thread holds the mutex, without the GIL
  std::lock_guard<std::mutex> lock(mutex_);
  destroyed_ = true;
  moe_host_ep_group* h = handle_;
  handle_ = nullptr;
  check(moe_host_ep_group_destroy(h));
}

moe_host_ep_group* EpGroup::open_handle() const {
  if (closed_) fail(MOE_STATUS_INVALID_ARGUMENT, "the expert-parallel group is closed");
  return handle_;
}

EpDeviceStep::EpDeviceStep(EpGroup& group, const Layer& layer, int64_t max_tokens, bool ragged,
                           int64_t chunks)
    : group_(&group),
      problem_(*layer.info().problem),
      where_{layer.info().memory, layer.device_id} {
  auto a = sized<moe_host_ep_device_step_args>();
  a.layer = layer.handle();
  a.max_tokens = max_tokens;
  a.ragged = ragged ? 1 : 0;
  a.chunks = chunks;
  moe_host_ep_group* g = group.open_handle();
  {
    // A collective (the ranks exchange their plans): other Python threads, another rank's among
    // them when one process drives several GPUs, must run meanwhile.
    nb::gil_scoped_release unlocked;
    check(moe_host_ep_device_step_create(g, &a, &handle_));
  }
  ++group.open_steps_;
}

EpDeviceStep::~EpDeviceStep() {
  if (handle_ != nullptr) {
    moe_host_ep_device_step_destroy(handle_);
    --group_->open_steps_;
  }
}

void EpDeviceStep::close() {
  nb::gil_scoped_release unlocked;  // a run on another thread may hold the mutex
  std::lock_guard<std::mutex> lock(mutex_);
  if (handle_ == nullptr) return;
  check(moe_host_ep_device_step_destroy(handle_));
  handle_ = nullptr;
  --group_->open_steps_;
}

void EpDeviceStep::run(nb::handle hidden, nb::handle topk_ids, nb::handle topk_weights,
                       nb::handle out, uintptr_t stream, bool stream_is_current) {
  Keep keep;
  auto a = sized<moe_host_ep_device_run_args>();
  Placement where = where_;
  where.stream = stream;
  where.stream_is_current = stream_is_current;
  step_tensors(a, problem_, hidden, topk_ids, topk_weights, out, where, keep);
  a.stream = reinterpret_cast<void*>(stream);
  nb::gil_scoped_release unlocked;  // a collective: it may wait for the other ranks' NCCL calls
  std::lock_guard<std::mutex> lock(mutex_);
  if (handle_ == nullptr) fail(MOE_STATUS_INVALID_ARGUMENT, "the device step is closed");
  check(moe_host_ep_device_step_run(handle_, &a));
}

int32_t EpGroup::rank() const {
  if (closed_) fail(MOE_STATUS_INVALID_ARGUMENT, "the expert-parallel group is closed");
  int32_t rank = 0, world = 1;
  if (handle_ != nullptr) check(moe_host_ep_group_rank(handle_, &rank, &world));
  return rank;
}

int32_t EpGroup::world() const {
  if (closed_) fail(MOE_STATUS_INVALID_ARGUMENT, "the expert-parallel group is closed");
  int32_t rank = 0, world = 1;
  if (handle_ != nullptr) check(moe_host_ep_group_rank(handle_, &rank, &world));
  return world;
}

void EpGroup::step(const Layer& layer, nb::handle hidden, nb::handle topk_ids,
                   nb::handle topk_weights, nb::handle out) {
  if (closed_) fail(MOE_STATUS_INVALID_ARGUMENT, "the expert-parallel group is closed");
  Placement host{MOE_MEMORY_HOST, -1};  // the step's tensors are host memory (moe_host.h)
  Keep keep;
  auto a = sized<moe_host_ep_step_args>();
  a.layer = layer.handle();
  step_tensors(a, *layer.info().problem, hidden, topk_ids, topk_weights, out, host, keep);
  nb::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);  // close() on another thread waits for the step
  if (destroyed_) fail(MOE_STATUS_INVALID_ARGUMENT, "the expert-parallel group is closed");
  check(moe_host_ep_step(handle_, &a));
}

}  // namespace moe::py
