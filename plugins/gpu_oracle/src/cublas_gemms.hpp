// The GPU oracle's GEMMs: every expert matrix dequantised exactly on the host (as the reference
// does), rounded once to fp32 and kept on the device; each call uploads the gathered rows in
// fp32, runs one cuBLAS SGEMM (pedantic math: fp32 FMA, no TF32) and brings the result back as
// doubles, + bias in double. Only the GEMMs' rounding differs from the reference.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "device.hpp"
#include "expert_gemms.hpp"

namespace moe::gpu_oracle {

// Device bytes of a problem's fp32 weights.
size_t weight_bytes(const moe_problem& p);

class CublasGemms final : public reference::ExpertGemms {
 public:
  // Uploads every MLP of `mlps` (layer_mlps) to the current device, dequantising on up to
  // hardware_concurrency host threads with a bounded amount of host memory in flight.
  explicit CublasGemms(const std::vector<reference::MlpRef>& mlps);

  void gemm(reference::MlpId id, reference::Gemm g, const double* x, int64_t n,
            double* y) const override;

 private:
  struct Matrix {
    DeviceBuffer w;  // (rows, cols) fp32, row-major
    int64_t rows = 0, cols = 0;
    std::vector<double> bias;  // [rows] or empty
  };
  struct Mlp {
    Matrix w13, w2;
  };

  struct StreamDeleter {
    void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
  };
  struct HandleDeleter {
    void operator()(cublasHandle_t h) const noexcept { cublasDestroy(h); }
  };

  int device_ = 0;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<cublasContext, HandleDeleter> handle_;
  reference::PerMlp<Mlp> mlps_;
  // One GEMM at a time (the layer calls from several threads): the handle, stream and scratch
  // are shared. Host-side conversions run outside the lock.
  mutable std::mutex mutex_;
  mutable DeviceBuffer x_, y_;  // grow-only scratch: (n, in) and (n, out) fp32
};

}  // namespace moe::gpu_oracle
