// One expert-parallel layer step (run_step): plan on the host, tokens to the ranks that own
// their experts, the local layer on what arrived, results back, summed in rank order.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "moe/ep.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::ep {
namespace {

// Contiguous host rows packed for sending.
template <class T>
std::vector<T> pack_rows(const T* src, const std::vector<int32_t>& rows, int64_t width) {
  std::vector<T> out(rows.size() * size_t(width));
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.data() + i * width, src + rows[i] * width, size_t(width) * sizeof(T));
  return out;
}

// Per-rank byte spans of a buffer of rows: counts[r] rows of `row_bytes` each, back to back.
template <class P>
std::vector<std::pair<P, size_t>> spans(P base, const std::vector<int64_t>& counts,
                                        size_t row_bytes) {
  std::vector<std::pair<P, size_t>> out;
  size_t at = 0;
  for (int64_t c : counts) {
    out.push_back(
        {reinterpret_cast<P>(reinterpret_cast<uintptr_t>(base) + at), size_t(c) * row_bytes});
    at += size_t(c) * row_bytes;
  }
  return out;
}

// The exchange of one kind of rows: through NCCL, or a copy when this is the only rank.
void exchange(Group* group, const Plugin& dev, const std::vector<std::pair<const void*, size_t>>& s,
              const std::vector<std::pair<void*, size_t>>& r, const char* what) {
  if (group != nullptr) return group->exchange(s, r, what);
  dev.copy(r[0].first, s[0].first, s[0].second, MOE_MEMCPY_DEVICE_TO_DEVICE);
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

Buffer upload(std::shared_ptr<const Plugin> dev, const void* host, size_t bytes) {
  Buffer b(std::move(dev), bytes);
  b.upload(host, bytes);
  return b;
}

// The owning rank of every expert from every rank's map: a caller's map (docs/design.md §4)
// decides where each expert lives, and only its rank knows it, so the ranks swap their maps
// (E entries each) before planning. One rank: the placement's.
std::vector<int32_t> gather_owners(Group* group, const Plugin& plugin, const moe_problem& p) {
  if (group == nullptr) return expert_owners(p);
  const int32_t world = group->world();
  const auto e = size_t(p.experts);
  std::vector<int32_t> mine(e);
  for (size_t i = 0; i < e; ++i) mine[i] = local_expert_id(p, int64_t(i));  // the map, if given
  const auto dev = plugin.shared_from_this();
  Buffer s = upload(dev, mine.data(), e * 4), r(dev, e * 4 * size_t(world));
  exchange(
      group, plugin, std::vector<std::pair<const void*, size_t>>(size_t(world), {s.data(), e * 4}),
      spans<void*>(r.data(), std::vector<int64_t>(size_t(world), 1), e * 4), "expert map exchange");
  std::vector<int32_t> all(e * size_t(world));
  r.download(all.data(), all.size() * 4);
  std::vector<std::vector<int32_t>> maps(static_cast<size_t>(world));
  for (size_t k = 0; k < size_t(world); ++k)
    maps[k].assign(all.begin() + ptrdiff_t(k * e), all.begin() + ptrdiff_t((k + 1) * e));
  return expert_owners(maps, p.experts);
}

}  // namespace

