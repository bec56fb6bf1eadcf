// LayoutTag: exactly which transforms prepare() applied, in which configuration, so that
// unprepare() can invert them and `moe describe trtllm_style` can explain the bytes.
#pragma once

#include <cstdint>
#include <string>

#include "layer_tensors.hpp"

namespace moe::trtllm {

struct LayoutTag {
  LayerShape shape;                 // the canonical layer: format, gated, E, H, I
  int64_t padded_intermediate = 0;  // P; == shape.intermediate when nothing was padded
  int64_t pad_multiple = 0;         // P = round_up(I, pad_multiple)
  bool w31 = false;                 // w13 halves swapped to [up; gate]
  bool gated_interleave = false;    // w13 rows interleaved, after the w31 swap
  int64_t epilogue_tile_m = 0;      // 0 = rows not shuffled
  int64_t shuffle_block = 0;        // 16 or 32 rows; 0 = rows not shuffled
  bool scales_swizzled = false;     // mx*/nvfp4 scales in the 128x4 layout
  int64_t block_k_bytes = 0;        // BlockMajorK slab along K in bytes; 0 = row-major weights
  bool fp8_scale_floor = false;     // fp8_block scales raised to >= 1e-10 (not undone)
  bool bias = false;                // b13 / b2 were given and follow their matrices' rows
};

// A multi-line, human-readable account: the layer, each applied step in order, and the shape
// and storage order of every prepared tensor. Ends with a newline.
std::string describe(const LayoutTag& tag);

}  // namespace moe::trtllm
