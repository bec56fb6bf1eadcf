// DeviceStep: an expert-parallel step that stays on the device (all-gather, the local layer,
// reduce-scatter, then the home passes on the rank's own tokens: its sink experts and the shared
// expert, added into the output; all enqueued on the caller's stream). Ragged: each rank's rows
// padded to max_tokens around the exchanges. Chunked: the exchanges of each chunk of rows on a
// stream of the step's own, overlapping the layer's runs on the others.
#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include "device/cuda_driver.hpp"
#include "ep/id_columns.hpp"
#include "moe/ep.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/tensor_checks.hpp"

namespace moe::ep {
using device::check_driver;

// The collectives' stream and its events: fork (the caller's stream to the collectives'), join
// (back), then per chunk `gathered` (its all-gathers done: its layer may run) and `computed` (its
// layer done: its reduce-scatter may start). Made in the primary context of the device that holds
// the step's buffers (the plugin's runtime's), which every use makes current for its span.
struct DeviceStep::Overlap {
  static constexpr int kFork = 0, kJoin = 1;
  Overlap(int32_t chunks, int32_t device_) : d(device::cuda_driver()), device(device_) {
    MOE_CHECK(d.stream_create && d.stream_destroy && d.event_create && d.event_record &&
                  d.event_destroy && d.stream_wait_event && d.stream_synchronize,
              MOE_STATUS_UNSUPPORTED,
              "the NVIDIA driver {} lacks the stream or event entries a chunked device step needs",
              d.library);
    const device::ContextScope scope(d, device);
    try {
      check_driver(d, d.stream_create(&stream, device::kStreamNonBlocking),
                   "cuStreamCreate (the device step's collectives)");
      events.assign(size_t(2 + 2 * chunks), nullptr);
      for (void*& e : events)
        check_driver(d, d.event_create(&e, device::kEventDisableTiming), "cuEventCreate");
    } catch (...) {
      release();
      throw;
    }
  }
  ~Overlap() {
    try {
      const device::ContextScope scope(d, device);
      release();
    } catch (const Error&) {  // the context is gone (the driver shut down): nothing to free
    }
  }
  Overlap(const Overlap&) = delete;
  Overlap& operator=(const Overlap&) = delete;
  static int gathered(int64_t c) { return int(2 + 2 * c); }
  static int computed(int64_t c) { return int(3 + 2 * c); }
  // The event marks what `on` has enqueued so far; a stream that waits for it goes on after that.
  void record(int event, void* on) const {
    check_driver(d, d.event_record(events[size_t(event)], on), "cuEventRecord");
  }
  void wait(void* waiter, int event) const {
    check_driver(d, d.stream_wait_event(waiter, events[size_t(event)], 0), "cuStreamWaitEvent");
  }

  const device::CudaDriver& d;
  int32_t device;
  void* stream = nullptr;
  std::vector<void*> events;

 private:
  void release() {
    if (stream) d.stream_synchronize(stream);  // no collective left in flight on a dead stream
    for (void*& e : events)
      if (e) d.event_destroy(e), e = nullptr;
    if (stream) d.stream_destroy(stream), stream = nullptr;
  }
};

// The chunked section of a step: the collectives' stream forked from the caller's at the start
// and joined back at the end, also when a launch or a collective throws half way (so the caller's
// stream never runs ahead of a reduce-scatter still writing, and a capture ends joined).
class ForkJoin {
 public:
  ForkJoin(const DeviceStep::Overlap* o, void* comm, void* stream)
      : o_(o), comm_(comm), stream_(stream) {
    if (o_ == nullptr) return;
    scope_.emplace(o_->d, o_->device);
    o_->record(DeviceStep::Overlap::kFork, stream_);
    o_->wait(comm_, DeviceStep::Overlap::kFork);
  }
  ~ForkJoin() noexcept(false) {
    if (o_ == nullptr) return;
    const bool unwinding = std::uncaught_exceptions() > 0;
    try {
      o_->record(DeviceStep::Overlap::kJoin, comm_);
      o_->wait(stream_, DeviceStep::Overlap::kJoin);
    } catch (const Error&) {
      if (!unwinding) throw;  // else the first error is the one to report
    }
  }
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