HostTensor run_step(Group* group, const Layer& layer, const moe_problem& p,
                    const HostTensor& hidden, const Routing& routing, StepStats* stats,
                    const SharedExpert& shared) {
  const auto start = std::chrono::steady_clock::now();
  const Plugin& plugin = layer.plugin();
  const auto dev = plugin.shared_from_this();
  const int32_t world = group ? group->world() : 1;
  if (group != nullptr) group->check_current_device("the step");
  MOE_CHECK(p.shared_intermediate == 0, MOE_STATUS_UNSUPPORTED,
            "a weight-1 shared expert (shared_intermediate={}) would run on every rank a token "
            "goes to: split it off with ep::split_shared_expert and pass its layer to the step "
            "(`moe run`, moe_host_layer_prepare and Python's Layer.prepare do so for an EP "
            "problem)",
            p.shared_intermediate);
  MOE_CHECK(
      shared.layer == nullptr || (shared.problem.experts == 1 && shared.problem.hidden == p.hidden),
      MOE_STATUS_INVALID_ARGUMENT,
      "the shared expert's layer must be one expert of hidden={} (split_shared_expert's), "
      "not experts={} hidden={}",
      p.hidden, shared.problem.experts, shared.problem.hidden);
  MOE_CHECK(world == p.ep_size, MOE_STATUS_CONFIG_ERROR,
            "the problem has ep_size={} but {} rank(s) run", p.ep_size, world);
  MOE_CHECK(group == nullptr || group->rank() == p.ep_rank, MOE_STATUS_CONFIG_ERROR,
            "the problem has ep_rank={}, but this process is rank {} of the group", p.ep_rank,
            group ? group->rank() : 0);
  const int64_t tokens = hidden.shape()[0], h = p.hidden, w = topk_width(p);
  const DispatchPlan plan =
      plan_dispatch(p, world, routing.ids.data<int32_t>(), routing.weights.data<float>(), tokens,
                    gather_owners(group, plugin, p));
  const int64_t sent = plan.send_offsets.back();

  // 1. How many tokens each rank receives from each rank.
  std::vector<int64_t> recv_counts(static_cast<size_t>(world));
  {
    Buffer s = upload(dev, plan.send_counts.data(), sizeof(int64_t) * size_t(world));
    Buffer r(dev, sizeof(int64_t) * size_t(world));
    exchange(group, plugin, spans<const void*>(s.data(), std::vector<int64_t>(world, 1), 8),
             spans<void*>(r.data(), std::vector<int64_t>(world, 1), 8), "token count exchange");
    r.download(recv_counts.data(), sizeof(int64_t) * size_t(world));
  }
  int64_t received = 0;
  for (int64_t c : recv_counts) received += c;

  // 2. Tokens, their ids and weights, to the ranks that own their experts.
  const auto x = pack_rows(hidden.data<uint16_t>(), plan.send_tokens, h);
  Buffer sx = upload(dev, x.data(), x.size() * 2), rx(dev, size_t(received * h * 2));
  Buffer si = upload(dev, plan.send_ids.data(), plan.send_ids.size() * 4),
         ri(dev, size_t(received * w * 4));
  Buffer sw = upload(dev, plan.send_weights.data(), plan.send_weights.size() * 4),
         rw(dev, size_t(received * w * 4));
  const auto dispatch_start = std::chrono::steady_clock::now();
  exchange(group, plugin, spans<const void*>(sx.data(), plan.send_counts, size_t(h) * 2),
           spans<void*>(rx.data(), recv_counts, size_t(h) * 2), "token dispatch");
  exchange(group, plugin, spans<const void*>(si.data(), plan.send_counts, size_t(w) * 4),
           spans<void*>(ri.data(), recv_counts, size_t(w) * 4), "id dispatch");
  exchange(group, plugin, spans<const void*>(sw.data(), plan.send_counts, size_t(w) * 4),
           spans<void*>(rw.data(), recv_counts, size_t(w) * 4), "weight dispatch");

  const double dispatch_ms = ms_since(dispatch_start);

  // 3. This rank's experts on every token that arrived: up to ep_size x T rows, so in slices of
  // at most the layer's max_tokens (a rank that every token routes to gets more than its own T).
  const auto compute_start = std::chrono::steady_clock::now();
  Buffer ry(dev, size_t(received * h * 2));
  if (received > 0) {
    const int64_t slice = std::min(received, std::max<int64_t>(1, p.max_tokens));
    const size_t ws_bytes = layer.workspace_size(slice);
    Buffer ws(dev, ws_bytes);
    auto at = [](const Buffer& b, int64_t row, int64_t row_bytes) {
      return static_cast<char*>(b.data()) + row * row_bytes;
    };
    for (int64_t r0 = 0; r0 < received; r0 += slice) {
      const int64_t n = std::min(slice, received - r0);
      moe_run_args a{};
      a.hidden = make_view(at(rx, r0, h * 2), MOE_DTYPE_BF16, {n, h});
      a.topk_ids = make_view(at(ri, r0, w * 4), MOE_DTYPE_I32, {n, w});
      a.topk_weights = make_view(at(rw, r0, w * 4), MOE_DTYPE_F32, {n, w});
      a.output = make_view(at(ry, r0, h * 2), MOE_DTYPE_BF16, {n, h});
      a.workspace = ws_bytes ? ws.data() : nullptr;
      a.workspace_size = ws_bytes;
      layer.run(a);
    }
    plugin.sync();
  }

  const double compute_ms = ms_since(compute_start);

  // 4. Results back to the ranks the tokens came from.
  Buffer back(dev, size_t(sent * h * 2));
  const auto combine_start = std::chrono::steady_clock::now();
  exchange(group, plugin, spans<const void*>(ry.data(), recv_counts, size_t(h) * 2),
           spans<void*>(back.data(), plan.send_counts, size_t(h) * 2), "result combine");
  const double combine_ms = ms_since(combine_start);
  std::vector<uint16_t> partial(static_cast<size_t>(sent * h));
  back.download(partial.data(), partial.size() * 2);

  // 5. Sum in rank order (plan order), then the home passes: sink experts, the shared expert.
  std::vector<float> acc(static_cast<size_t>(tokens * h), 0.0f);
  for (int64_t i = 0; i < sent; ++i) {
    float* row = acc.data() + plan.send_tokens[size_t(i)] * h;
    for (int64_t c = 0; c < h; ++c) row[c] += bf16_to_float(partial[size_t(i * h + c)]);
  }
  auto add_home_pass = [&](const Layer& l, const moe_problem& q, const Routing& r) {
    const RunResult run = run_layer(l, q, hidden, r);
    for (int64_t i = 0; i < tokens * h; ++i)
      acc[size_t(i)] += bf16_to_float(run.output.data<uint16_t>()[i]);
  };
  if (needs_home_pass(p) && tokens > 0) {
    HostTensor ids(MOE_DTYPE_I32, {tokens, w});
    const auto home = home_pass_ids(p, routing.ids.data<int32_t>(), tokens);
    std::memcpy(ids.raw(), home.data(), ids.bytes());
    add_home_pass(layer, p, Routing{ids, routing.weights});
  }
  if (shared.layer != nullptr && tokens > 0) {  // every token once, here at home: id 0, weight 1
    HostTensor ids(MOE_DTYPE_I32, {tokens, 1}), ones(MOE_DTYPE_F32, {tokens, 1});
    for (int64_t t = 0; t < tokens; ++t) ids.data<int32_t>()[t] = 0, ones.data<float>()[t] = 1.0f;
    add_home_pass(*shared.layer, shared.problem, Routing{ids, ones});
  }
  HostTensor out(MOE_DTYPE_BF16, {tokens, h});
  for (int64_t i = 0; i < tokens * h; ++i) out.data<uint16_t>()[i] = float_to_bf16(acc[size_t(i)]);
  if (stats) {
    const int64_t row = h * 2 + w * 8;  // a token row with its ids and weights
    stats->tokens_sent = sent;
    stats->tokens_received = received;
    stats->dispatch_ms = dispatch_ms;
    stats->compute_ms = compute_ms;
    stats->combine_ms = combine_ms;
    stats->dispatch_bytes = (sent + received) * row;
    stats->combine_bytes = (sent + received) * h * 2;
    stats->ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return out;
}

}  // namespace moe::ep
