#include "prepare_steps.hpp"

#include <fmt/format.h>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "padding.hpp"
#include "row_ops.hpp"
#include "scale_floor.hpp"
#include "scale_swizzle.hpp"

namespace moe::trtllm {

namespace {

// Runs `fn` on a present tensor's bytes; errors are prefixed with the tensor's name.
template <class Fn>
void apply(LayoutTensor& t, const char* name, Fn&& fn) {
  if (!t.present()) return;
  try {
    t.bytes = fn(ByteSpan(t.bytes), t.shape);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", name, e.what()));
  }
}

// A row permutation of w13 moves everything whose rows follow w13's: the weights, b13 and the
// per-row scales of mx*/nvfp4. fp8_block's 128-row scale blocks move only in the w31 swap.
template <class Fn>
void on_w13_rows(LayerTensors& t, moe_format f, Fn&& fn) {
  apply(t.w13, "w13", fn);
  apply(t.b13, "b13", fn);
  if (has_row_scales(f)) apply(t.w13_scale, "w13_scale", fn);
}

// Same for w2's rows (H): the weights, b2 and per-row scales.
template <class Fn>
void on_w2_rows(LayerTensors& t, moe_format f, Fn&& fn) {
  apply(t.w2, "w2", fn);
  apply(t.b2, "b2", fn);
  if (has_row_scales(f)) apply(t.w2_scale, "w2_scale", fn);
}

}  // namespace

PreparedLayer prepare_step_by_step(const LayerShape& s, const LayerTensors& canonical,
                                   const PrepareOptions& o) {
  const LayoutTag tag = plan_layout(s, canonical.b13.present() || canonical.b2.present(), o);
  LayerTensors t = pad_intermediate(s, canonical, tag.padded_intermediate);
  const bool fp8b = s.format == MOE_FORMAT_FP8_BLOCK;

  if (tag.w31) {
    on_w13_rows(t, s.format, swap_halves);
    if (fp8b) apply(t.w13_scale, "w13_scale", swap_halves);  // whole 128-row blocks
  }
  if (tag.gated_interleave) on_w13_rows(t, s.format, interleave_gated_rows);
  if (tag.shuffle_block > 0) {
    auto shuffle = [tile_m = tag.epilogue_tile_m](ByteSpan in, const MatrixStack& m) {
      return shuffle_rows(in, m, tile_m);
    };
    on_w13_rows(t, s.format, shuffle);
    on_w2_rows(t, s.format, shuffle);
  }
  if (tag.scales_swizzled) {
    apply(t.w13_scale, "w13_scale", swizzle_scales_128x4);
    apply(t.w2_scale, "w2_scale", swizzle_scales_128x4);
    t.w13_scale.shape = swizzled_shape(t.w13_scale.shape);
    t.w2_scale.shape = swizzled_shape(t.w2_scale.shape);
  }
  if (tag.block_k_bytes > 0) {
    auto to_block = [&tag](ByteSpan in, const MatrixStack& m) {
      return to_block_major_k(in, m, tag.block_k_bytes / m.elem_bytes);
    };
    apply(t.w13, "w13", to_block);
    apply(t.w2, "w2", to_block);
  }
  if (tag.fp8_scale_floor) {
    raise_small_scales(t.w13_scale.bytes);
    raise_small_scales(t.w2_scale.bytes);
  }
  return {tag, std::move(t)};
}

LayerTensors unprepare(const PreparedLayer& prepared) {
  const LayoutTag& tag = prepared.tag;
  const LayerShape& s = tag.shape;
  LayerTensors t = prepared.tensors;

  // Every prepared tensor must have the shape prepare() gives it.
  const LayerTensors canonical_padded = canonical_shapes(s, tag.padded_intermediate);
  LayerTensors expected = canonical_padded;
  if (tag.scales_swizzled) {
    expected.w13_scale.shape = swizzled_shape(expected.w13_scale.shape);
    expected.w2_scale.shape = swizzled_shape(expected.w2_scale.shape);
  }
  check_layout_tensor(t.w13, expected.w13, "w13");
  check_layout_tensor(t.w13_scale, expected.w13_scale, "w13_scale");
  check_layout_tensor(t.w2, expected.w2, "w2");
  check_layout_tensor(t.w2_scale, expected.w2_scale, "w2_scale");

  if (tag.block_k_bytes > 0) {
    auto from_block = [&tag](ByteSpan in, const MatrixStack& m) {
      return from_block_major_k(in, m, tag.block_k_bytes / m.elem_bytes);
    };
    apply(t.w13, "w13", from_block);
    apply(t.w2, "w2", from_block);
  }
  if (tag.scales_swizzled) {
    t.w13_scale.shape = canonical_padded.w13_scale.shape;
    t.w2_scale.shape = canonical_padded.w2_scale.shape;
    apply(t.w13_scale, "w13_scale", unswizzle_scales_128x4);
    apply(t.w2_scale, "w2_scale", unswizzle_scales_128x4);
  }
  if (tag.shuffle_block > 0) {
    auto unshuffle = [tile_m = tag.epilogue_tile_m](ByteSpan in, const MatrixStack& m) {
      return unshuffle_rows(in, m, tile_m);
    };
    on_w13_rows(t, s.format, unshuffle);
    on_w2_rows(t, s.format, unshuffle);
  }
  if (tag.gated_interleave) on_w13_rows(t, s.format, deinterleave_gated_rows);
  if (tag.w31) {
    on_w13_rows(t, s.format, swap_halves);
    if (s.format == MOE_FORMAT_FP8_BLOCK) apply(t.w13_scale, "w13_scale", swap_halves);
  }
  return unpad_intermediate(s, t, tag.padded_intermediate);
}

}  // namespace moe::trtllm
