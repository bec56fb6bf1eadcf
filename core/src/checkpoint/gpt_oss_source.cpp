// gpt_oss: {prefix}.experts.gate_up_proj [E, H, 2I] with gate/up interleaved, down_proj [E, I, H],
// both stored [in, out] in bf16, or as MXFP4 *_blocks / *_scales [out, in]; biases
// *_proj_bias; router {prefix}.router.weight + router.bias (added to the logits).
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"
#include "source_base.hpp"
#include "writer_util.hpp"

namespace moe::detail {
namespace {

// Matrix e [rows, cols] of a stack (any element size), transposed: gpt_oss stores [in, out],
// canonical is [out, in] (K contiguous); the transpose is its own inverse, so reader and writer
// share it.
HostTensor transpose(const HostTensor& stack, int64_t e, int64_t rows, int64_t cols) {
  HostTensor out(stack.dtype(), {cols, rows});
  const size_t es = dtype_size(stack.dtype());
  const auto* src = static_cast<const uint8_t*>(stack.raw()) + e * rows * cols * es;
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(dst + (c * rows + r) * es, src + (r * cols + c) * es, es);
  return out;
}

class GptOssSource final : public SourceBase {
 public:
  using SourceBase::SourceBase;

  int64_t count_experts() const override {
    return leading_dim(mxfp4_blocks() ? "experts.down_proj_blocks" : "experts.down_proj");
  }

  std::pair<int64_t, int64_t> checkpoint_sizes() const override {
    if (mxfp4_blocks()) {
      const auto& s = shape_of("experts.down_proj_blocks", 4);  // [E, H, I / 32, 16]
      // An empty tensor may claim any other dimension: no overflow from its block count.
      MOE_CHECK(s[2] <= std::numeric_limits<int64_t>::max() / kMxBlockSize,
                MOE_STATUS_SHAPE_MISMATCH,
                "checkpoint tensor 'experts.down_proj_blocks' claims {} blocks of 32 a row", s[2]);
      return {s[1], s[2] * kMxBlockSize};
    }
    const auto& s = shape_of("experts.down_proj", 3);  // [E, I, H]
    return {s[2], s[1]};
  }

  Expert expert(int64_t e) const override;

  std::pair<float, float> activation_scales(int64_t) const override {
    MOE_FAIL(MOE_STATUS_UNSUPPORTED, "gpt_oss checkpoints carry no static activation scales");
  }

 protected:
  RouterNames router_names() const override {
    return {"router.weight", true, "router.bias", "gate.e_score_correction_bias"};
  }

