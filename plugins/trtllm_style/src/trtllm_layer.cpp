#include "trtllm_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "grouped_gemm.hpp"
#include "moe/sdk/bias_values.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/workspace.hpp"

namespace moe::trtllm {
namespace {

int64_t rows_per_token(const moe_problem& p) {
  return p.top_k + p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
}

// The caller's canonical bf16 [E, rows, cols] tensor (checked by check_weights), read in place.
TensorView bf16_view(const moe_tensor& t, int64_t e, int64_t rows, int64_t cols) {
  const MatrixStack s{e, rows, cols, 2};
  return {MOE_DTYPE_BF16, s, ByteSpan(static_cast<const uint8_t*>(t.data), size_t(s.bytes()))};
}

// A bias LayoutTensor (E, rows, 1), bf16 or f32, as floats (the SDK's bias_values), appended to
// `out`.
void append_bias(std::vector<float>& out, const LayoutTensor& b, const char* name) {
  moe_tensor view{};
  view.data = const_cast<uint8_t*>(b.bytes.data());
  view.dtype = b.dtype;
  view.ndim = 2;
  view.shape[0] = b.shape.batch;
  view.shape[1] = b.shape.rows;
  const std::vector<float> v = sdk::bias_values(view, name, b.shape.batch * b.shape.rows);
  out.insert(out.end(), v.begin(), v.end());
}

}  // namespace

struct DeviceLayer::Workspace {
  moe::gpu::Permutation perm;
  void* rows;   // [R, H] bf16, the tokens of each group, contiguous
  void* gemm1;  // [R, n1] bf16 (separate activation only)
  void* act;    // [R, P] bf16
  void* gemm2;  // [R, H] bf16
  void* gemm_ws;
  size_t gemm_ws_bytes;
};

Refusal check_support(const moe_problem& p) {
  if (p.format != MOE_FORMAT_BF16)
    return {MOE_REASON_FORMAT, fmt::format("bf16 weights only, not {}",
                                           format_name(static_cast<moe_format>(p.format)))};
  if (p.input_format != MOE_INPUT_BF16) return {MOE_REASON_INPUT_FORMAT, "bf16 activations only"};
  if (p.hidden % 8 != 0)
    return {MOE_REASON_SHAPE,
            fmt::format("hidden={} must be a multiple of 8 (16-byte TMA rows)", p.hidden)};
  if (p.shared_intermediate > 0 && p.shared_intermediate != p.intermediate)
    return {MOE_REASON_SHARED,
            fmt::format("shared_intermediate={} must equal intermediate={} (one grouped GEMM)",
                        p.shared_intermediate, p.intermediate)};
  if (p.sink_experts > 0 && p.sink_intermediate != p.intermediate)
    return {MOE_REASON_SHARED, fmt::format("sink_intermediate={} must equal intermediate={}",
                                           p.sink_intermediate, p.intermediate)};
  if (p.sink_experts > 0 && p.activation == MOE_ACTIVATION_RELU2)
    return {MOE_REASON_SHARED, "silu_mul sink experts next to relu2 routed experts"};
  if (p.redundant_experts > 0)
    return {MOE_REASON_EP, "redundant experts (EPLB) are not implemented"};
  const DeviceInfo& d = device_info();
  if (!d.usable) return {MOE_REASON_ARCH, d.why_not};
  return {};
}

PrepareOptions layout_options(const Options& options) {
  PrepareOptions o;
  o.epilogue_tile_m = 0;  // the CUTLASS kernels read rows in order; no transposed epilogue
  o.w31 = true;
  o.gated_interleave = true;
  for (const auto& [key, value] : options) {
    if (key == "gemm_tiles" || key == "activation_epilogue") continue;  // read by DeviceLayer
    MOE_FAIL(MOE_STATUS_CONFIG_ERROR,
             "trtllm_style: unknown option '{}' (known: gemm_tiles, activation_epilogue)", key);
  }
  return o;
}

DeviceLayer::DeviceLayer(const moe_problem& problem, const moe_weights& w, const Options& options)
    : problem_(problem) {
  const moe_problem p = problem_.c();
  const Refusal r = check_support(p);
  MOE_CHECK(r.reason == MOE_REASON_NONE, MOE_STATUS_UNSUPPORTED, "trtllm_style: {}", r.message);
  check_weights(p, w);
  for (const auto& [key, value] : options) {
    if (key == "gemm_tiles") {
      MOE_CHECK(value == "auto" || value == "tokens" || value == "weights" || value == "wide",
                MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: gemm_tiles '{}' is not auto, tokens, weights or wide", value);
      tiles_option_ = value == "tokens"    ? std::optional(GemmTiles::kTokens)
                      : value == "weights" ? std::optional(GemmTiles::kWeights)
                      : value == "wide"    ? std::optional(GemmTiles::kWide)
                                           : std::nullopt;
    } else if (key == "activation_epilogue") {
      MOE_CHECK(value == "auto" || value == "fused" || value == "separate", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: activation_epilogue '{}' is not auto, fused or separate", value);
      fuse_option_ = value == "auto" ? std::nullopt : std::optional(value == "fused");
    }
  }
  const PrepareOptions opts = layout_options(options);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const int64_t h = p.hidden;
  const LayerShape routed = layer_shape(p);
  padded_i_ = plan_layout(routed, w.b13.data != nullptr, opts).padded_intermediate;
  n1_ = gated ? 2 * padded_i_ : padded_i_;
  groups_ = p.local_experts + p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);

  // Routed experts, then sinks, then the shared expert, each prepared the same way from the
  // caller's bytes (no host copy first) and uploaded straight from the prepared buffers, which
  // are freed before the next part: the host never holds more than one prepared copy.
  const size_t w13_group = size_t(n1_ * h * 2), w2_group = size_t(h * padded_i_ * 2);
  w13_ = DeviceBuffer(w13_group * size_t(groups_));
  w2_ = DeviceBuffer(w2_group * size_t(groups_));
  std::vector<float> b13, b2;
  int64_t group = 0;
  auto upload = [&](const PreparedLayer& part) {
    const LayerTensors& t = part.tensors;
    const int64_t count = t.w13.shape.batch;
    MOE_CHECK(t.w13.bytes.size() == w13_group * size_t(count) &&
                  t.w2.bytes.size() == w2_group * size_t(count) && group + count <= groups_,
              MOE_STATUS_INTERNAL,
              "trtllm_style: prepared {} groups of {} + {} bytes, expected {} + {}", count,
              t.w13.bytes.size(), t.w2.bytes.size(), w13_group, w2_group);
    w13_.upload(t.w13.bytes.data(), t.w13.bytes.size(), size_t(group) * w13_group);
    w2_.upload(t.w2.bytes.data(), t.w2.bytes.size(), size_t(group) * w2_group);
    if (t.b13.present()) {
      append_bias(b13, t.b13, "b13");
      append_bias(b2, t.b2, "b2");
    } else {
      b13.resize(b13.size() + size_t(count * n1_), 0.0f);
      b2.resize(b2.size() + size_t(count * h), 0.0f);
    }
    group += count;
  };
  {
    const PreparedLayer part = prepare(routed, w, opts);
    tag_ = part.tag;
    upload(part);
  }
  auto prepare_extra = [&](const moe_tensor& w13, const moe_tensor& w2, int64_t count) {
    const LayerShape s{MOE_FORMAT_BF16, gated, count, h, p.intermediate};
    LayerView v;
    v.w13 = bf16_view(w13, count, gated ? 2 * p.intermediate : p.intermediate, h);
    v.w2 = bf16_view(w2, count, h, p.intermediate);
    upload(prepare(s, v, opts));
  };
  if (p.sink_experts > 0) prepare_extra(w.sink_w13, w.sink_w2, p.sink_experts);
  if (p.shared_intermediate > 0) prepare_extra(w.shared_w13, w.shared_w2, 1);

  std::vector<const void*> p13, p2;
  for (int64_t g = 0; g < groups_; ++g) {
    p13.push_back(static_cast<const char*>(w13_.get()) + size_t(g) * w13_group);
    p2.push_back(static_cast<const char*>(w2_.get()) + size_t(g) * w2_group);
  }
  w13_ptrs_ = upload_vector(p13);
  w2_ptrs_ = upload_vector(p2);
  has_bias_ = p.expert_bias != 0;
  if (has_bias_) {
    b13_ = upload_vector(b13);
    b2_ = upload_vector(b2);
  }
  std::vector<int32_t> map(size_t(p.experts));
  for (int64_t e = 0; e < p.experts; ++e) map[e] = local_expert_id(p, e);
  local_map_ = upload_vector(map);
  // The grouped GEMMs' scratch depends on the groups and the device only: asked of CUTLASS once.
  gemm_ws_bytes_ = grouped_gemm_workspace_bytes(int(groups_), device_info().sm_count);
}

// Fewer than 32 rows per group on average: decode-like, weight tiles (swap AB). Under expert
// parallelism only local_experts/experts of the routed rows land here (uniform routing).
bool DeviceLayer::small_groups(int64_t tokens) const {
  const moe_problem p = problem_.c();
  const int64_t extra = p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
  const int64_t rows =
      tokens * p.top_k * p.local_experts / std::max<int64_t>(1, p.experts) + tokens * extra;
  return rows < 32 * groups_;
}

bool DeviceLayer::fuse_activation(int64_t tokens) const {
  if (fuse_option_) return *fuse_option_;
  // Measured on the H200 (bench/NOTES.md, v2): with few rows per group the fused epilogue saves
  // a launch and wins; with more, 128x256 tiles and a separate activation kernel beat the fused
  // 128x128 kernel by 12-19% (qwen3, mixtral at T >= 512).
  return small_groups(tokens);
}

GemmTiles DeviceLayer::tiles(int64_t tokens) const {
  if (tiles_option_) return *tiles_option_;
  return small_groups(tokens) ? GemmTiles::kWeights : GemmTiles::kWide;
}

// The workspace pieces in carve order: permutation, gathered rows, GEMM1 output (none when the
// activation is fused), activation, GEMM2 output, grouped-GEMM scratch (shared by both GEMMs:
// they run one after the other).
std::array<size_t, 6> DeviceLayer::pieces(int64_t tokens) const {
  const moe_problem p = problem_.c();
  const size_t rows = size_t(tokens * rows_per_token(p));
  return {moe::gpu::permutation_workspace_bytes(p, tokens),
          rows * p.hidden * 2,
          fuse_activation(tokens) ? 0 : rows * n1_ * 2,
          rows * padded_i_ * 2,
          rows * p.hidden * 2,
          gemm_ws_bytes_};
}

size_t DeviceLayer::workspace_size(int64_t tokens) const {
  size_t total = 0;
  for (size_t bytes : pieces(tokens)) total += gpu::workspace_round_up(bytes);
  return total;
}

DeviceLayer::Workspace DeviceLayer::carve(void* base, int64_t tokens) const {
  const moe_problem p = problem_.c();
  const std::array<size_t, 6> size = pieces(tokens);
  gpu::WorkspaceCarver c(base);
  auto take = [&](size_t bytes) { return c.take(bytes); };
  Workspace ws;
  ws.perm = moe::gpu::carve_permutation(p, tokens, take(size[0]));
  ws.perm.local_of_global = local_map_.as<int32_t>();
  ws.rows = take(size[1]);
  ws.gemm1 = take(size[2]);
  ws.act = take(size[3]);
  ws.gemm2 = take(size[4]);
  ws.gemm_ws_bytes = size[5];
  ws.gemm_ws = take(size[5]);
  return ws;
}

void DeviceLayer::run(const moe_run_args& a) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = a.hidden.shape[0];
  sdk::check_run_tensors(p, a, workspace_size(tokens));
  if (tokens == 0) return;
  auto stream = static_cast<cudaStream_t>(a.stream);
  const Workspace ws = carve(a.workspace, tokens);
  const int sm = device_info().sm_count;
  const GemmTiles tiles = this->tiles(tokens);
  const bool fuse = fuse_activation(tokens);

  moe::gpu::launch_permute(p, tokens, static_cast<const int32_t*>(a.topk_ids.data), ws.perm,
                           stream);
  moe::gpu::launch_gather_rows(ws.perm, p.hidden, static_cast<const uint16_t*>(a.hidden.data),
                               static_cast<uint16_t*>(ws.rows), stream);
  const int64_t* offsets = ws.perm.group_offsets;
  GroupedGemmArgs g1{int(groups_),     offsets,
                     int(n1_),         int(p.hidden),
                     ws.rows,          w13_ptrs_.as<const void*>(),
                     ws.act,           ws.gemm_ws,
                     ws.gemm_ws_bytes, sm};
  const int32_t bias_groups = has_bias_ ? int32_t(p.local_experts) : 0;
  const int32_t silu_begin = int32_t(p.local_experts);
  const int32_t silu_end = int32_t(p.local_experts + p.sink_experts);
  if (fuse) {
    ActivationEpilogueArgs e{has_bias_ ? b13_.as<float>() : nullptr, bias_groups, silu_begin,
                             silu_end};
    run_grouped_gemm_activation(tiles, p, g1, e, stream);
  } else {
    g1.out = ws.gemm1;
    run_grouped_gemm(tiles, g1, stream);
    moe::gpu::ActivationArgs act;
    act.gemm1 = static_cast<const uint16_t*>(ws.gemm1);
    act.out = static_cast<uint16_t*>(ws.act);
    act.intermediate = padded_i_;
    act.layout = moe::gpu::GateUpLayout::kInterleavedUpGate;
    act.bias = has_bias_ ? b13_.as<float>() : nullptr;
    act.bias_groups = bias_groups;
    act.row_group = ws.perm.row_group;
    act.silu_group_begin = silu_begin;
    act.silu_group_end = silu_end;
    act.rows = {ws.perm.max_rows, nullptr, offsets + groups_};
    moe::gpu::launch_activation(p, act, stream);
  }

  const GroupedGemmArgs g2{int(groups_),     offsets,
                           int(p.hidden),    int(padded_i_),
                           ws.act,           w2_ptrs_.as<const void*>(),
                           ws.gemm2,         ws.gemm_ws,
                           ws.gemm_ws_bytes, sm};
  run_grouped_gemm(tiles, g2, stream);

  moe::gpu::FinalizeArgs fin;
  fin.gemm2 = static_cast<const uint16_t*>(ws.gemm2);
  fin.topk_weights = static_cast<const float*>(a.topk_weights.data);
  fin.bias = has_bias_ ? b2_.as<float>() : nullptr;
  fin.out = static_cast<uint16_t*>(a.output.data);
  moe::gpu::launch_finalize(p, tokens, ws.perm, fin, stream);
}

}  // namespace moe::trtllm
