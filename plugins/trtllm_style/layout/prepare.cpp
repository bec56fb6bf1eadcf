#include "prepare.hpp"

#include <fmt/format.h>

#include <numeric>

#include "gather.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "padding.hpp"
#include "scale_floor.hpp"
#include "scale_swizzle.hpp"

namespace moe::trtllm {

namespace {

LayoutTag make_tag(const LayerShape& s, int64_t w13_elem_bytes, bool bias,
                   const PrepareOptions& o) {
  const bool fp8b = s.format == MOE_FORMAT_FP8_BLOCK;
  MOE_CHECK(o.epilogue_tile_m >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "prepare: epilogue_tile_m={} must be >= 0 (0 = no row shuffle)", o.epilogue_tile_m);
  MOE_CHECK(o.pad_multiple >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "prepare: pad_multiple={} must be >= 0 (0 = the format's alignment)", o.pad_multiple);
  MOE_CHECK(!(fp8b && s.gated && o.gated_interleave.value_or(false)), MOE_STATUS_UNSUPPORTED,
            "prepare: gated interleave of fp8_block w13 is not possible: its scales cover 128 "
            "rows, so rows cannot be interleaved one by one; leave gated_interleave unset or off");
  LayoutTag tag;
  tag.shape = s;
  tag.pad_multiple =
      o.pad_multiple > 0 ? o.pad_multiple : intermediate_alignment(s.format, s.gated);
  tag.padded_intermediate = padded_intermediate(s, tag.pad_multiple);
  tag.w31 = s.gated && o.w31;
  tag.gated_interleave = s.gated && o.gated_interleave.value_or(!fp8b);
  tag.epilogue_tile_m = o.epilogue_tile_m;
  tag.shuffle_block = o.epilogue_tile_m > 0 ? shuffle_block_size(o.epilogue_tile_m) : 0;
  tag.scales_swizzled = o.swizzle_scales && has_row_scales(s.format);
  if (o.block_major_k) {
    MOE_CHECK(o.block_k_bytes > 0 && o.block_k_bytes % w13_elem_bytes == 0,
              MOE_STATUS_INVALID_ARGUMENT,
              "prepare: block_k_bytes={} must be a positive multiple of the {}-byte element",
              o.block_k_bytes, w13_elem_bytes);
    tag.block_k_bytes = o.block_k_bytes;
  }
  tag.fp8_scale_floor = fp8b && o.fp8_scale_floor;
  tag.bias = bias;
  MOE_CHECK(!(tag.w31 && fp8b && tag.padded_intermediate % kFp8BlockSize != 0),
            MOE_STATUS_UNSUPPORTED,
            "prepare: w31 swap of fp8_block w13 needs I to be a multiple of 128 (I={}, padded "
            "{}): a 128-row scale block would hold both gate and up rows",
            s.intermediate, tag.padded_intermediate);
  return tag;
}

// Runs `fn` (which builds a row map or checks a shape); errors are prefixed with `name`, as the
// step functions' errors are in the step-by-step pipeline.
template <class Fn>
auto named(const char* name, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", name, e.what()));
  }
}

RowMap identity(int64_t rows) {
  RowMap m(static_cast<size_t>(rows));
  std::iota(m.begin(), m.end(), int64_t(0));
  return m;
}

// The padding step as a gather map, rows `from` -> `to`: unchanged when equal; else per half when
// `halves` (gate rows, then up rows, each followed by its zero rows) or zero rows appended.
RowMap pad_map(int64_t from, int64_t to, bool halves, const char* name) {
  if (from == to) return identity(to);
  RowMap m(size_t(to), kZeroRow);
  if (!halves) {
    std::iota(m.begin(), m.begin() + std::min(from, to), int64_t(0));
    return m;
  }
  MOE_CHECK(from % 2 == 0 && to % 2 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: gate/up halves need even row counts, got {} -> {}", name, from, to);
  const int64_t hf = from / 2, ht = to / 2;
  for (int64_t d = 0; d < to; ++d)
    if (d % ht < hf) m[size_t(d)] = d / ht * hf + d % ht;
  return m;
}

// Final row -> padded row of w13 (and everything that follows its rows): w31, then the gated
// interleave, then the row shuffle.
RowMap w13_order(const LayoutTag& tag, int64_t rows) {
  RowMap m = identity(rows);
  named("w13", [&] {
    if (tag.w31) m = compose(m, w31_row_map(rows));
    if (tag.gated_interleave) m = compose(m, interleave_row_map(rows));
    if (tag.shuffle_block > 0) m = compose(m, shuffle_row_map(rows, tag.epilogue_tile_m));
    return 0;
  });
  return m;
}

// Final row -> row of w2 (rows = H): the row shuffle only.
RowMap w2_order(const LayoutTag& tag, int64_t rows) {
  if (tag.shuffle_block == 0) return identity(rows);
  return named("w2", [&] { return shuffle_row_map(rows, tag.epilogue_tile_m); });
}

// The prepared tensor `out` (dtype and logical shape of `dst`) from `in`, its rows by `order` after
// the padding map (rows of `in` -> rows of `dst`, per half when `halves`).
GatherJob job(const TensorView& in, const LayoutTensor& dst, LayoutTensor& out, bool halves,
              const RowMap* order, const char* name) {
  out = {dst.dtype, dst.shape, {}};
  RowMap rows = pad_map(in.shape.rows, dst.shape.rows, halves, name);
  if (order != nullptr) rows = compose(rows, *order);
  return {{in.shape, dst.shape, std::move(rows)}, in.bytes, &out.bytes};
}

}  // namespace

PreparedLayer prepare(const LayerShape& s, const LayerView& in, const PrepareOptions& o) {
  // The tag from the format's element size (as plan_layout's), not the caller's tensor's, which
  // check_canonical_tensors names when it differs.
  const LayoutTag tag = plan_layout(s, in.b13.present() || in.b2.present(), o);
  const int64_t padded = tag.padded_intermediate;

  // The inputs, checked as the padding step checks them.
  check_canonical_tensors(in, s, s.intermediate);
  const LayerTensors to = canonical_shapes(s, padded);

  const RowMap order13 = w13_order(tag, to.w13.shape.rows), order2 = w2_order(tag, s.hidden);
  const bool row_scales = has_row_scales(s.format), fp8b = s.format == MOE_FORMAT_FP8_BLOCK;
  // fp8_block's 128-row scale blocks move with the w31 swap only (prepare.hpp, NOTES).
  RowMap order13_blocks;
  if (fp8b) {
    order13_blocks = identity(to.w13_scale.shape.rows);
    if (tag.w31)
      order13_blocks = named("w13_scale", [&] { return w31_row_map(to.w13_scale.shape.rows); });
  }

  PreparedLayer out{tag, {}};
  LayerTensors& t = out.tensors;
  std::vector<GatherJob> jobs;
  jobs.push_back(job(in.w13, to.w13, t.w13, s.gated, &order13, "w13"));
  jobs.push_back(job(in.w2, to.w2, t.w2, false, &order2, "w2"));
  if (in.b13.present())
    jobs.push_back(
        job(in.b13, bias_geometry(in.b13, to.w13.shape.rows), t.b13, s.gated, &order13, "b13"));
  if (in.b2.present())
    jobs.push_back(job(in.b2, bias_geometry(in.b2, s.hidden), t.b2, false, &order2, "b2"));
  if (in.w13_scale.present()) {
    // fp8_tensor's per-expert scalar has one row and never moves.
    const bool halves = s.gated && s.format != MOE_FORMAT_FP8_TENSOR;
    const RowMap* order = row_scales ? &order13 : fp8b ? &order13_blocks : nullptr;
    jobs.push_back(job(in.w13_scale, to.w13_scale, t.w13_scale, halves, order, "w13_scale"));
    jobs.back().plan.swizzle = tag.scales_swizzled;
  }
  if (in.w2_scale.present()) {
    jobs.push_back(job(in.w2_scale, to.w2_scale, t.w2_scale, false, row_scales ? &order2 : nullptr,
                       "w2_scale"));
    jobs.back().plan.swizzle = tag.scales_swizzled;
  }
  if (tag.block_k_bytes > 0) {
    for (GatherJob* j : {&jobs[0], &jobs[1]}) {
      j->plan.block_k = tag.block_k_bytes / j->plan.dst.elem_bytes;
      named(j == &jobs[0] ? "w13" : "w2", [&] {
        check_block_major_k(j->plan.dst, j->plan.block_k, "BlockMajorK");
        return 0;
      });
    }
  }

  run_gathers(jobs);
  if (tag.scales_swizzled) {
    t.w13_scale.shape = swizzled_shape(t.w13_scale.shape);
    t.w2_scale.shape = swizzled_shape(t.w2_scale.shape);
  }
  if (tag.fp8_scale_floor) {
    raise_small_scales(t.w13_scale.bytes);
    raise_small_scales(t.w2_scale.bytes);
  }
  return out;
}

PreparedLayer prepare(const LayerShape& s, const LayerTensors& canonical, const PrepareOptions& o) {
  return prepare(s, view_of(canonical), o);
}

PreparedLayer prepare(const LayerShape& s, const moe_weights& w, const PrepareOptions& o) {
  return prepare(s, view_canonical(s, w), o);
}

LayoutTag plan_layout(const LayerShape& s, bool bias, const PrepareOptions& o) {
  const LayerTensors geometry = canonical_shapes(s, s.intermediate);
  const LayoutTag tag = make_tag(s, geometry.w13.shape.elem_bytes, bias, o);
  check_padded_intermediate(s, tag.padded_intermediate);  // a plan prepare() would refuse is none
  return tag;
}

}  // namespace moe::trtllm
