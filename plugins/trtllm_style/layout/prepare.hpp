// prepare(): canonical expert weights (docs/design.md §3) -> the trtllm_style prepared layout, and
// unprepare(), its exact inverse (except the fp8 scale floor). The order follows TensorRT-LLM's
// weight loading for its trtllm-gen MoE kernels (and vLLM's/FlashInfer's preparation for them):
//
//   1. pad I -> P    first: every later step needs the padded row counts (2P rows must fill
//                    whole shuffle blocks), and padding is defined on canonical [gate; up].
//   2. w31 swap      on canonical halves: [gate; up] -> [up; gate], the order trtllm-gen's
//                    gated epilogue reads.
//   3. interleave    after w31, so rows pair as (up_i, gate_i) and one epilogue tile holds both
//                    operands of the activation. FlashInfer composes 3 and 4 into one row
//                    permutation (reorder-rows-for-gated-act, then shuffleMatrixA).
//   4. row shuffle   on the final logical row order, for weights, per-row scales and biases;
//                    w2 (rows = H) and b2 too.
//   5. 128x4 swizzle of mx*/nvfp4 scales, after the shuffle (shuffleMatrixSfA gathers scale rows
//                    in linear layout, then interleaves 128x4): the swizzle groups rows 32
//                    apart, so it must see the final row order.
//   6. BlockMajorK   last: a pure storage permutation along K of the already-ordered weights.
//   7. fp8 floor     elementwise on fp8_block scales; order-free, not inverted.
//
// NOTES: fp8_block. Its scales cover 128x128 blocks, so they cannot follow a one-row
// interleave: gated_interleave defaults to off for fp8_block (FlashInfer's trtllm-gen fp8
// block-scale MoE takes w13 shuffled and BlockMajorK but not row-interleaved) and forcing it on
// is refused. The w31 swap moves whole 128-row scale blocks and needs P % 128 == 0. The row
// shuffle leaves fp8_block scales alone: its 16- or 32-row blocks nest inside the 128-row scale
// blocks. fp8_tensor's per-expert scale never moves.
//
// NOTES: one pass. The steps above are the definition (prepare_steps.hpp runs them one by one,
// a copy of the layer each); prepare() composes them: steps 1-4 are row maps (destination row ->
// source row, or a zero row), composed into one map per tensor; padding along I of w2 zeroes the
// tail of each row; steps 5 and 6 only decide where a row's bytes are stored; step 7 runs on the
// result. So each prepared tensor is allocated once and written once, straight from the caller's
// canonical bytes (never copied first), in parallel over experts and row blocks (gather.hpp).
// A DeepSeek-V3 bf16 layer is 22.5 GB: the host holds the input and one prepared copy, no more.
#pragma once

#include <cstdint>
#include <optional>

#include "block_major.hpp"
#include "layer_tensors.hpp"
#include "layout_tag.hpp"
#include "row_shuffle.hpp"

namespace moe::trtllm {

struct PrepareOptions {
  int64_t epilogue_tile_m = kDefaultEpilogueTileM;  // 0 = rows not shuffled
  bool w31 = true;                                  // gated only
  std::optional<bool> gated_interleave;             // gated only; unset: on, off for fp8_block
  bool swizzle_scales = true;                       // mx*/nvfp4 scales to 128x4
  bool block_major_k = false;                       // weights to BlockMajorK
  int64_t block_k_bytes = kDefaultBlockKBytes;      // slab along K when block_major_k
  int64_t pad_multiple = 0;     // P = round_up(I, pad_multiple); 0 = intermediate_alignment()
  bool fp8_scale_floor = true;  // fp8_block scales below 1e-10 raised to 1e-10
};

// Prepared tensors keep their logical shapes with the padded intermediate P: w13 (E, R13(P),
// K13), w2 (E, H, P) (P/2 bytes for fp4), biases (E, rows, 1). Swizzled scales have the shape
// (E, round_up(rows, 128), round_up(cols, 4)) of their padded matrix, stored in 128x4 order;
// BlockMajorK weights are stored as (E, K/bk, M, bk). `tag` says which of these apply.
struct PreparedLayer {
  LayoutTag tag;
  LayerTensors tensors;
};

// Reads `canonical` (borrowed for the call) and allocates only the prepared tensors. Throws
// moe::Error naming the tensor and sizes when a step cannot take the shape (e.g. H not a multiple
// of the shuffle block, K not a multiple of block_k, fp8_block gated with I % 128).
PreparedLayer prepare(const LayerShape& shape, const LayerView& canonical,
                      const PrepareOptions& options = {});
PreparedLayer prepare(const LayerShape& shape, const LayerTensors& canonical,
                      const PrepareOptions& options = {});
// Validates the routed-expert tensors of `w` (view_canonical) and prepares them from the
// caller's bytes, without copying them first. Scale values are moved as bytes, not checked: the
// plugin checks them before (sdk::check_scale_values and friends), and the layout tests move
// random bytes through every step.
PreparedLayer prepare(const LayerShape& shape, const moe_weights& w,
                      const PrepareOptions& options = {});

// The tag prepare() would produce for this shape and options, without any weights (for
// `moe describe`), or the moe::Error prepare() would throw for the shape and options (an
// intermediate size the padding cannot take, ...). `bias`: whether b13/b2 will be given.
LayoutTag plan_layout(const LayerShape& shape, bool bias, const PrepareOptions& options = {});

// Inverts every step recorded in prepared.tag, back to the canonical bytes (fp8_block scales
// raised by the floor stay raised).
LayerTensors unprepare(const PreparedLayer& prepared);

}  // namespace moe::trtllm
