#include "expert_gemms.hpp"

#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::reference {
namespace {

// y[rows] = W[rows, cols] x[cols] (+ bias)
void gemv(const std::vector<double>& w, int64_t rows, int64_t cols, const double* x,
          const std::vector<double>& bias, double* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const double* wr = w.data() + r * cols;
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += wr[c] * x[c];
    y[r] = acc + (bias.empty() ? 0.0 : bias[r]);
  }
}

}  // namespace

QuantMatrix QuantMatrix::copy_of(const MatrixRef& m) {
  QuantMatrix out{m.format, m.rows, m.cols, {}, {}, m.scale_2};
  out.q.assign(m.q, m.q + m.q_bytes);
  out.scales = m.scales_as_used();
  return out;
}

std::vector<double> QuantMatrix::dequantize() const {
  std::vector<double> out(size_t(rows * cols));
  dequantize_matrix(format, q.data(), scales.data(), scale_2, rows, cols, out.data());
  return out;
}

Fp64Gemms::Fp64Gemms(const std::vector<MlpRef>& mlps) {
  for (const MlpRef& m : mlps) {
    auto& list = mlps_.of(m.id.kind);
    MOE_CHECK(m.id.index == int64_t(list.size()), MOE_STATUS_INTERNAL, "{} mlp {} out of order",
              mlp_kind_name(m.id.kind), m.id.index);
    list.push_back({QuantMatrix::copy_of(m.w13), QuantMatrix::copy_of(m.w2), m.b13, m.b2});
  }
}

void Fp64Gemms::gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y) const {
  const Mlp& m = mlps_[id];
  const QuantMatrix& w = g == Gemm::kW13 ? m.w13 : m.w2;
  const std::vector<double>& bias = g == Gemm::kW13 ? m.b13 : m.b2;
  const std::vector<double> dense = w.dequantize();
  for (int64_t i = 0; i < n; ++i) gemv(dense, w.rows, w.cols, x + i * w.cols, bias, y + i * w.rows);
}

}  // namespace moe::reference
