// The GPU oracle: the reference layer (plugins/reference) with its GEMMs in fp32 cuBLAS on
// device-resident dequantised weights, for checking model-sized problems the CPU reference cannot
// do in reasonable time. Its tensors are host memory, exactly as the reference's.
#include <fmt/format.h>

#include "host_backend.hpp"
#include "src/cublas_gemms.hpp"
#include "src/device.hpp"

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class GpuOracleBackend : public moe::reference::HostLayerBackend {
 public:
  static moe::sdk::BackendInfo info() {
    moe::sdk::BackendInfo i = every_capability();
    i.name = "gpu_oracle";
    i.version = "1.0";
    i.description =
        "GPU oracle: the reference layer with fp32 cuBLAS GEMMs on exactly dequantised weights; "
        "host-memory tensors";
    i.priority = 1;  // above the CPU reference only: an oracle, never a fast backend
    i.targets = "cuBLAS fp32";
    return i;
  }

  moe::sdk::Verdict supports(const moe_problem& p) const {
    if (const auto eplb = refuse_eplb(p, "the reference layer"); !eplb.ok()) return eplb;
    const auto& dev = moe::gpu_oracle::device_info();
    if (!dev.present)
      return moe::sdk::Verdict::no(MOE_REASON_ARCH,
                                   dev.why_not + ": the GPU oracle runs its GEMMs with cuBLAS");
    const size_t bytes = moe::gpu_oracle::weight_bytes(p);
    if (bytes > dev.total_memory)
      return moe::sdk::Verdict::no(
          MOE_REASON_SHAPE,
          fmt::format("the fp32 weights need {:.1f} GiB; device {} ({}) has "
                      "{:.1f} GiB",
                      bytes / kGiB, dev.device, dev.name, dev.total_memory / kGiB));
    return moe::sdk::Verdict::yes("every problem that fits in device memory");
  }

  std::unique_ptr<Layer> prepare(const moe::sdk::PrepareRequest& r) const {
    warn_ignored_options(r.options, "the GPU oracle");
    auto gemms = std::make_unique<moe::gpu_oracle::CublasGemms>(
        moe::reference::layer_mlps(r.problem, r.weights));
    return std::make_unique<Layer>(r.problem, r.weights, std::move(gemms));
  }
};

}  // namespace

MOE_EXPORT_BACKEND(GpuOracleBackend)
