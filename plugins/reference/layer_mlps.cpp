#include "layer_mlps.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::reference {
namespace {

// Matrix `index` of a stack (index < 0: the tensor is a single matrix).
// Its scales are checked as every backend checks them (NaN, negative or zero f32 scales, the
// ue8m0 NaN code, NaN or negative e4m3 block scales): the oracle must not turn a corrupt tensor
// into NaN or sign-flipped weights that a comparison then blames on the backend.
MatrixRef matrix_ref(moe_format format, int64_t rows, int64_t cols, const moe_tensor& q,
                     const moe_tensor& scale, const moe_tensor& scale_2, int64_t index,
                     std::string_view scale_name) {
  const MatrixLayout m = matrix_layout(format, rows, cols);
  MatrixRef out{format, rows, cols, nullptr, nullptr, 1.0f, 0, 0};
  const size_t i = index < 0 ? 0 : size_t(index);
  out.q_bytes = size_t(rows * m.stored_cols) * dtype_size(m.dtype);
  out.q = static_cast<const uint8_t*>(q.data) + i * out.q_bytes;
  if (m.scale_dtype != MOE_DTYPE_INVALID) {
    out.scale_bytes = size_t(scale_count(m)) * dtype_size(m.scale_dtype);
    out.scales = static_cast<const uint8_t*>(scale.data) + i * out.scale_bytes;
    sdk::check_scale_values(
        out.scales, m.scale_dtype, scale_count(m),
        index < 0 ? std::string(scale_name) : fmt::format("{}[{}]", scale_name, i));
  }
  if (m.has_scale_2) {
    out.scale_2 = static_cast<const float*>(scale_2.data)[i];
    MOE_CHECK(out.scale_2 > 0 && std::isfinite(out.scale_2), MOE_STATUS_INVALID_ARGUMENT,
              "scale_2[{}]={} must be finite and > 0 (a missing or misrouted tensor?)", i,
              out.scale_2);
  }
  return out;
}

std::vector<double> bias_row(const moe_tensor& t, int64_t expert, int64_t n) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = expert * n + i;
    out[i] = t.dtype == MOE_DTYPE_F32 ? static_cast<const float*>(t.data)[at]
                                      : bf16_to_float(static_cast<const uint16_t*>(t.data)[at]);
  }
  return out;
}

}  // namespace

const char* mlp_kind_name(MlpKind kind) {
  switch (kind) {
    case MlpKind::kRouted:
      return "routed";
    case MlpKind::kShared:
      return "shared";
    case MlpKind::kSink:
      return "sink";
  }
  return "invalid";
}

MlpShape mlp_shape(const moe_problem& p, MlpKind kind) {
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const auto format = static_cast<moe_format>(p.format);
  switch (kind) {
    case MlpKind::kRouted:
      return {format, w13_rows(p), p.hidden, p.intermediate};
    case MlpKind::kShared:
      return {format, (gated ? 2 : 1) * p.shared_intermediate, p.hidden, p.shared_intermediate};
    case MlpKind::kSink:  // always silu_mul on bf16 weights
      return {MOE_FORMAT_BF16, 2 * p.sink_intermediate, p.hidden, p.sink_intermediate};
  }
  MOE_FAIL(MOE_STATUS_INTERNAL, "mlp kind {} is invalid", int(kind));
}

std::vector<uint8_t> MatrixRef::scales_as_used() const {
  if (scales == nullptr) return {};
  std::vector<uint8_t> out(scales, scales + scale_bytes);
  if (format != MOE_FORMAT_FP8_BLOCK) return out;
  // fp8_block scales below sdk::kBlockScaleFloor are raised to it, as every backend raises them
  // (docs/design.md §6): a tiny scale a checkpoint stores would otherwise dequantise differently
  // here and there.
  for (size_t at = 0; at + sizeof(float) <= out.size(); at += sizeof(float)) {
    float v;
    std::memcpy(&v, out.data() + at, sizeof v);
    if (v < sdk::kBlockScaleFloor) v = sdk::kBlockScaleFloor;
    std::memcpy(out.data() + at, &v, sizeof v);
  }
  return out;
}

void MatrixRef::dequantize(double* out) const {
  if (format != MOE_FORMAT_FP8_BLOCK || scales == nullptr)  // as stored: no copy
    return dequantize_matrix(format, q, scales, scale_2, rows, cols, out);
  const std::vector<uint8_t> s = scales_as_used();
  dequantize_matrix(format, q, s.data(), scale_2, rows, cols, out);
}

std::vector<MlpRef> layer_mlps(const moe_problem& p, const moe_weights& w) {
  check_weights(p, w);
  std::vector<MlpRef> out;
  const MlpShape r = mlp_shape(p, MlpKind::kRouted);
  for (int64_t e = 0; e < p.local_experts; ++e) {
    MlpRef m{
        {MlpKind::kRouted, e},
        matrix_ref(r.format, r.rows13, r.hidden, w.w13, w.w13_scale, w.w13_scale_2, e, "w13_scale"),
        matrix_ref(r.format, r.hidden, r.inter, w.w2, w.w2_scale, w.w2_scale_2, e, "w2_scale"),
        {},
        {}};
    if (p.expert_bias) {
      m.b13 = bias_row(w.b13, e, r.rows13);
      m.b2 = bias_row(w.b2, e, r.hidden);
    }
    out.push_back(std::move(m));
  }
  if (p.shared_intermediate > 0) {
    const MlpShape s = mlp_shape(p, MlpKind::kShared);
    out.push_back({{MlpKind::kShared, 0},
                   matrix_ref(s.format, s.rows13, s.hidden, w.shared_w13, w.shared_w13_scale,
                              w.shared_w13_scale_2, -1, "shared_w13_scale"),
                   matrix_ref(s.format, s.hidden, s.inter, w.shared_w2, w.shared_w2_scale,
                              w.shared_w2_scale_2, -1, "shared_w2_scale"),
                   {},
                   {}});
  }
  const MlpShape k = mlp_shape(p, MlpKind::kSink);
  const moe_tensor none{};
  for (int64_t s = 0; s < p.sink_experts; ++s) {
    out.push_back(
        {{MlpKind::kSink, s},
         matrix_ref(k.format, k.rows13, k.hidden, w.sink_w13, none, none, s, "sink_w13_scale"),
         matrix_ref(k.format, k.hidden, k.inter, w.sink_w2, none, none, s, "sink_w2_scale"),
         {},
         {}});
  }
  return out;
}

}  // namespace moe::reference
