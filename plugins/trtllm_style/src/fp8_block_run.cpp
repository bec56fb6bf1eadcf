// One fp8_block layer run on trtllm_style (docs/design.md §6): permute -> quantise the hidden
// states per token per 128 channels and gather them -> blockwise GEMM1 (f32 out) -> activation on
// the w31 halves [up | gate], quantised per 128 -> blockwise GEMM2 -> (sinks apart, bf16) ->
// weighted combine. The GEMMs
// are common_cuda's CUTLASS blockwise ones (moe_cuda/fp8_block_gemm.hpp), the same compiled kernels
// deepgemm_style runs; what differs here is the TensorRT-LLM layout they read (padded I, w31,
// scales floored) and the tile policy.
#include "layer_workspace.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/fp8_block_gemm.hpp"
#include "moe_cuda/quantize.hpp"
#include "trtllm_layer.hpp"

namespace moe::trtllm {

void DeviceLayer::run_fp8_block(const moe_run_args& a, const Workspace& ws,
                                cudaStream_t stream) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = a.hidden.shape[0];
  const gpu::Permutation& perm = ws.perm;
  moe::gpu::launch_permute(p, tokens, static_cast<const int32_t*>(a.topk_ids.data), perm, stream);
  const int64_t r = perm.max_rows;
  const gpu::RowRange rows{r, nullptr, perm.group_offsets + groups_};
  // The sinks run apart (bf16 by cuBLAS, after GEMM2): the gather, the GEMMs and the activation
  // skip their groups (an empty range without sinks).
  const GroupRange sinks = sink_groups();
  gpu::launch_gather_quantize_fp8_1x128(
      static_cast<const uint16_t*>(a.hidden.data), p.hidden, perm.row_token, rows,
      static_cast<uint8_t*>(ws.rows), {ws.row_scales, 1, r}, stream,
      sinks_ ? gpu::GroupSkip{perm.row_group, sinks.begin, sinks.end} : gpu::GroupSkip{},
      {ws.staging, tokens});

  const gpu::Fp8BlockTiles tiles = this->tiles(tokens) == GemmTiles::kWeights
                                       ? gpu::Fp8BlockTiles::kWeights
                                       : gpu::Fp8BlockTiles::kTokens;
  gpu::Fp8BlockGemmArgs g;
  g.groups = int(groups_);
  g.offsets = perm.group_offsets;
  g.scale_ld = r;
  g.workspace = ws.gemm_ws;
  g.workspace_bytes = ws.gemm_ws_bytes;
  g.sm_count = device_info().sm_count;
  g.skip_begin = sinks.begin;
  g.skip_end = sinks.end;

  gpu::Fp8BlockGemmArgs g1 = g;
  g1.n = int(n1_);
  g1.k = int(p.hidden);
  g1.rows = static_cast<const uint8_t*>(ws.rows);
  g1.row_scales = ws.row_scales;
  g1.weights = w13_ptrs_.as<const void*>();
  g1.w_scales = s13_ptrs_.as<const float*>();
  g1.out = ws.gemm1;
  g1.f32_out = true;  // quantised next: no bf16 rounding before it, as the reference
  gpu::run_fp8_block_grouped_gemm(tiles, g1, stream);

  gpu::ActivationArgs act;
  act.gemm1_f32 = static_cast<const float*>(ws.gemm1);
  act.intermediate = padded_i_;
  act.layout = tag_.w31 ? gpu::GateUpLayout::kConcatenatedUpGate : gpu::GateUpLayout::kConcatenated;
  act.rows = rows;
  act.bias = has_bias_ ? b13_.as<float>() : nullptr;  // routed groups only
  act.bias_groups = has_bias_ ? int32_t(p.local_experts) : 0;
  act.row_group = perm.row_group;
  act.out_fp8 = static_cast<uint8_t*>(ws.act);
  act.out_scales = {ws.act_scales, 1, r};
  act.skip_group_begin = sinks.begin;
  act.skip_group_end = sinks.end;
  gpu::launch_activation(p, act, stream);

  gpu::Fp8BlockGemmArgs g2 = g;
  g2.n = int(p.hidden);
  g2.k = int(padded_i_);
  g2.rows = static_cast<const uint8_t*>(ws.act);
  g2.row_scales = ws.act_scales;
  g2.weights = w2_ptrs_.as<const void*>();
  g2.w_scales = s2_ptrs_.as<const float*>();
  g2.out = ws.gemm2;
  gpu::run_fp8_block_grouped_gemm(tiles, g2, stream);
  // The sinks in bf16 on the hidden states, each result into its sink slot's GEMM2 row (the GEMMs'
  // scratch is free again), weighed by the combine like any other slot.
  if (sinks_)
    sinks_->run(tokens, static_cast<const uint16_t*>(a.hidden.data), perm,
                static_cast<uint16_t*>(ws.gemm2), ws.gemm_ws, stream);

  gpu::FinalizeArgs fin;
  fin.gemm2 = static_cast<const uint16_t*>(ws.gemm2);
  fin.topk_weights = static_cast<const float*>(a.topk_weights.data);
  fin.bias = has_bias_ ? b2_.as<float>() : nullptr;
  fin.out = static_cast<uint16_t*>(a.output.data);
  fin.accumulate = sdk::run_accumulates(a);
  gpu::launch_finalize(p, tokens, perm, fin, stream);
}

}  // namespace moe::trtllm