 private:
  // gate_up_proj and down_proj of expert `e` of `E` at checkpoint size, canonical [out, in].
  std::pair<Matrix, Matrix> projections(int64_t e, int64_t E) const;
  // Projection `n` [E, in, out] stored dense, transposed to [out, in]: bf16 under bf16, or an
  // unquantised matrix (F32 / F16 / BF16) converted at load to any format.
  Matrix dense(const std::string& n, int64_t e, int64_t E, int64_t in, int64_t out) const;
  // MXFP4 *_blocks / *_scales, for an mxfp4 problem: otherwise dense *_proj tensors are read.
  bool mxfp4_blocks() const {
    return format_ == MOE_FORMAT_MXFP4 && (has_tensor(ctx_, name("experts.down_proj_blocks")) ||
                                           !has_tensor(ctx_, name("experts.down_proj")));
  }
};

Expert GptOssSource::expert(int64_t e) const {
  MOE_CHECK(gated_, MOE_STATUS_UNSUPPORTED, "gpt_oss experts are gated");
  const int64_t E = count_experts(), h = p_.hidden, i = full_i_;
  auto [fused, down] = projections(e, E);
  Expert x;
  std::tie(x.gate, x.up) = deinterleave_rows(fused, name("experts.gate_up_proj"));
  x.down = std::move(down);
  const std::string gb = name("experts.gate_up_proj_bias"), db = name("experts.down_proj_bias");
  if (p_.expert_bias) {
    const auto b = to_floats(slot(cached_values(gb, {E, 2 * i}), e, {2 * i}));
    for (int64_t r = 0; r < i; ++r) {
      x.b_gate.push_back(b[2 * r]);
      x.b_up.push_back(b[2 * r + 1]);
    }
    x.b_down = to_floats(slot(cached_values(db, {E, h}), e, {h}));
  } else {
    MOE_CHECK(!has_tensor(ctx_, gb), MOE_STATUS_INVALID_ARGUMENT,
              "checkpoint has expert biases ('{}'): set expert_bias: true", gb);
  }
  return x;
}

std::pair<Matrix, Matrix> GptOssSource::projections(int64_t e, int64_t E) const {
  const int64_t h = p_.hidden, i = full_i_;
  if (mxfp4_blocks()) {
    MOE_CHECK(h % kMxBlockSize == 0 && i % kMxBlockSize == 0, MOE_STATUS_SHAPE_MISMATCH,
              "gpt_oss MXFP4 stores whole 32-value blocks: hidden={} and intermediate={} must "
              "be multiples of 32",
              h, i);
    const int64_t kb = h / kMxBlockSize, ib = i / kMxBlockSize;
    const auto& gu = cached(name("experts.gate_up_proj_blocks"), MOE_DTYPE_U8, {E, 2 * i, kb, 16});
    const auto& gs = cached(name("experts.gate_up_proj_scales"), MOE_DTYPE_U8, {E, 2 * i, kb});
    const auto& dq = cached(name("experts.down_proj_blocks"), MOE_DTYPE_U8, {E, h, ib, 16});
    const auto& ds = cached(name("experts.down_proj_scales"), MOE_DTYPE_U8, {E, h, ib});
    Matrix fused{MOE_FORMAT_MXFP4,         2 * i, h, slot(gu, e, {2 * i, h / 2}),
                 slot(gs, e, {2 * i, kb}), 1.0f};
    Matrix down{MOE_FORMAT_MXFP4, h, i, slot(dq, e, {h, i / 2}), slot(ds, e, {h, ib}), 1.0f};
    for (Matrix* m : {&fused, &down}) {
      m->q.reinterpret(MOE_DTYPE_E2M1X2);
      m->scale.reinterpret(MOE_DTYPE_UE8M0);
    }
    return {std::move(fused), std::move(down)};
  }
  return {dense("experts.gate_up_proj", e, E, h, 2 * i), dense("experts.down_proj", e, E, i, h)};
}

Matrix GptOssSource::dense(const std::string& n, int64_t e, int64_t E, int64_t in,
                           int64_t out) const {
  const auto* entry = ctx_.checkpoint.find(name(n));
  const moe_dtype stored = entry ? entry->dtype : MOE_DTYPE_BF16;
  const bool convert = converted_at_load(stored, format_);
  MOE_CHECK(convert || format_ == MOE_FORMAT_BF16, MOE_STATUS_UNSUPPORTED,
            "checkpoint tensor '{}' is {}: gpt_oss stores {} weights as F32, F16 or BF16 "
            "(converted at load){}",
            name(n), entry ? entry->st_dtype : "missing", format_name(format_),
            format_ == MOE_FORMAT_MXFP4 ? " or as MXFP4 *_blocks / *_scales" : "");
  if (!convert) check_weight_dtype(ctx_, name(n), format_);
  // Stored [in, out]: transpose to the canonical [out, in] (K contiguous).
  HostTensor t = transpose(cached(name(n), stored, {E, in, out}), e, in, out);
  if (!convert) return {MOE_FORMAT_BF16, out, in, std::move(t), {}, 1.0f};
  record_conversion(ctx_, name(n), format_name(format_));
  return {MOE_FORMAT_BF16, out, in, to_f32(t), {}, 1.0f};
}

void write_gpt_oss(const ExportedLayer& l, std::vector<NamedTensor>& out) {
  const LayerWeights& w = l.w;
  const Layout g = layout_of(l.p);
  const bool mx = g.format == MOE_FORMAT_MXFP4;
  MOE_CHECK(l.p.shared_intermediate == 0, MOE_STATUS_UNSUPPORTED, "gpt_oss has no shared experts");
  // The loop reads w13 as [E, 2I, H] of bf16 or mxfp4: for another activation or format it would
  // read past the end of w13 / w2 and write a file the reader refuses anyway.
  MOE_CHECK(g.gated, MOE_STATUS_UNSUPPORTED, "gpt_oss experts are gated, not activation {}",
            activation_name(static_cast<moe_activation>(l.p.activation)));
  MOE_CHECK(mx || g.format == MOE_FORMAT_BF16, MOE_STATUS_UNSUPPORTED,
            "gpt_oss checkpoints are bf16 or mxfp4, not {}", format_name(g.format));
  MOE_CHECK(!mx || (g.hidden % kMxBlockSize == 0 && g.inter % kMxBlockSize == 0),
            MOE_STATUS_UNSUPPORTED,
            "gpt_oss MXFP4 stores whole 32-value blocks: hidden={} and intermediate={} must be "
            "multiples of 32",
            g.hidden, g.inter);
  std::vector<HostTensor> gu, gs, dq, ds, gb, db;
  for (int64_t e = 0; e < g.experts; ++e) {
    const Matrix fused = interleaved_w13(w, g, e);
    const Matrix w2 = matrix_at(g.format, g.hidden, g.inter, w.w2, w.w2_scale, w.w2_scale_2, e);
    if (mx) {
      HostTensor q = fused.q, d = w2.q, s = fused.scale, t = w2.scale;
      for (HostTensor* x : {&q, &d, &s, &t}) x->reinterpret(MOE_DTYPE_U8);
      gu.push_back(q), dq.push_back(d), gs.push_back(s), ds.push_back(t);
    } else {
      gu.push_back(transpose(fused.q, 0, 2 * g.inter, g.hidden));
      dq.push_back(transpose(w2.q, 0, g.hidden, g.inter));
    }
    if (!w.b13.empty()) {
      gb.push_back(interleaved_b13(w, g, e));
      const auto d = bias_row(w.b2, e, g.hidden);
      HostTensor d2(MOE_DTYPE_F32, {g.hidden});
      std::memcpy(d2.raw(), d.data(), d2.bytes());
      db.push_back(d2);
    }
  }
  const std::string& p = l.prefix;
  if (mx) {
    // Packed rows [.., K / 2] become [.., K / 32, 16]: one 16-byte group per scale block.
    HostTensor blocks = stack(gu), down = stack(dq);
    const int64_t kb = g.hidden / kMxBlockSize, ib = g.inter / kMxBlockSize;
    HostTensor b4(MOE_DTYPE_U8, {g.experts, 2 * g.inter, kb, 16}),
        d4(MOE_DTYPE_U8, {g.experts, g.hidden, ib, 16});
    std::memcpy(b4.raw(), blocks.raw(), b4.bytes());
    std::memcpy(d4.raw(), down.raw(), d4.bytes());
    out.push_back({p + "experts.gate_up_proj_blocks", b4});
    out.push_back({p + "experts.gate_up_proj_scales", stack(gs)});
    out.push_back({p + "experts.down_proj_blocks", d4});
    out.push_back({p + "experts.down_proj_scales", stack(ds)});
  } else {
    out.push_back({p + "experts.gate_up_proj", stack(gu)});
    out.push_back({p + "experts.down_proj", stack(dq)});
  }
  if (!gb.empty()) {
    out.push_back({p + "experts.gate_up_proj_bias", stack(gb)});
    out.push_back({p + "experts.down_proj_bias", stack(db)});
  }
}

}  // namespace

std::unique_ptr<ExpertSource> make_gpt_oss_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                  const moe_problem& p) {
  return std::make_unique<GptOssSource>(ck, spec, p);
}

// gpt-oss checkpoints have no selection bias; one is written under the name the reader reads.
extern const LayerWriter kGptOssWriter = {.write = write_gpt_oss,
                                          .router_weight = "router.weight",
                                          .selection_bias = "gate.e_score_correction_bias"};

}  // namespace moe::detail
