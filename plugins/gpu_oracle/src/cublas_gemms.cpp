#include "cublas_gemms.hpp"

#include <algorithm>
#include <climits>
#include <thread>

#include "moe/sdk/error.hpp"
#include "moe/sdk/parallel_for.hpp"

namespace moe::gpu_oracle {
namespace {

using reference::Gemm;
using reference::MlpId;
using reference::MlpKind;
using reference::MlpRef;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Host memory the dequantising threads may hold at once (12 bytes per element in flight).
constexpr size_t kHostBudget = size_t(8) << 30;

int checked_int(int64_t v, const char* what) {
  MOE_CHECK(v >= 0 && v <= INT_MAX, MOE_STATUS_SHAPE_MISMATCH, "{}={} exceeds cuBLAS's int range",
            what, v);
  return int(v);
}

// Exact dequantisation (formats.hpp), one rounding to fp32, a synchronous upload. The host
// copies are freed on return, so the peak is the threads' matrices, not the layer.
void upload_matrix(int device, const reference::MatrixRef& m, DeviceBuffer& out) {
  const gpu::DeviceScope on(device);  // the caller's thread keeps its own current device
  std::vector<float> w(size_t(m.rows * m.cols));
  {
    std::vector<double> dense(w.size());
    m.dequantize(dense.data());
    std::transform(dense.begin(), dense.end(), w.begin(), [](double v) { return float(v); });
  }
  out.reserve(w.size() * sizeof(float));
  check_cuda(
      cudaMemcpy(out.as<float>(), w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice),
      "cudaMemcpy (weights to the device)");
}

}  // namespace

size_t weight_bytes(const moe_problem& p) {
  size_t elements = 0;
  for (auto [kind, count] : {std::pair{MlpKind::kRouted, p.local_experts},
                             {MlpKind::kShared, int64_t(p.shared_intermediate > 0)},
                             {MlpKind::kSink, p.sink_experts}}) {
    const reference::MlpShape s = reference::mlp_shape(p, kind);
    elements += size_t(count) * size_t(s.rows13 * s.hidden + s.hidden * s.inter);
  }
  return elements * sizeof(float);
}

CublasGemms::CublasGemms(const std::vector<MlpRef>& mlps) {
  check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_.reset(stream);
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  handle_.reset(handle);
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  // Pedantic: fp32 arithmetic only (no TF32 or reduced-precision tensor-core paths).
  check_cublas(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");

  // Room first: a layer that cannot fit fails before minutes of dequantisation.
  size_t needed = 0, largest = 0;
  for (const MlpRef& m : mlps) {
    for (const reference::MatrixRef* w : {&m.w13, &m.w2}) {
      const size_t n = size_t(w->rows * w->cols);
      needed += n * sizeof(float);
      largest = std::max(largest, n);
    }
  }
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  MOE_CHECK(needed <= free_bytes, MOE_STATUS_OUT_OF_MEMORY,
            "the GPU oracle keeps the weights in fp32: {:.2f} GiB needed, {:.2f} GiB of {:.2f} "
            "GiB free on device {}",
            needed / kGiB, free_bytes / kGiB, total_bytes / kGiB, device_);

  std::vector<const reference::MatrixRef*> sources;
  std::vector<Matrix*> targets;
  for (const MlpRef& m : mlps) {
    auto& list = mlps_.of(m.id.kind);
    MOE_CHECK(m.id.index == int64_t(list.size()), MOE_STATUS_INTERNAL, "{} mlp {} out of order",
              reference::mlp_kind_name(m.id.kind), m.id.index);
    list.push_back({{{}, m.w13.rows, m.w13.cols, m.b13}, {{}, m.w2.rows, m.w2.cols, m.b2}});
  }
  for (const MlpRef& m : mlps) {  // after every push_back: the addresses are final
    Mlp& slot = mlps_.of(m.id.kind)[size_t(m.id.index)];
    sources.insert(sources.end(), {&m.w13, &m.w2});
    targets.insert(targets.end(), {&slot.w13, &slot.w2});
  }
  const int64_t threads = std::max<int64_t>(1, kHostBudget / std::max<size_t>(1, 12 * largest));
  moe::parallel_for(
      int64_t(sources.size()),
      [&](int64_t i) { upload_matrix(device_, *sources[i], targets[i]->w); }, threads);
}

void CublasGemms::gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y) const {
  const Mlp& m = mlps_[id];
  const Matrix& w = g == Gemm::kW13 ? m.w13 : m.w2;
  const int rows = checked_int(w.rows, "rows"), cols = checked_int(w.cols, "cols");
  const int count = checked_int(n, "gathered rows");
  if (count == 0) return;
  std::vector<float> xf(size_t(n * cols)), yf(size_t(n * rows));  // (n, cols), (n, rows)
  std::transform(x, x + xf.size(), xf.begin(), [](double v) { return float(v); });
  {
    std::lock_guard lock(mutex_);
    const gpu::DeviceScope on(device_);  // the caller's thread keeps its own current device
    x_.reserve(xf.size() * sizeof(float));
    y_.reserve(yf.size() * sizeof(float));
    cudaStream_t stream = stream_.get();
    check_cuda(cudaMemcpyAsync(x_.as<float>(), xf.data(), xf.size() * sizeof(float),
                               cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync (rows to the device)");
    // Row-major y(n, rows) = x(n, cols) w(rows, cols)^T is, column-major,
    // y^T(rows, n) = op_T(w^T(cols, rows)) x^T(cols, n).
    const float one = 1.0f, zero = 0.0f;
    check_cublas(
        cublasSgemm(handle_.get(), CUBLAS_OP_T, CUBLAS_OP_N, rows, count, cols, &one,
                    w.w.as<float>(), cols, x_.as<float>(), cols, &zero, y_.as<float>(), rows),
        "cublasSgemm");
    check_cuda(cudaMemcpyAsync(yf.data(), y_.as<float>(), yf.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (result to the host)");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r)
      y[i * rows + r] = double(yf[i * rows + r]) + (w.bias.empty() ? 0.0 : w.bias[r]);
}

}  // namespace moe::gpu_oracle
