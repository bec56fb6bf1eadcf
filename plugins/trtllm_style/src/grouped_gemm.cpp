#include "grouped_gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "grouped_gemm_launch.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::trtllm {
namespace {

using detail::Kernel;

Kernel plain_kernel(GemmTiles t) {
  return t == GemmTiles::kTokens ? Kernel::kTokens
         : t == GemmTiles::kWide ? Kernel::kWide
                                 : Kernel::kWeights;
}
Kernel act_kernel(GemmTiles t) {
  return t == GemmTiles::kWeights ? Kernel::kWeightsAct
         : t == GemmTiles::kWide  ? Kernel::kWideAct
                                  : Kernel::kTokensAct;
}

void launch(GemmTiles tiles, Kernel kernel, const GroupedGemmArgs& a,
            const kernels::FusedActivation& act, cudaStream_t stream) {
  const int align = a.fp8 ? 16 : 8;  // elements in 16 bytes: TMA strides
  MOE_CHECK(a.n % align == 0 && a.k % align == 0, MOE_STATUS_UNSUPPORTED,
            "grouped {} GEMM needs N={} and K={} to be multiples of {} (16-byte TMA strides)",
            a.fp8 ? "e4m3" : "bf16", a.n, a.k, align);
  MOE_CHECK(!a.fp8 || (a.fp8->act != nullptr && a.fp8->weight != nullptr),
            MOE_STATUS_INVALID_ARGUMENT,
            "grouped e4m3 GEMM without its activation or weight scales");
  MOE_CHECK(a.groups >= 1 && a.offsets && a.rows && a.weights && a.out && a.workspace,
            MOE_STATUS_INVALID_ARGUMENT, "grouped GEMM: groups={} or a null pointer", a.groups);
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  MOE_CHECK(aligned16(a.rows) && aligned16(a.out) && aligned16(a.workspace),
            MOE_STATUS_INVALID_ARGUMENT,
            "grouped GEMM: rows {}, out {} and workspace {} must be 16-byte aligned (TMA and "
            "vector stores)",
            a.rows, a.out, a.workspace);
  const size_t need = grouped_gemm_workspace_bytes(a.groups, a.sm_count);
  MOE_CHECK(a.workspace_bytes >= need, MOE_STATUS_CAPACITY_EXCEEDED,
            "grouped GEMM workspace of {} bytes is smaller than the {} needed", a.workspace_bytes,
            need);
  detail::GemmCall call{a.groups, a.offsets,   a.n,        a.k,    a.rows, a.weights,
                        a.out,    a.workspace, a.sm_count, stream, {}};
  if (a.fp8) call.scales = {a.fp8->act, a.fp8->act_shared, a.fp8->weight, a.fp8->shared_group};
  const detail::LaunchResult r =
      a.fp8 ? detail::launch_fp8(kernel, call, act) : detail::launch_bf16(kernel, call, act);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "grouped {} GEMM ({}{}, n={}, k={}) {}: {}", a.fp8 ? "e4m3" : "bf16",
            gemm_tiles_name(tiles), kernel == act_kernel(tiles) ? ", activation epilogue" : "", a.n,
            a.k, r.stage ? r.stage : "", r.message ? r.message : "");
}

}  // namespace

const char* gemm_tiles_name(GemmTiles t) {
  switch (t) {
    case GemmTiles::kTokens:
      return "token tiles 128x128";
    case GemmTiles::kWide:
      return "token tiles 128x256";
    case GemmTiles::kWeights:
      return "weight tiles 128x32 (swap AB)";
  }
  return "?";
}

size_t grouped_gemm_workspace_bytes(int groups, int sm_count) {
  size_t most = 0;
  for (Kernel k : {Kernel::kTokens, Kernel::kWide, Kernel::kWeights, Kernel::kTokensAct,
                   Kernel::kWideAct, Kernel::kWeightsAct})
    most = std::max({most, detail::kernel_workspace_bf16(k, groups, sm_count),
                     detail::kernel_workspace_fp8(k, groups, sm_count)});
  return most;
}

void run_grouped_gemm(GemmTiles tiles, const GroupedGemmArgs& args, cudaStream_t stream) {
  launch(tiles, plain_kernel(tiles), args, kernels::FusedActivation{}, stream);
}

void run_grouped_gemm_activation(GemmTiles tiles, const moe_problem& p, const GroupedGemmArgs& args,
                                 const ActivationEpilogueArgs& e, cudaStream_t stream) {
  if (!known_activation(p.activation))
    MOE_REFUSE(MOE_REASON_ACTIVATION, "activation={} is not one this build knows", p.activation);
  const auto activation = static_cast<moe_activation>(p.activation);
  const bool gated = is_gated(activation);
  MOE_CHECK(!gated || args.n % 16 == 0, MOE_STATUS_UNSUPPORTED,
            "the activation epilogue needs a gated N={} that is a multiple of 16 (its I={} output "
            "rows are stored in 16-byte chunks)",
            args.n, args.n / 2);
  MOE_CHECK(gated || e.silu_end <= e.silu_begin, MOE_STATUS_INVALID_ARGUMENT,
            "relu2 rows are N={} wide; silu_mul groups [{}, {}) would be gated", args.n,
            e.silu_begin, e.silu_end);
  MOE_CHECK(e.bias != nullptr || e.bias_groups == 0, MOE_STATUS_INVALID_ARGUMENT,
            "bias_groups={} without a bias", e.bias_groups);
  kernels::FusedActivation act{};
  act.act.activation = p.activation;
  act.act.gelu_tanh = p.gelu_tanh;
  act.act.alpha = p.activation_alpha;
  act.act.limit = p.activation_limit;
  act.bias = e.bias;
  act.bias_stride = args.n;
  act.bias_groups = e.bias != nullptr ? e.bias_groups : 0;
  act.silu_begin = e.silu_begin;
  act.silu_end = e.silu_end;
  act.out_ld = gated ? args.n / 2 : args.n;
  act.gated = gated ? 1 : 0;
  launch(tiles, act_kernel(tiles), args, act, stream);
}

}  // namespace moe::trtllm
