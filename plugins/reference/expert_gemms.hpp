// The GEMMs of the expert MLPs: the one part of the reference layer an oracle may compute another
// way. Everything around them (activation quantisation, activations, sinks, the shared expert,
// the combine, the output dtype) is reference_layer.cpp's, shared by every implementation.
#pragma once

#include <cstdint>
#include <vector>

#include "layer_mlps.hpp"

namespace moe::reference {

enum class Gemm {
  kW13,  // GEMM1: y[n, rows13] = x[n, hidden] w13^T + b13
  kW2,   // GEMM2: y[n, hidden] = x[n, inter] w2^T + b2
};

class ExpertGemms {
 public:
  virtual ~ExpertGemms() = default;
  // y[n, out] = x[n, in] W^T (+ bias) for GEMM `g` of MLP `id` (shapes per mlp_shape); x and y
  // are n contiguous rows gathered by the caller. Called concurrently for different MLPs.
  virtual void gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y /* out */) const = 0;
};

// A value per MLP of a layer, found by MlpId.
template <class T>
struct PerMlp {
  std::vector<T> routed, shared, sink;

  std::vector<T>& of(MlpKind k) {
    return k == MlpKind::kRouted ? routed : k == MlpKind::kShared ? shared : sink;
  }
  const std::vector<T>& of(MlpKind k) const { return const_cast<PerMlp*>(this)->of(k); }
  const T& operator[](MlpId id) const { return of(id.kind).at(size_t(id.index)); }
};

// One matrix copied out of the caller's tensors.
struct QuantMatrix {
  moe_format format = MOE_FORMAT_BF16;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> q;       // elements as stored (bf16 bits, e4m3, packed e2m1)
  std::vector<uint8_t> scales;  // scale bytes as stored (f32, ue8m0 or e4m3)
  float scale_2 = 1.0f;         // nvfp4 global scale

  static QuantMatrix copy_of(const MatrixRef& m);
  std::vector<double> dequantize() const;  // [rows, cols]
};

// The reference's GEMMs: canonical weights kept as given, dequantised exactly on every call,
// each output element one fp64 sum over the input row in order, then + bias.
class Fp64Gemms final : public ExpertGemms {
 public:
  explicit Fp64Gemms(const std::vector<MlpRef>& mlps);
  void gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y) const override;

 private:
  struct Mlp {
    QuantMatrix w13, w2;
    std::vector<double> b13, b2;
  };
  PerMlp<Mlp> mlps_;
};

}  // namespace moe::reference