 private:
  const DeviceStep::Overlap* o_;
  void *comm_, *stream_;
  std::optional<device::ContextScope> scope_;
};

DeviceStep::DeviceStep(Group* group, const Layer& layer, const moe_problem& p, int64_t max_tokens,
                       const SharedExpert& shared, bool ragged, int32_t chunks)
    : group_(group),
      layer_(layer),
      shared_(shared),
      problem_(p),
      max_tokens_(max_tokens),
      width_(topk_width(p)),
      world_(group ? group->world() : 1),
      ragged_(ragged),
      chunks_(chunks) {
  // A rank that fails here (a refused argument, a failed allocation) still joins the group's
  // agreement below, so the others learn it at once instead of waiting in their first step's
  // collectives; every rank then throws, the failing one its own error.
  std::exception_ptr failed;
  try {
    make(layer, p, max_tokens, shared, ragged, chunks);
  } catch (...) {
    failed = std::current_exception();
  }
  if (group == nullptr) {
    if (failed) std::rethrow_exception(failed);
    return;
  }
  agree(failed, max_tokens, ragged, chunks);
}

void DeviceStep::make(const Layer& layer, const moe_problem& p, int64_t max_tokens,
                      const SharedExpert& shared, bool ragged, int32_t chunks) {
  Group* group = group_;
  MOE_CHECK(max_tokens >= 1, MOE_STATUS_INVALID_ARGUMENT,
            "the device step needs max_tokens >= 1, not {}", max_tokens);
  MOE_CHECK(chunks >= 1 && chunks <= kMaxChunks && chunks <= max_tokens,
            MOE_STATUS_INVALID_ARGUMENT,
            "the device step cuts a rank's rows into 1 to {} chunks, and no more than its "
            "max_tokens={}: not {}",
            kMaxChunks, max_tokens, chunks);
  MOE_CHECK(world_ == p.ep_size && (group == nullptr || group->rank() == p.ep_rank),
            MOE_STATUS_CONFIG_ERROR,
            "the problem has ep_size={} and ep_rank={}, but this process is rank {} of {}",
            p.ep_size, p.ep_rank, group ? group->rank() : 0, world_);
  MOE_CHECK(world_ * max_tokens <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
            "the device step runs the layer on every rank's tokens, {} x {} = {}, but the layer "
            "takes at most max_tokens={}: prepare it with max_tokens >= {}",
            world_, max_tokens, world_ * max_tokens, p.max_tokens, world_ * max_tokens);
  MOE_CHECK(p.shared_intermediate == 0, MOE_STATUS_UNSUPPORTED,
            "the device step runs a shared expert (shared_intermediate={}) as a layer of its own "
            "on each rank's tokens: split it off with ep::split_shared_expert and pass its layer",
            p.shared_intermediate);
  // Sink experts are replicated on every rank and run once per token, at home: the gathered run
  // takes them out of every row (their id columns cleared), a home pass on the rank's own tokens
  // with the routed columns cleared adds them into the output.
  MOE_CHECK(p.sink_experts == 0 || group == nullptr || layer.plugin().info().accumulates(),
            MOE_STATUS_UNSUPPORTED,
            "the device step adds the sink experts ({}) into the output on each rank's own "
            "tokens, but plugin '{}' does not declare MOE_RUN_FEATURE_ACCUMULATE (ABI 1.4); "
            "ep::run_step sums on the host instead",
            p.sink_experts, layer.plugin().name());
  if (const Layer* s = shared.layer) {
    MOE_CHECK(shared.problem.experts == 1 && shared.problem.hidden == p.hidden,
              MOE_STATUS_INVALID_ARGUMENT,
              "the shared expert's layer must be one expert of hidden={} (split_shared_expert's), "
              "not experts={} hidden={}",
              p.hidden, shared.problem.experts, shared.problem.hidden);
    MOE_CHECK(&s->plugin() == &layer.plugin(), MOE_STATUS_INVALID_ARGUMENT,
              "the shared expert's layer is plugin '{}''s, the routed layer plugin '{}''s: the "
              "device step needs both in one plugin's memory",
              s->plugin().name(), layer.plugin().name());
    MOE_CHECK(s->plugin().info().accumulates(), MOE_STATUS_UNSUPPORTED,
              "the device step adds the shared expert into the output, but plugin '{}' does not "
              "declare MOE_RUN_FEATURE_ACCUMULATE (ABI 1.4); ep::run_step sums on the host instead",
              s->plugin().name());
  }
  const auto dev = layer.plugin().shared_from_this();
  const size_t all = size_t(world_ * max_tokens), h = size_t(p.hidden), w = size_t(width_);
  // One workspace serves both layers: they run one after the other on the stream.
  size_t ws = layer.workspace_size(int64_t(all));
  if (const Layer* s = shared.layer) {
    ws = std::max(ws, s->workspace_size(max_tokens));
    const std::vector<int32_t> zeros(size_t(max_tokens), 0);
    const std::vector<float> ones(size_t(max_tokens), 1.0f);
    shared_ids_ = Buffer(dev, zeros.size() * 4);
    shared_ids_.upload(zeros.data(), zeros.size() * 4);
    shared_weights_ = Buffer(dev, ones.size() * 4);
    shared_weights_.upload(ones.data(), ones.size() * 4);
  }
  if (ws > 0) workspace_ = Buffer(dev, ws);
  if (group_ == nullptr) return;  // one rank: the layer runs on the caller's tensors
  hidden_ = Buffer(dev, all * h * 2);
  ids_ = Buffer(dev, all * w * 4);
  if (p.sink_experts > 0) home_ids_ = Buffer(dev, size_t(max_tokens) * w * 4);
  weights_ = Buffer(dev, all * w * 4);
  out_ = Buffer(dev, all * h * 2);
  // Only the sinks' id edits and the ragged padding touch the buffers apart from the plugin; a
  // chunked step on a device needs its own stream for the collectives.
  if (p.sink_experts > 0 || ragged || chunks > 1) on_device_ = is_device_memory(ids_.data());
  if (chunks > 1 && on_device_) {
    const device::CudaDriver& d = device::cuda_driver();
    int32_t ordinal = 0;
    int attribute = device::kPointerDeviceOrdinal;
    void* data[] = {&ordinal};
    check_driver(
        d, d.pointer_get_attributes(1, &attribute, data, reinterpret_cast<uint64_t>(ids_.data())),
        "cuPointerGetAttributes (the device of the step's buffers)");
    overlap_ = std::make_shared<Overlap>(chunks, ordinal);
  }
  if (ragged) {
    const size_t m = size_t(max_tokens);
    // Zeros first: a padding row's hidden state and weights are never read (its ids are -1), but
    // nothing unset should travel.
    const std::vector<uint8_t> zeros(m * std::max(h * 2, w * 4), 0);
    send_hidden_ = Buffer(dev, m * h * 2);
    send_hidden_.upload(zeros.data(), m * h * 2);
    send_ids_ = Buffer(dev, m * w * 4);
    send_weights_ = Buffer(dev, m * w * 4);
    send_weights_.upload(zeros.data(), m * w * 4);
    recv_ = Buffer(dev, m * h * 2);
  }
}

void DeviceStep::agree(std::exception_ptr failed, int64_t max_tokens, bool ragged,
                       int32_t chunks) const {
  // One word a rank: how it cuts and pads its rows (every rank's collectives must match), or
  // bit 63 and its error's status when it could not make its step.
  constexpr uint64_t kFailed = uint64_t(1) << 63;
  auto status_of = [](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& x) {
      return x.status();
    } catch (...) {
      return MOE_STATUS_INTERNAL;
    }
  };
  auto shape_of = [](uint64_t v) {
    return fmt::format("ragged={}{}, chunks={}", (v >> 7) & 1,
                       (v >> 7) & 1 ? fmt::format(" (max_tokens={})", v >> 8) : std::string(),
                       v & 127);
  };
  const uint64_t mine =
      failed ? kFailed | uint64_t(uint32_t(status_of(failed)))
             : uint64_t(chunks) | uint64_t(ragged) << 7 | (ragged ? uint64_t(max_tokens) << 8 : 0);
  std::vector<uint64_t> all;
  try {
    all = group_->all_gather(mine, "device step shape check");
  } catch (...) {
    if (failed) std::rethrow_exception(failed);
    throw;
  }
  if (failed) std::rethrow_exception(failed);
  for (int32_t r = 0; r < world_; ++r)
    MOE_CHECK(!(all[size_t(r)] & kFailed), static_cast<moe_status>(all[size_t(r)] & 0xffffffffu),
              "rank {} could not make its device step ({}: its own error says why), so rank {} "
              "does not step either",
              r, status_name(static_cast<moe_status>(all[size_t(r)] & 0xffffffffu)),
              group_->rank());
  for (int32_t r = 0; r < world_; ++r)
    MOE_CHECK(all[size_t(r)] == mine, MOE_STATUS_CONFIG_ERROR,
              "rank {} makes its device step with {}, rank {} with {}: every rank must make "
              "it alike (its collectives must match)",
              r, shape_of(all[size_t(r)]), group_->rank(), shape_of(mine));
}

