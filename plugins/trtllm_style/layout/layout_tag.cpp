#include "layout_tag.hpp"

#include <fmt/format.h>

#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "scale_swizzle.hpp"

namespace moe::trtllm {

namespace {

// Appends formatted text to one string.
struct Appender {
  std::string& out;
  template <class... Args>
  void operator()(fmt::format_string<Args...> f, Args&&... args) const {
    fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
  }
};

std::string stack_str(const MatrixStack& s) {
  return fmt::format("[{}, {}, {}]", s.batch, s.rows, s.cols);
}

// One prepared weight and its scales, as stored.
void describe_matrix(std::string& out, const char* name, const LayoutTensor& q,
                     const LayoutTensor& scale, const LayoutTag& tag) {
  const MatrixStack& s = q.shape;
  std::string order = "row-major";
  if (tag.block_k_bytes > 0) {
    const int64_t bk = tag.block_k_bytes / s.elem_bytes;
    order = fmt::format("BlockMajorK [{}, {}, {}, {}]", s.batch, s.cols / bk, s.rows, bk);
  }
  fmt::format_to(std::back_inserter(out), "  {:<10} {} {}, {}\n", name, stack_str(s),
                 dtype_name(q.dtype), order);
  if (!scale.present()) return;
  const std::string sname = fmt::format("{}_scale", name);
  const MatrixStack& c = scale.shape;
  if (tag.scales_swizzled) {
    fmt::format_to(std::back_inserter(out), "  {:<10} [{}, {}, {}] {}, 128x4 swizzled from {}\n",
                   sname, c.batch, round_up(c.rows, 128), round_up(c.cols, 4),
                   dtype_name(scale.dtype), stack_str(c));
  } else {
    fmt::format_to(std::back_inserter(out), "  {:<10} {} {}, row-major\n", sname, stack_str(c),
                   dtype_name(scale.dtype));
  }
}

}  // namespace

std::string describe(const LayoutTag& t) {
  const LayerShape& s = t.shape;
  const char* scales = s.format == MOE_FORMAT_BF16         ? ""
                       : s.format == MOE_FORMAT_FP8_TENSOR ? ""
                       : s.format == MOE_FORMAT_FP8_BLOCK  ? ", 128-row scale blocks"
                                                           : ", per-row scales";
  const std::string w13_rows = fmt::format("w13 weights{}{}", scales, t.bias ? ", b13" : "");
  std::string out;
  const Appender line{out};
  line("trtllm_style weight layout: {} {}, E={} H={} I={}\n", format_name(s.format),
       s.gated ? "gated" : "non-gated", s.experts, s.hidden, s.intermediate);
  line("steps, in order:\n");
  int step = 0;
  if (t.padded_intermediate != s.intermediate) {
    line("  {}. pad I {} -> {} (multiple of {}) with zeros: w13 rows{}, w2 columns{}{}\n", ++step,
         s.intermediate, t.padded_intermediate, t.pad_multiple, s.gated ? " per gate/up half" : "",
         t.bias ? ", b13" : "",
         s.format == MOE_FORMAT_BF16 ? "" : ", and the scales that follow them");
  }
  if (t.w31)
    line("  {}. w31: w13 halves swapped, [gate; up] -> [up; gate] ({})\n", ++step, w13_rows);
  if (t.gated_interleave)
    line(
        "  {}. gated interleave: w13 row 2i <- row i, row 2i+1 <- row P+i, so rows pair as "
        "[{}0, {}0, {}1, {}1, ...] ({})\n",
        ++step, t.w31 ? "u" : "g", t.w31 ? "g" : "u", t.w31 ? "u" : "g", t.w31 ? "g" : "u",
        w13_rows);
  if (t.shuffle_block > 0) {
    const int64_t b = t.shuffle_block;
    const char* with = s.format == MOE_FORMAT_FP8_BLOCK
                           ? "; fp8 block scales stay: these blocks nest in their 128-row blocks"
                           : "";
    line(
        "  {}. row shuffle for epilogue_tile_m={}: in blocks of {} rows, dst row 8*b+a <- src "
        "row {}*a+b, a in [0,8), b in [0,{}) (w13 and w2 weights{}{}{})\n",
        ++step, t.epilogue_tile_m, b, b / 8, b / 8,
        has_row_scales(s.format) ? ", per-row scales" : "", t.bias ? ", b13, b2" : "", with);
  }
  if (t.scales_swizzled)
    line(
        "  {}. scales 128x4 swizzled: (r, c) of (rows, cols) padded to (round_up(rows,128), "
        "round_up(cols,4)) sits at c%4 + (c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + "
        "(r/128)*128*round_up(cols,4)\n",
        ++step);
  if (t.block_k_bytes > 0)
    line("  {}. weights BlockMajorK with {}-byte slabs along K: [E, M, K] -> [E, K/bk, M, bk]\n",
         ++step, t.block_k_bytes);
  if (t.fp8_scale_floor)
    line("  {}. fp8 block scales below 1e-10 raised to 1e-10 (not undone by unprepare)\n", ++step);
  if (step == 0) line("  (none: canonical layout)\n");

  line("tensors:\n");
  const LayerTensors g = canonical_shapes(s, t.padded_intermediate);
  describe_matrix(out, "w13", g.w13, g.w13_scale, t);
  describe_matrix(out, "w2", g.w2, g.w2_scale, t);
  if (t.bias) {
    line("  {:<10} [{}, {}], row order of w13\n", "b13", s.experts, g.w13.shape.rows);
    line("  {:<10} [{}, {}], row order of w2\n", "b2", s.experts, s.hidden);
  }
  return out;
}

}  // namespace moe::trtllm
