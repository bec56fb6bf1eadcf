#include "moe_cuda/sink_experts.hpp"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/workspace.hpp"

namespace moe::gpu {
namespace {

// cuBLAS's workspace, carved from the caller's (a capture must not allocate): the 32 MiB NVIDIA
// recommends on Hopper, so no kernel is ruled out for want of room.
constexpr size_t kCublasWorkspace = size_t(32) << 20;

// cuBLAS, opened when the first layer with sinks is prepared (dlopen of the major this was built
// against), not linked: the plugins that hold sink experts load where cuBLAS is absent (the wheel
// leaves it out), and only a layer with sinks needs it, refused at prepare if it is not found.
struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  // The C entry (the header adds a C++ overload of the same name).
  cublasStatus_t (*gemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, cudaDataType, int,
                                         long long, const void*, cudaDataType, int, long long,
                                         const void*, void*, cudaDataType, int, long long, int,
                                         cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusString) status_string;
};

const Cublas& cublas() {
  // A failed open throws out of the initialiser, so the next layer tries again.
  static const Cublas api = [] {
    const std::string name = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    MOE_CHECK(lib != nullptr, MOE_STATUS_UNSUPPORTED,
              "sink experts run on cuBLAS, and {} could not be opened ({}): put cuBLAS {} on the "
              "loader's path",
              name, dlerror(), CUBLAS_VER_MAJOR);
    auto symbol = [&](const char* what) {
      void* f = dlsym(lib, what);
      MOE_CHECK(f != nullptr, MOE_STATUS_UNSUPPORTED, "sink experts: {} has no {}", name, what);
      return f;
    };
    Cublas c;
    c.create = reinterpret_cast<decltype(c.create)>(symbol("cublasCreate_v2"));
    c.destroy = reinterpret_cast<decltype(c.destroy)>(symbol("cublasDestroy_v2"));
    c.set_math_mode = reinterpret_cast<decltype(c.set_math_mode)>(symbol("cublasSetMathMode"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(symbol("cublasSetStream_v2"));
    c.set_workspace = reinterpret_cast<decltype(c.set_workspace)>(symbol("cublasSetWorkspace_v2"));
    c.gemm_strided_batched =
        reinterpret_cast<decltype(c.gemm_strided_batched)>(symbol("cublasGemmStridedBatchedEx"));
    c.status_string = reinterpret_cast<decltype(c.status_string)>(symbol("cublasGetStatusString"));
    return c;  // the library stays open for the process
  }();
  return api;
}

void check_cublas(cublasStatus_t s, const char* what) {
  MOE_CHECK(s == CUBLAS_STATUS_SUCCESS, MOE_STATUS_DEVICE_ERROR, "sink experts: {}: {}", what,
            cublas().status_string(s));
}

struct Pieces {
  uint16_t* gemm1;  // [S, T, 2Is] bf16
  uint16_t* act;    // [S, T, Is] bf16
  uint16_t* out;    // [S, T, H] bf16
  void* cublas;     // kCublasWorkspace
  size_t bytes;
};

Pieces carve(const moe_problem& p, int64_t tokens, void* base) {
  const size_t st = size_t(p.sink_experts * tokens), is = size_t(p.sink_intermediate);
  WorkspaceCarver c(base);
  Pieces w{};
  w.gemm1 = c.take<uint16_t>(st * 2 * is);
  w.act = c.take<uint16_t>(st * is);
  w.out = c.take<uint16_t>(st * size_t(p.hidden));
  w.cublas = c.take(kCublasWorkspace);
  w.bytes = c.used();
  return w;
}

}  // namespace

struct SinkExperts::Handle {
  cublasHandle_t h = nullptr;
  ~Handle() {
    if (h != nullptr) cublas().destroy(h);
  }
};

SinkExperts::SinkExperts(const moe_problem& p, const moe_weights& w)
    : p_(p), handle_(std::make_unique<Handle>()) {
  MOE_CHECK(p.sink_experts >= 1 && p.sink_intermediate >= 1, MOE_STATUS_INTERNAL,
            "sink experts built for a problem without them");
  const size_t s = size_t(p.sink_experts), is = size_t(p.sink_intermediate), h = size_t(p.hidden);
  w13_ = DeviceBuffer(s * 2 * is * h * 2);
  w2_ = DeviceBuffer(s * h * is * 2);
  w13_.upload(w.sink_w13.data, s * 2 * is * h * 2);
  w2_.upload(w.sink_w2.data, s * h * is * 2);
  check_cublas(cublas().create(&handle_->h), "cublasCreate");
  // No reduced-precision reductions: a split-K sum is added in f32, not in the bf16 output type.
  check_cublas(cublas().set_math_mode(
                   handle_->h, cublasMath_t(CUBLAS_DEFAULT_MATH |
                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
               "cublasSetMathMode");
}

SinkExperts::~SinkExperts() = default;

size_t SinkExperts::workspace_bytes(int64_t tokens) const {
  return tokens == 0 ? 0 : carve(p_, tokens, nullptr).bytes;
}

void SinkExperts::run(int64_t tokens, const uint16_t* hidden, const Permutation& perm,
                      uint16_t* gemm2, void* workspace, cudaStream_t stream) const {
  if (tokens == 0) return;
  const Pieces ws = carve(p_, tokens, workspace);
  const int s = int(p_.sink_experts), is = int(p_.sink_intermediate), h = int(p_.hidden),
            t = int(tokens);
  // Per sink, row-major Y[T, N] = X[T, K] W[N, K]^T: column-major Y^T = W^T(op T) X^T, m = N,
  // n = T; x_stride 0 gives every sink the same X.
  auto gemm_xwt = [&](int n, int k, const void* w, const void* x, int64_t x_stride, void* y,
                      const char* what) {
    const float one = 1.0f, zero = 0.0f;
    std::lock_guard<std::mutex> lock(mutex_);
    cublasHandle_t c = handle_->h;
    const Cublas& api = cublas();
    check_cublas(api.set_stream(c, stream), "cublasSetStream");
    check_cublas(api.set_workspace(c, ws.cublas, kCublasWorkspace), "cublasSetWorkspace");
    check_cublas(
        api.gemm_strided_batched(c, CUBLAS_OP_T, CUBLAS_OP_N, n, t, k, &one, w, CUDA_R_16BF, k,
                                 int64_t(n) * k, x, CUDA_R_16BF, k, x_stride, &zero, y, CUDA_R_16BF,
                                 n, int64_t(n) * t, s, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        what);
  };
  // GEMM1: [T, 2Is] = hidden [T, H] x w13_s [2Is, H]^T, the same hidden for each sink.
  gemm_xwt(2 * is, h, w13_.get(), hidden, 0, ws.gemm1, "sink GEMM1");
  // silu_mul on canonical [gate | up] rows, rounded once to bf16.
  moe_problem silu = p_;
  silu.activation = MOE_ACTIVATION_SILU_MUL;
  ActivationArgs act;
  act.gemm1 = ws.gemm1;
  act.out = ws.act;
  act.intermediate = is;
  act.layout = GateUpLayout::kConcatenated;
  act.rows = {int64_t(s) * tokens, nullptr, nullptr};
  launch_activation(silu, act, stream);
  // GEMM2: [T, H] = act_s [T, Is] x w2_s [H, Is]^T.
  gemm_xwt(h, is, w2_.get(), ws.act, int64_t(is) * t, ws.out, "sink GEMM2");
  launch_scatter_slot_rows(perm, tokens, p_.top_k, p_.sink_experts, p_.hidden, ws.out, gemm2,
                           stream);
}

}  // namespace moe::gpu
