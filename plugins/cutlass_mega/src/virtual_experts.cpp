#include "virtual_experts.hpp"

#include <algorithm>
#include <cstring>

#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/fp4_chunks.hpp"

namespace moe::mega {
namespace {

bool gated(const moe_problem& p) {
  return is_gated(static_cast<moe_activation>(p.activation));
}

int64_t chunks_of(const moe_problem& p, int64_t width) {
  return width > 0 ? (width + p.intermediate - 1) / p.intermediate : 0;
}

int64_t sink_chunks(const moe_problem& p) {
  return p.sink_experts > 0 ? chunks_of(p, p.sink_intermediate) : 0;
}

// One MLP of intermediate width `is` in format `f`: w13 [n1s, H] (gate rows, then up rows when
// gated), w2 [H, is], their scales; appended to `v` as chunks of the routed shape.
struct Mlp {
  moe_format format;
  const uint8_t *w13, *w2;
  const void *w13_scale, *w2_scale;          // fp4: scale bytes; fp8_block: canonical block scales
  const moe_tensor *w13_blocks, *w2_blocks;  // fp8_block: the tensors, to check by name
  float w13_scale_2, w2_scale_2;
  int64_t is;
  const char *w13_name, *w2_name;
};

int64_t element_bits(moe_format f) {
  const FormatSpec& spec = format_spec(f);
  return spec.packed_fp4 ? 4 : 8 * int64_t(dtype_size(spec.element));
}

// The MLP's W13 row that chunk c's row r holds, or -1 (padding).
int64_t w13_source_row(const moe_problem& p, int64_t is, int64_t c, int64_t r) {
  const int64_t I = p.intermediate;
  const bool up = gated(p) && r >= I;
  const int64_t col = c * I + (up ? r - I : r);
  if (col >= is) return -1;
  return up ? is + col : col;
}

void append_mlp(const moe_problem& p, const Mlp& m, VirtualExperts& v) {
  const int64_t V = chunks_of(p, m.is), I = p.intermediate, H = p.hidden, is = m.is;
  const int64_t n1 = w13_rows(p), bits = element_bits(m.format);
  const int64_t h_bytes = H * bits / 8, i_bytes = I * bits / 8, is_bytes = is * bits / 8;
  const size_t w13_at = v.w13.size(), w2_at = v.w2.size();
  v.w13.resize(w13_at + size_t(V * n1 * h_bytes), 0);
  v.w2.resize(w2_at + size_t(V * H * i_bytes), 0);
  for (int64_t c = 0; c < V; ++c) {
    for (int64_t r = 0; r < n1; ++r)
      if (const int64_t src = w13_source_row(p, is, c, r); src >= 0)
        std::memcpy(&v.w13[w13_at + size_t((c * n1 + r) * h_bytes)], m.w13 + src * h_bytes,
                    size_t(h_bytes));
    const int64_t k0 = c * I * bits / 8, k_bytes = std::min(i_bytes, is_bytes - k0);
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(&v.w2[w2_at + size_t((c * H + h) * i_bytes)], m.w2 + h * is_bytes + k0,
                  size_t(k_bytes));
  }
  if (m.format == MOE_FORMAT_MXFP4 || m.format == MOE_FORMAT_NVFP4) {
    const int64_t g = m.format == MOE_FORMAT_MXFP4 ? kMxBlockSize : kNvfp4BlockSize;
    const int64_t hs = H / g, ig = I / g, isg = is / g;
    const uint8_t unit = m.format == MOE_FORMAT_MXFP4 ? uint8_t(127) : e4m3_from_double(1.0);
    const auto* q13 = static_cast<const uint8_t*>(m.w13_scale);
    const auto* q2 = static_cast<const uint8_t*>(m.w2_scale);
    // Checked here, where a refusal can name the MLP's own row and block (the chunks rearrange
    // them; padding scales are valid).
    const gpu::Fp4Scales kind =
        m.format == MOE_FORMAT_MXFP4 ? gpu::Fp4Scales::kMx : gpu::Fp4Scales::kNv;
    gpu::check_fp4_scales(kind, q13, 1, (gated(p) ? 2 : 1) * is, hs, m.w13_name);
    gpu::check_fp4_scales(kind, q2, 1, H, isg, m.w2_name);
    const size_t s13_at = v.w13_scale.size(), s2_at = v.w2_scale.size();
    v.w13_scale.resize(s13_at + size_t(V * n1 * hs), unit);
    v.w2_scale.resize(s2_at + size_t(V * H * ig), unit);
    for (int64_t c = 0; c < V; ++c) {
      for (int64_t r = 0; r < n1; ++r)
        if (const int64_t src = w13_source_row(p, is, c, r); src >= 0)
          std::memcpy(&v.w13_scale[s13_at + size_t((c * n1 + r) * hs)], q13 + src * hs, size_t(hs));
      const int64_t b0 = c * ig, count = std::min(ig, isg - b0);
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(&v.w2_scale[s2_at + size_t((c * H + h) * ig)], q2 + h * isg + b0,
                    size_t(count));
    }
    v.w13_scale_2.insert(v.w13_scale_2.end(), size_t(V), m.w13_scale_2);
    v.w2_scale_2.insert(v.w2_scale_2.end(), size_t(V), m.w2_scale_2);
  }
  if (m.format == MOE_FORMAT_FP8_BLOCK) {  // whole blocks: is % 128 == 0 (supports)
    const int64_t b = kFp8BlockSize, hb = H / b, ib = I / b, isb = is / b, nb = n1 / b;
    const std::vector<float> s13 = sdk::checked_block_scales(
        *m.w13_blocks, m.w13_name, 1, (gated(p) ? 2 : 1) * isb, hb, sdk::BlockScaleOrder::kKMajor);
    const std::vector<float> s2 = sdk::checked_block_scales(*m.w2_blocks, m.w2_name, 1, hb, isb,
                                                            sdk::BlockScaleOrder::kKMajor);
    const size_t s13_at = v.w13_blocks.size(), s2_at = v.w2_blocks.size();
    v.w13_blocks.resize(s13_at + size_t(V * nb * hb), 1.0f);
    v.w2_blocks.resize(s2_at + size_t(V * hb * ib), 1.0f);
    for (int64_t c = 0; c < V; ++c) {
      for (int64_t rb = 0; rb < nb; ++rb)
        if (const int64_t src = w13_source_row(p, is, c, rb * b); src >= 0)
          std::memcpy(&v.w13_blocks[s13_at + size_t((c * nb + rb) * hb)],
                      &s13[size_t(src / b * hb)], size_t(hb) * sizeof(float));
      const int64_t kb0 = c * ib, count = std::min(ib, isb - kb0);
      for (int64_t r = 0; r < hb; ++r)
        std::memcpy(&v.w2_blocks[s2_at + size_t((c * hb + r) * ib)], &s2[size_t(r * isb + kb0)],
                    size_t(count) * sizeof(float));
    }
  }
  v.count += V;
}

}  // namespace

int64_t virtual_count(const moe_problem& p) {
  return p.sink_experts * sink_chunks(p) + chunks_of(p, p.shared_intermediate);
}

int64_t slots_per_token(const moe_problem& p) {
  return p.top_k + virtual_count(p);
}

std::vector<SlotColumn> slot_columns(const moe_problem& p) {
  const int64_t S = p.sink_experts, cs = sink_chunks(p), E = p.experts;
  std::vector<SlotColumn> cols;
  for (int64_t s = 0; s < S; ++s)  // the sinks' own columns: their first chunks
    cols.push_back({int32_t(p.top_k + s), int32_t(E + s * cs), int32_t(E + s)});
  for (int64_t s = 0; s < S; ++s)  // their further chunks, reading the same columns
    for (int64_t c = 1; c < cs; ++c)
      cols.push_back({int32_t(p.top_k + s), int32_t(E + s * cs + c), int32_t(E + s)});
  const int64_t shared_first = E + S * cs;
  for (int64_t c = 0; c < chunks_of(p, p.shared_intermediate); ++c)
    cols.push_back({-1, int32_t(shared_first + c), -1});
  return cols;
}

VirtualExperts virtual_experts(const moe_problem& p, const moe_weights& w) {
  VirtualExperts v;
  const int64_t H = p.hidden, is = p.sink_intermediate;
  for (int64_t s = 0; s < p.sink_experts; ++s) {  // bf16, gated: [S, 2Is, H], [S, H, Is]
    const auto* w13 = static_cast<const uint8_t*>(w.sink_w13.data) + s * 2 * is * H * 2;
    const auto* w2 = static_cast<const uint8_t*>(w.sink_w2.data) + s * H * is * 2;
    append_mlp(p,
               {MOE_FORMAT_BF16, w13, w2, nullptr, nullptr, nullptr, nullptr, 0, 0, is, "sink_w13",
                "sink_w2"},
               v);
  }
  if (p.shared_intermediate > 0) {
    const bool nv = p.format == MOE_FORMAT_NVFP4;
    append_mlp(p,
               {static_cast<moe_format>(p.format), static_cast<const uint8_t*>(w.shared_w13.data),
                static_cast<const uint8_t*>(w.shared_w2.data), w.shared_w13_scale.data,
                w.shared_w2_scale.data, &w.shared_w13_scale, &w.shared_w2_scale,
                nv ? *static_cast<const float*>(w.shared_w13_scale_2.data) : 0.0f,
                nv ? *static_cast<const float*>(w.shared_w2_scale_2.data) : 0.0f,
                p.shared_intermediate, "shared_w13_scale", "shared_w2_scale"},
               v);
  }
  return v;
}

}  // namespace moe::mega