void DeviceStep::run(const moe_tensor& hidden, const moe_tensor& topk_ids,
                     const moe_tensor& topk_weights, const moe_tensor& output, void* stream) const {
  // Before anything moves: the layer's own check would come only at its first chunk's launch,
  // after this rank's first all-gathers were posted (the other ranks then wait for the rest).
  if (group_ != nullptr) group_->check_current_device("the device step");
  MOE_CHECK(hidden.ndim == 2, MOE_STATUS_INVALID_ARGUMENT,
            "hidden must be bf16 [T, {}], not of {} dimensions", problem_.hidden, hidden.ndim);
  const int64_t tokens = hidden.shape[0];
  MOE_CHECK(tokens <= max_tokens_, MOE_STATUS_CAPACITY_EXCEEDED,
            "the device step takes up to {} tokens a rank (its buffers' capacity), not {}",
            max_tokens_, tokens);
  // Nothing moves when every rank steps the same T; a ragged step still joins the exchanges.
  if (tokens == 0 && (!ragged_ || group_ == nullptr)) return;
  const int64_t h = problem_.hidden;
  // The collectives move whole rows: every tensor contiguous, of its dtype and shape.
  sdk::check_tensor(hidden, "hidden", MOE_DTYPE_BF16, {tokens, h});
  sdk::check_tensor(topk_ids, "topk_ids", MOE_DTYPE_I32, {tokens, width_});
  sdk::check_tensor(topk_weights, "topk_weights", MOE_DTYPE_F32, {tokens, width_});
  sdk::check_tensor(output, "output", MOE_DTYPE_BF16, {tokens, h});
  moe_run_args a{};
  a.stream = stream;
  a.workspace = workspace_.data();
  a.workspace_size = workspace_.size();
  if (group_ == nullptr) {
    a.hidden = hidden;
    a.topk_ids = topk_ids;
    a.topk_weights = topk_weights;
    a.output = output;
    layer_.run(a);
    add_shared(hidden, output, stream);
    return;
  }
  // Rows a rank sends: its T, or (ragged) max_tokens, its T rows then padding (ids -1).
  const int64_t rows = ragged_ ? max_tokens_ : tokens;
  const void *send_hidden = hidden.data, *send_ids = topk_ids.data,
             *send_weights = topk_weights.data;
  if (ragged_) {
    const size_t id_bytes = size_t(tokens * width_ * 4);
    copy_in_stream(on_device_, send_hidden_.data(), hidden.data, size_t(tokens * h * 2), stream);
    copy_in_stream(on_device_, send_ids_.data(), topk_ids.data, id_bytes, stream);
    clear_id_columns(on_device_, static_cast<int32_t*>(send_ids_.data()) + tokens * width_,
                     rows - tokens, width_, 0, width_, stream);
    copy_in_stream(on_device_, send_weights_.data(), topk_weights.data, id_bytes, stream);
    send_hidden = send_hidden_.data(), send_ids = send_ids_.data();
    send_weights = send_weights_.data();
  }
  // Chunk c: rows [first(c), first(c + 1)) of every rank's, gathered rank-major into the
  // buffers' rows [world * first(c), world * first(c + 1)). Every rank cuts its `rows` alike.
  const int64_t parts = std::min<int64_t>(chunks_, rows);
  const int64_t k = problem_.top_k, sinks = problem_.sink_experts;
  const Overlap* o = parts > 1 ? overlap_.get() : nullptr;  // null: one stream, in order
  void* comm = o != nullptr ? o->stream : stream;
  auto first = [&](int64_t c) { return rows * c / parts; };
  auto at = [](const void* base, int64_t row, int64_t row_bytes) {
    return static_cast<char*>(const_cast<void*>(base)) + row * row_bytes;
  };
  const int64_t hb = h * 2, wb = width_ * 4;
  void* out_rows = ragged_ ? recv_.data() : output.data;
  auto gather = [&](int64_t c) {
    const int64_t r0 = first(c), n = first(c + 1) - r0;
    group_->all_gather_on(at(send_hidden, r0, hb), at(hidden_.data(), world_ * r0, hb),
                          size_t(n * hb), comm, "token all-gather");
    group_->all_gather_on(at(send_ids, r0, wb), at(ids_.data(), world_ * r0, wb), size_t(n * wb),
                          comm, "id all-gather");
    group_->all_gather_on(at(send_weights, r0, wb), at(weights_.data(), world_ * r0, wb),
                          size_t(n * wb), comm, "weight all-gather");
    if (o != nullptr) o->record(Overlap::gathered(c), comm);  // before any reduce-scatter after
  };
  auto compute = [&](int64_t c) {
    if (o != nullptr) o->wait(stream, Overlap::gathered(c));
    const int64_t r0 = world_ * first(c), n = world_ * (first(c + 1) - first(c));
    auto* ids = reinterpret_cast<int32_t*>(at(ids_.data(), r0, wb));
    clear_id_columns(on_device_, ids, n, width_, k, sinks, stream);
    a.hidden = make_view(at(hidden_.data(), r0, hb), MOE_DTYPE_BF16, {n, h});
    a.topk_ids = make_view(ids, MOE_DTYPE_I32, {n, width_});
    a.topk_weights = make_view(at(weights_.data(), r0, wb), MOE_DTYPE_F32, {n, width_});
    a.output = make_view(at(out_.data(), r0, hb), MOE_DTYPE_BF16, {n, h});
    layer_.run(a);
    if (o != nullptr) o->record(Overlap::computed(c), stream);
  };
  auto scatter = [&](int64_t c) {
    if (o != nullptr) o->wait(comm, Overlap::computed(c));
    const int64_t r0 = first(c), n = first(c + 1) - r0;
    group_->reduce_scatter_bf16_on(at(out_.data(), world_ * r0, hb), at(out_rows, r0, hb),
                                   size_t(n * h), comm, "result reduce-scatter");
  };
  // The collectives' stream: every chunk's all-gathers one chunk ahead of its layer, its
  // reduce-scatter after it (gather 0, gather 1, scatter 0, gather 2, scatter 1, ...), the
  // same order on every rank.
  {
    // The collectives start after what the caller had enqueued (ragged copies too); the caller's
    // stream goes on after the last reduce-scatter, whatever happens in between.
    const ForkJoin fork(o, comm, stream);
    gather(0);
    for (int64_t c = 0; c < parts; ++c) {
      if (c + 1 < parts) gather(c + 1);
      compute(c);
      scatter(c);
    }
  }
  if (ragged_)
    copy_in_stream(on_device_, output.data, recv_.data(), size_t(tokens * h * 2), stream);
  if (sinks > 0 && tokens > 0) {  // the home pass: this rank's tokens, sink columns, added in
    copy_in_stream(on_device_, home_ids_.data(), topk_ids.data, size_t(tokens * width_ * 4),
                   stream);
    clear_id_columns(on_device_, static_cast<int32_t*>(home_ids_.data()), tokens, width_, 0, k,
                     stream);
    a.hidden = hidden;
    a.topk_ids = make_view(home_ids_.data(), MOE_DTYPE_I32, {tokens, width_});
    a.topk_weights = topk_weights;
    a.output = output;
    a.accumulate = 1;
    layer_.run(a);
  }
  add_shared(hidden, output, stream);
}

void DeviceStep::add_shared(const moe_tensor& hidden, const moe_tensor& output,
                            void* stream) const {
  if (shared_.layer == nullptr) return;
  const int64_t tokens = hidden.shape[0];
  moe_run_args a{};
  a.stream = stream;
  a.workspace = workspace_.data();
  a.workspace_size = workspace_.size();
  a.hidden = hidden;
  a.topk_ids = make_view(shared_ids_.data(), MOE_DTYPE_I32, {tokens, 1});
  a.topk_weights = make_view(shared_weights_.data(), MOE_DTYPE_F32, {tokens, 1});
  a.output = output;
  a.accumulate = 1;
  shared_.layer->run(a);
}

}  // namespace moe::ep
