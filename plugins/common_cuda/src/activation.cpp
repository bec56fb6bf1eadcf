// launch_activation: checks and kernel arguments.
#include "moe_cuda/activation.hpp"

#include "launch.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::gpu {

void launch_activation(const moe_problem& p, const ActivationArgs& a, cudaStream_t stream) {
  constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;
  if (!known_activation(p.activation))
    MOE_REFUSE(MOE_REASON_ACTIVATION, "activation={} is not one this build knows", p.activation);
  const auto act = static_cast<moe_activation>(p.activation);
  const int32_t layout = static_cast<int32_t>(a.layout);
  MOE_CHECK(layout >= 0 && layout <= 3, kInvalid, "gate/up layout={} is not 0, 1, 2 or 3", layout);
  MOE_CHECK(a.intermediate >= 1, kInvalid, "intermediate={} must be >= 1", a.intermediate);
  const bool has_silu_groups = a.silu_group_end > a.silu_group_begin;
  MOE_CHECK(act != MOE_ACTIVATION_RELU2 || !has_silu_groups, kInvalid,
            "relu2 rows are I={} wide but silu_mul rows (groups [{}, {})) are gated: run the sink "
            "rows in a call of their own",
            a.intermediate, a.silu_group_begin, a.silu_group_end);
  const bool has_skip = a.skip_group_end > a.skip_group_begin;
  MOE_CHECK(a.row_group != nullptr || (a.bias == nullptr && !has_silu_groups && !has_skip),
            kInvalid, "row_group is needed to find each row's bias, silu_mul or skipped group");
  check_row_range("activation", a.rows, true);
  if (a.rows.max_rows == 0) return;
  const bool quantise = a.out_fp8 != nullptr;
  MOE_CHECK((a.gemm1 != nullptr || (quantise && a.gemm1_f32 != nullptr)) &&
                (a.out != nullptr || quantise),
            kInvalid, "activation: gemm1 (or gemm1_f32) and out (or out_fp8) must be given");
  MOE_CHECK(a.gemm1_f32 == nullptr || quantise, kInvalid,
            "activation: fp32 GEMM1 rows (gemm1_f32) need the quantised output (out_fp8)");
  const int64_t n1 = is_gated(act) ? 2 * a.intermediate : a.intermediate;
  const int64_t in_stride = a.gemm1_stride != 0 ? a.gemm1_stride : n1;
  const int64_t out_stride = a.out_stride != 0 ? a.out_stride : a.intermediate;
  const int64_t bias_stride = a.bias_stride != 0 ? a.bias_stride : n1;
  MOE_CHECK(in_stride >= n1 && out_stride >= a.intermediate && bias_stride >= n1, kInvalid,
            "strides gemm1={} out={} bias={} are below the row widths {}, {}, {}", in_stride,
            out_stride, bias_stride, n1, a.intermediate, n1);

  kernels::ActivationParams k{};
  k.gemm1 = a.gemm1;
  k.out = a.out;
  k.gemm1_stride = in_stride;
  k.out_stride = out_stride;
  k.intermediate = a.intermediate;
  k.bias = a.bias;
  k.bias_stride = bias_stride;
  k.bias_groups = a.bias_groups;
  k.row_group = a.row_group;
  k.silu_begin = a.silu_group_begin;
  k.silu_end = a.silu_group_end;
  k.activation = p.activation;
  k.gelu_tanh = p.gelu_tanh;
  k.alpha = p.activation_alpha;
  k.limit = p.activation_limit;
  k.layout = layout;
  k.max_rows = a.rows.max_rows;
  k.row_begin = a.rows.begin;
  k.row_end = a.rows.end;
  k.row_list = a.rows.list;
  k.row_list_count = a.rows.list_count;
  k.skip_begin = a.skip_group_begin;
  k.skip_end = a.skip_group_end;
  if (quantise) {
    MOE_CHECK(a.intermediate % 128 == 0, MOE_STATUS_UNSUPPORTED,
              "activation with 1x128 quantised output needs I={} to be a multiple of 128",
              a.intermediate);
    MOE_CHECK(in_stride % 8 == 0 && out_stride % 8 == 0 &&
                  detail::aligned(16, a.gemm1, a.gemm1_f32) && detail::aligned(8, a.out_fp8),
              kInvalid,
              "activation with quantised output needs strides gemm1={} and out={} that are "
              "multiples of 8, a 16-byte aligned gemm1 and an 8-byte aligned out_fp8",
              in_stride, out_stride);
    MOE_CHECK(a.out_scales.data != nullptr, kInvalid,
              "activation with quantised output: out_scales.data must be given");
    k.gemm1_f32 = a.gemm1_f32;
    k.out_fp8 = a.out_fp8;
    k.out_scales = a.out_scales.data;
    k.scale_row_stride =
        a.out_scales.row_stride != 0 ? a.out_scales.row_stride : a.intermediate / 128;
    k.scale_block_stride = a.out_scales.block_stride;
    detail::launch_activation_quantize_kernel(k, stream);
    return;
  }
  const bool vec = a.intermediate % 8 == 0 && in_stride % 8 == 0 && out_stride % 8 == 0 &&
                   detail::aligned(16, a.gemm1, a.out);
  detail::launch_activation_kernel(k, vec, stream);
}

}  // namespace moe::gpu
