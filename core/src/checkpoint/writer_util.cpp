#include "writer_util.hpp"

#include <cstring>

#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::detail {

Layout layout_of(const moe_problem& p) {
  return {static_cast<moe_format>(p.format), p.experts, p.intermediate, p.hidden,
          is_gated(static_cast<moe_activation>(p.activation))};
}

void put_projection(std::vector<NamedTensor>& out, const std::string& base, const Matrix& m) {
  // Checkpoints have no fp4 dtype: packed e2m1 pairs are stored as bytes.
  HostTensor q = m.q;
  if (q.dtype() == MOE_DTYPE_E2M1X2) q.reinterpret(MOE_DTYPE_U8);
  out.push_back({base + ".weight", q});
  const FormatSpec& f = format_spec(m.format);
  if (f.scale == MOE_DTYPE_INVALID) return;
  HostTensor scale = m.scale;
  if (f.checkpoint_scale_dtype != f.scale) scale.reinterpret(f.checkpoint_scale_dtype);
  out.push_back({base + "." + f.checkpoint_scale_names[0], scale});
  if (f.scale_2) {
    HostTensor s2(MOE_DTYPE_F32, {1});
    s2.data<float>()[0] = m.scale_2;
    out.push_back({base + "." + f.checkpoint_scale_2_name, s2});
  }
}

HostTensor stack(const std::vector<HostTensor>& parts) {
  std::vector<int64_t> shape = parts[0].shape();
  shape.insert(shape.begin(), int64_t(parts.size()));
  HostTensor out(parts[0].dtype(), shape);
  for (size_t i = 0; i < parts.size(); ++i)
    std::memcpy(static_cast<uint8_t*>(out.raw()) + i * parts[i].bytes(), parts[i].raw(),
                parts[i].bytes());
  return out;
}

std::vector<float> bias_row(const HostTensor& t, int64_t e, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = t.dtype() == MOE_DTYPE_F32 ? t.data<float>()[e * n + i]
                                        : bf16_to_float(t.data<uint16_t>()[e * n + i]);
  return out;
}

HostTensor interleave_vector(const float* a, const float* b, int64_t n) {
  HostTensor out(MOE_DTYPE_F32, {2 * n});
  for (int64_t i = 0; i < n; ++i) {
    out.data<float>()[2 * i] = a[i];
    out.data<float>()[2 * i + 1] = b[i];
  }
  return out;
}

Matrix interleaved_halves(moe_format format, int64_t half_rows, int64_t cols, const HostTensor& q,
                          const HostTensor& scale, const HostTensor& scale_2, int64_t index,
                          const std::string& what) {
  const Matrix m = matrix_at(format, 2 * half_rows, cols, q, scale, scale_2, index);
  return interleave_rows(slice_rows(m, 0, half_rows, what),
                         slice_rows(m, half_rows, half_rows, what), what);
}

Matrix interleaved_w13(const LayerWeights& w, const Layout& g, int64_t e) {
  return interleaved_halves(g.format, g.inter, g.hidden, w.w13, w.w13_scale, w.w13_scale_2, e,
                            "w13");
}

HostTensor interleaved_b13(const LayerWeights& w, const Layout& g, int64_t e) {
  const std::vector<float> row = bias_row(w.b13, e, 2 * g.inter);
  return interleave_vector(row.data(), row.data() + g.inter, g.inter);
}

}  // namespace moe::detail
