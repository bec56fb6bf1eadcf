#include "deepgemm_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "moe/sdk/bias_values.hpp"
#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/workspace.hpp"

namespace moe::deepgemm {
namespace {

constexpr int64_t kBlock = 128;
using gpu::kCombineMaxColumns;
}  // namespace

sdk::Verdict check_support(const moe_problem& p) {
  using sdk::Verdict;
  if (p.format != MOE_FORMAT_FP8_BLOCK)
    return Verdict::no(MOE_REASON_FORMAT,
                       fmt::format("fp8_block weights only, not {}",
                                   format_name(static_cast<moe_format>(p.format))));
  if (p.input_format != MOE_INPUT_FP8_1X128)
    return Verdict::no(MOE_REASON_INPUT_FORMAT,
                       "activations quantised per token per 128 channels (fp8_1x128) only: the "
                       "GEMMs are e4m3 x e4m3");
  if (p.hidden % kBlock != 0 || p.intermediate % kBlock != 0)
    return Verdict::no(MOE_REASON_SHAPE,
                       fmt::format("hidden={} and intermediate={} must be multiples of 128 (whole "
                                   "128x128 scale blocks)",
                                   p.hidden, p.intermediate));
  if (p.shared_intermediate > 0 && p.shared_intermediate != p.intermediate)
    return Verdict::no(MOE_REASON_SHARED,
                       fmt::format("shared_intermediate={} must equal intermediate={} (one "
                                   "grouped GEMM)",
                                   p.shared_intermediate, p.intermediate));
  if (p.redundant_experts > 0)
    return Verdict::no(MOE_REASON_EP, "redundant experts (EPLB) are not implemented");
  if (topk_width(p) > kCombineMaxColumns)
    return Verdict::no(MOE_REASON_OTHER,
                       fmt::format("top_k + sink_experts = {} columns a token; the combine takes "
                                   "at most {}",
                                   topk_width(p), kCombineMaxColumns));
  if (const std::string& why = gpu::sm90a_refusal(); !why.empty())
    return Verdict::no(MOE_REASON_ARCH, why);
  return Verdict::yes();
}

const char* row_layout_name(RowLayout l) {
  return l == RowLayout::kMasked ? "masked" : "contiguous";
}

namespace {

// gemm_tiles' values (besides auto): the option parser, its error and the sink refusal read them.
struct TilesOption {
  const char* name;
  Fp8Tiles tiles;
};
constexpr TilesOption kTilesOptions[] = {
    {"tokens", Fp8Tiles::kTokens},
    {"tokens_paired", Fp8Tiles::kTokensPaired},
    {"tokens_ffma", Fp8Tiles::kTokensFfma},
    {"tokens_ffma192", Fp8Tiles::kTokensFfma192},
    {"tokens_ffma_split", Fp8Tiles::kTokensFfmaSplitK},
    {"weights_ffma", Fp8Tiles::kWeightsFfma},
    {"weights_ffma_split", Fp8Tiles::kWeightsFfmaSplitK},
    {"weights", Fp8Tiles::kWeights},
};

const char* tiles_option_name(Fp8Tiles t) {
  for (const TilesOption& o : kTilesOptions)
    if (o.tiles == t) return o.name;
  return "?";
}

// gemm_tiles: auto's rule (auto_fp8_tiles), which describe() states.
constexpr int64_t kOwnMaxRows = 176;    // a group's average rows
constexpr int64_t kOwnWideRows = 112;   // 192-row tiles past this many rows a group
constexpr int64_t kOwnMaxTotal = 4096;  // the layer's rows in all
// `gemm1_epilogue: auto` fuses on the own kernel's 128-row tiles from this hidden size (K of 32
// blocks): a main loop long enough to hide the fused epilogue (fuses_gemm1), and from this many
// rows an expert (below it the peer CTA's exchange outlasts the tile's work).
constexpr int64_t kFuseNarrowMinHidden = 4096;
constexpr int64_t kFuseNarrowMinRows = 32;
constexpr int64_t kWeightTilesRows = 32;  // CUTLASS's weight tiles below this many rows a group
// The own kernel with its operands swapped: up to this many rows a group on average, and with no
// group past one 16-token block (the shared expert's).
constexpr int64_t kSwapMaxRows = 8;
constexpr int64_t kSwapBlockRows = 16;

}  // namespace

LayerOptions parse_options(const Options& options) {
  LayerOptions o;
  for (const auto& [key, value] : options) {
    if (key == "layout") {
      MOE_CHECK(value == "auto" || value == "contiguous" || value == "masked",
                MOE_STATUS_CONFIG_ERROR,
                "deepgemm_style: layout '{}' is not auto, contiguous or masked", value);
      o.layout = value == "auto"         ? std::nullopt
                 : value == "contiguous" ? std::optional(RowLayout::kContiguous)
                                         : std::optional(RowLayout::kMasked);
    } else if (key == "masked_max_tokens") {
      int64_t v = -1;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      MOE_CHECK(ec == std::errc() && end == value.data() + value.size() && v >= 0 && v <= 4096,
                MOE_STATUS_CONFIG_ERROR,
                "deepgemm_style: masked_max_tokens '{}' is not an integer in [0, 4096]", value);
      o.masked_max_tokens = v;
    } else if (key == "gemm_tiles") {
      o.tiles.reset();
      bool known = value == "auto";
      std::string names = "auto";
      for (const TilesOption& t : kTilesOptions) {
        names += fmt::format(", {}", t.name);
        if (value == t.name) o.tiles = t.tiles, known = true;
      }
      MOE_CHECK(known, MOE_STATUS_CONFIG_ERROR, "deepgemm_style: gemm_tiles '{}' is not one of {}",
                value, names);
    } else if (key == "gemm1_epilogue") {
      MOE_CHECK(value == "auto" || value == "separate" || value == "fused", MOE_STATUS_CONFIG_ERROR,
                "deepgemm_style: gemm1_epilogue '{}' is not auto, separate or fused", value);
      o.fused_gemm1 = value == "auto" ? std::nullopt : std::optional(value == "fused");
    } else {
      MOE_FAIL(MOE_STATUS_CONFIG_ERROR,
               "deepgemm_style: unknown option '{}' (known: layout, masked_max_tokens, "
               "gemm_tiles, gemm1_epilogue)",
               key);
    }
  }
  return o;
}

namespace {

// The e4m3 groups (routed experts, the shared one) and their rows for a batch of `tokens` under
// even routing (the shared expert's T included), for the tile and epilogue rules.
struct ExpectedRows {
  int64_t groups, rows, per_group;
};
ExpectedRows expected_rows(const moe_problem& p, int64_t tokens) {
  const int64_t groups = p.local_experts + (p.shared_intermediate > 0 ? 1 : 0);
  const int64_t rows = tokens * p.top_k * p.local_experts / std::max<int64_t>(1, p.experts) +
                       (p.shared_intermediate > 0 ? tokens : 0);
  return {groups, rows, rows / std::max<int64_t>(1, groups)};
}

}  // namespace

// Measured on the H200 (bench/NOTES.md session 26, layer A/B against the CUTLASS-only rule): the
// own kernel 0.68-0.94x of CUTLASS's time at 16-128 rows an expert and at most 4096 rows in all
// (Mixtral T=128-512, Qwen3-30B-A3B T=256-512, DeepSeek-V3 T=512), level at 16 rows an expert
// (Mixtral T=64), 1.05x at 192 (Mixtral T=768) and 1.03-1.19x past 4096 rows in all; 192-row
// tiles 0.88x of 128-row ones at 128 rows an expert (Mixtral T=512), 1.04x at 32.
// Session 31 (decode, same run, graph replays): the own kernel's 128-row tiles against CUTLASS's
// weight tiles below 16 rows an expert: Qwen3-30B-A3B T=1/8/64 0.84/0.90/0.97x, Mixtral T=8
// 0.95x, DeepSeek-V3 T=1 0.94x (fused epilogue), but Mixtral T=1 1.03x (two experts' 64 GEMM2
// tiles either way). So the own kernel now runs from the first row.
// Session 33 (graph replays, same run): the own kernel with its operands swapped (128x16 weight
// tiles) against the 128-row token tiles: Qwen3-30B-A3B T=1/8/64 0.94/0.98/0.96x, Mixtral T=1/8
// 0.87/0.98x, DeepSeek-V3 T=1/8 0.94/0.97x, but Mixtral T=64 (16 rows an expert: two 16-token
// blocks for most) 1.20x. So it runs up to 8 rows an expert, where a group's rows fill one block
// as routing spreads them, and while the shared expert's T rows (every token) fit one block.
Fp8Tiles auto_fp8_tiles(const moe_problem& p, int64_t tokens) {
  const auto [groups, rows, per_group] = expected_rows(p, tokens);
  const int64_t largest = p.shared_intermediate > 0 ? std::max(per_group, tokens) : per_group;
  // The own kernels keep their groups' tile prefix in shared memory: past ffma_max_groups()
  // groups (and with sinks) only CUTLASS's tiles run the layer.
  const bool own = p.sink_experts == 0 && groups <= detail::ffma_max_groups();
  if (own && per_group <= kSwapMaxRows && largest <= kSwapBlockRows) return Fp8Tiles::kWeightsFfma;
  if (own && rows <= kOwnMaxTotal && per_group <= kOwnMaxRows)
    return per_group > kOwnWideRows ? Fp8Tiles::kTokensFfma192 : Fp8Tiles::kTokensFfma;
  return rows < kWeightTilesRows * groups ? Fp8Tiles::kWeights : Fp8Tiles::kTokens;
}

// The groups that get rows (at most one a row) and their 128-row blocks, times N's 128-column
// tiles: the SMs a GEMM keeps busy, one tile each. Split K (a CTA pair a tile, half the K each)
// pays where they are at most half of the SMs: Mixtral's GEMM2 at one token (2 experts x 32
// tiles: 64 of 132 SMs) 0.93x of whole tiles (bench/NOTES.md session 32). Where the tiles fill
// more than one round it measured slower (4 stages instead of 6, the exchange): Mixtral's GEMM1
// at one token (448 tiles) 1.03x, DeepSeek-V3's GEMM2 (448) 1.07x.
bool split_k_pays(const moe_problem& p, int64_t tokens, int64_t n, int64_t k, int sm_count) {
  const auto [groups, rows, per_group] = expected_rows(p, tokens);
  const int64_t active = std::min(groups, rows);
  if (active <= 0 || sm_count <= 0 || k < 2 * kBlock) return false;
  const int64_t row_blocks = active * (((rows + active - 1) / active + kBlock - 1) / kBlock);
  return 2 * row_blocks * (n / kBlock) <= sm_count;
}

namespace {

// Where the activation and its re-quantisation run, for describe(): "" where nothing fuses.
std::string epilogue_rule(const moe_problem& p, const LayerOptions& o) {
  const char* where = "; the activation and its re-quantisation in GEMM1's epilogue";
  if (o.fused_gemm1)
    return *o.fused_gemm1 ? fmt::format(
                                "{} wherever the own kernel's token tiles run GEMM1 (option "
                                "gemm1_epilogue)",
                                where)
                          : std::string(
                                "; the activation and its re-quantisation in a kernel of their own "
                                "(option gemm1_epilogue)");
  if (p.activation == MOE_ACTIVATION_RELU2 || p.sink_experts > 0) return "";
  if (p.hidden >= kFuseNarrowMinHidden)
    return fmt::format(
        "{} wherever the own kernel's token tiles run GEMM1 with {} or more rows an expert "
        "(hidden >= {}), "
        "else in a kernel of their own",
        where, kFuseNarrowMinRows, kFuseNarrowMinHidden);
  return fmt::format(
      "{} where the own kernel runs 192-row tiles (and its 128-row tiles from hidden {} and {} "
      "rows an expert), else in a kernel of their own",
      where, kFuseNarrowMinHidden, kFuseNarrowMinRows);
}

}  // namespace

std::string describe(const moe_problem& p, const LayerOptions& o) {
  const std::string rule =
      o.layout ? fmt::format("{} at every batch size (option layout)", row_layout_name(*o.layout))
               : fmt::format(
                     "masked for T <= {} (one kernel assigns rows, no sort; each group "
                     "owns T rows), contiguous above (sorted segments, no padding rows)",
                     o.masked_max_tokens);
  return fmt::format(
      "fp8 128x128 block weights as given (e4m3 [N, K], K contiguous), scales MN-major "
      "[K/128][N/128] floored at 1e-10; activations quantised per token per 128 channels in the "
      "permutation and again after the activation; GEMM1 N={}, GEMM2 N={}; rows: {}; GEMMs: {}{}{}",
      w13_rows(p), p.hidden, rule,
      o.tiles ? fmt::format("{} (option gemm_tiles)", fp8_tiles_name(*o.tiles))
      : p.sink_experts > 0
          ? fmt::format("CUTLASS's (swap-AB weight tiles under {} rows an expert; the own kernel "
                        "would run the sinks' groups too)",
                        kWeightTilesRows)
          : fmt::format(
                "the own kernel with its operands swapped (128x16 weight tiles) up to "
                "{} rows an expert (and at most {} in any group, the shared expert's "
                "included), its token tiles (128 rows, 192 past {} rows an expert) for up to {} "
                "rows an expert and at most {} rows in all, else CUTLASS's (swap-AB "
                "weight tiles under {} rows an expert); GEMM2 on 128-row tiles that would "
                "leave half of the SMs idle splits K over CTA pairs",
                kSwapMaxRows, kSwapBlockRows, kOwnWideRows, kOwnMaxRows, kOwnMaxTotal,
                kWeightTilesRows),
      p.sink_experts > 0
          ? fmt::format("; {} sink experts (I={}) in bf16 on every token by cuBLAS, silu_mul, "
                        "their results put in their slots' rows",
                        p.sink_experts, p.sink_intermediate)
          : "",
      epilogue_rule(p, o));
}

// The options that cannot serve `p`: CONFIG_ERROR naming the option (docs/design.md §12).
void check_options(const moe_problem& p, const LayerOptions& o) {
  MOE_CHECK(p.sink_experts == 0 || !o.tiles || !is_own_kernel(*o.tiles), MOE_STATUS_CONFIG_ERROR,
            "deepgemm_style: gemm_tiles '{}' takes no sink experts (its kernel runs every group "
            "of the permutation); use auto, tokens or weights",
            tiles_option_name(*o.tiles));
  MOE_CHECK(!o.fused_gemm1.value_or(false) ||
                (p.activation != MOE_ACTIVATION_RELU2 && p.sink_experts == 0 &&
                 (!o.tiles || can_fuse_gemm1(*o.tiles))),
            MOE_STATUS_CONFIG_ERROR,
            "deepgemm_style: gemm1_epilogue 'fused' needs a gated activation (not relu2), no sink "
            "experts, and gemm_tiles auto, tokens_ffma or tokens_ffma192 (only the own kernel "
            "fuses it, with a tile's whole K in one CTA)");
  // The own kernels keep their groups' tile prefix in shared memory (auto_fp8_tiles avoids them
  // past it); the shared expert is a group of its own.
  const int64_t groups = p.local_experts + (p.shared_intermediate > 0 ? 1 : 0);
  MOE_CHECK(!o.tiles || !is_own_kernel(*o.tiles) || groups <= detail::ffma_max_groups(),
            MOE_STATUS_CONFIG_ERROR,
            "deepgemm_style: gemm_tiles '{}' runs at most {} groups (local experts, and the shared "
            "expert), not {}; use auto, tokens or weights",
            o.tiles ? tiles_option_name(*o.tiles) : "", detail::ffma_max_groups(), groups);
  const bool split = o.tiles && splits_k(*o.tiles);
  MOE_CHECK(!split || (p.hidden >= 2 * kBlock && p.intermediate >= 2 * kBlock),
            MOE_STATUS_CONFIG_ERROR,
            "deepgemm_style: gemm_tiles '{}' needs hidden and intermediate of at least 256 (two K "
            "blocks to split), not {} and {}",
            split ? tiles_option_name(*o.tiles) : "", p.hidden, p.intermediate);
}

// Measured on the H200 (bench/NOTES.md sessions 28-30, layer A/B): the fused epilogue 0.96-0.97x
// of the separate one with 192-row tiles (Mixtral T=512-704). With 128-row tiles, since session
// 30's branch-free epilogue: 0.97-0.99x at Mixtral T=128-384 (K of 32 blocks; three rounds), and
// at DeepSeek-V3 T=512 (56 blocks) the fused GEMM1 level with the separate one before its
// activation kernel; but 1.02-1.06x at Qwen3-30B-A3B T=256/512 (16 blocks), where the pair's
// exchange is long next to a main loop. So `auto` fuses on 192-row tiles, and on 128-row tiles
// from hidden 4096.
bool fuses_gemm1(const moe_problem& p, const LayerOptions& o, Fp8Tiles tiles, int64_t tokens) {
  if (!can_fuse_gemm1(tiles)) return false;
  if (o.fused_gemm1) return *o.fused_gemm1;
  const bool narrow_pays =
      p.hidden >= kFuseNarrowMinHidden && expected_rows(p, tokens).per_group >= kFuseNarrowMinRows;
  return (tiles == Fp8Tiles::kTokensFfma192 || narrow_pays) &&
         p.activation != MOE_ACTIVATION_RELU2 && p.sink_experts == 0;
}

DeviceLayer::DeviceLayer(const moe_problem& problem, const moe_weights& w, const Options& options)
    : problem_(problem), options_(parse_options(options)) {
  const moe_problem p = problem_.c();
  const sdk::Verdict v = check_support(p);
  MOE_CHECK(v.ok(), MOE_STATUS_UNSUPPORTED, "deepgemm_style: {}", v.message);
  const int64_t h = p.hidden, inter = p.intermediate, e = p.local_experts;
  n1_ = w13_rows(p);
  const bool shared = p.shared_intermediate > 0;
  groups_ = gpu::permutation_groups(p);  // routed experts, sinks, then the shared one
  const int64_t sinks = p.sink_experts;
  const int64_t fp8_groups = e + (shared ? 1 : 0);  // those with e4m3 weights
  sm_count_ = gpu::device_info().sm_count;
  check_options(p, options_);

  // Weights go up as the caller holds them; scales are turned MN-major on the host first.
  const size_t w13_group = size_t(n1_ * h), w2_group = size_t(h * inter);
  const size_t s13_group = size_t((n1_ / kBlock) * (h / kBlock));
  const size_t s2_group = size_t((h / kBlock) * (inter / kBlock));
  w13_ = gpu::DeviceBuffer(w13_group * size_t(fp8_groups));
  w2_ = gpu::DeviceBuffer(w2_group * size_t(fp8_groups));
  s13_ = gpu::DeviceBuffer(s13_group * size_t(fp8_groups) * sizeof(float));
  s2_ = gpu::DeviceBuffer(s2_group * size_t(fp8_groups) * sizeof(float));
  auto upload = [&](int64_t first, int64_t count, const moe_tensor& w13, const moe_tensor& s13,
                    const moe_tensor& w2, const moe_tensor& s2, const char* who) {
    w13_.upload(w13.data, w13_group * size_t(count), w13_group * size_t(first));
    w2_.upload(w2.data, w2_group * size_t(count), w2_group * size_t(first));
    using sdk::BlockScaleOrder, sdk::checked_block_scales;
    const std::vector<float> a =
        checked_block_scales(s13, fmt::format("{}w13_scale", who), count, n1_ / kBlock, h / kBlock,
                             BlockScaleOrder::kMnMajor);
    const std::vector<float> b =
        checked_block_scales(s2, fmt::format("{}w2_scale", who), count, h / kBlock, inter / kBlock,
                             BlockScaleOrder::kMnMajor);
    s13_.upload(a.data(), a.size() * sizeof(float), s13_group * size_t(first) * sizeof(float));
    s2_.upload(b.data(), b.size() * sizeof(float), s2_group * size_t(first) * sizeof(float));
  };
  upload(0, e, w.w13, w.w13_scale, w.w2, w.w2_scale, "");
  if (shared)
    upload(e, 1, w.shared_w13, w.shared_w13_scale, w.shared_w2, w.shared_w2_scale, "shared_");

  if (sinks > 0) sinks_ = std::make_unique<gpu::SinkExperts>(p, w);

  // Per permutation group: its weights (a sink group runs no rows in the e4m3 GEMMs, so it
  // points at group 0's, never read).
  std::vector<const void*> p13, p2;
  std::vector<const float*> q13, q2;
  for (int64_t g = 0; g < groups_; ++g) {
    const int64_t at = g < e ? g : g < e + sinks ? 0 : e;  // storage index
    p13.push_back(w13_.as<uint8_t>() + size_t(at) * w13_group);
    p2.push_back(w2_.as<uint8_t>() + size_t(at) * w2_group);
    q13.push_back(s13_.as<float>() + size_t(at) * s13_group);
    q2.push_back(s2_.as<float>() + size_t(at) * s2_group);
  }
  w13_ptrs_ = gpu::upload_vector(p13);
  w2_ptrs_ = gpu::upload_vector(p2);
  s13_ptrs_ = gpu::upload_vector(q13);
  s2_ptrs_ = gpu::upload_vector(q2);
  std::vector<int32_t> map(size_t(p.experts));
  for (int64_t x = 0; x < p.experts; ++x) map[size_t(x)] = local_expert_id(p, x);
  local_map_ = gpu::upload_vector(map);
  if (p.expert_bias != 0) {  // b13 [E, n1] and b2 [E, H], bf16 or f32, kept as f32
    b13_ = gpu::upload_vector(sdk::bias_values(w.b13, "b13", e * n1_));
    b2_ = gpu::upload_vector(sdk::bias_values(w.b2, "b2", e * h));
  }
  gemm_ws_bytes_ = fp8_gemm_workspace_bytes(int(groups_), sm_count_);
}

RowLayout DeviceLayer::layout(int64_t tokens) const {
  if (options_.layout) return *options_.layout;
  return tokens <= options_.masked_max_tokens ? RowLayout::kMasked : RowLayout::kContiguous;
}

Fp8Tiles DeviceLayer::tiles(int64_t tokens) const {
  return options_.tiles ? *options_.tiles : auto_fp8_tiles(problem_.c(), tokens);
}

// GEMM1 keeps whole tiles under `auto`: its f32 sums then are those a fused epilogue sees, so the
// two epilogues give the same codes (docs/design.md §12).
Fp8Tiles DeviceLayer::gemm2_tiles(int64_t tokens) const {
  const moe_problem p = problem_.c();
  const Fp8Tiles t = tiles(tokens);
  return !options_.tiles && t == Fp8Tiles::kTokensFfma &&
                 split_k_pays(p, tokens, p.hidden, p.intermediate, sm_count_)
             ? Fp8Tiles::kTokensFfmaSplitK
             : t;
}

// The pieces in a fixed order.
DeviceLayer::Workspace DeviceLayer::carve(void* base, int64_t tokens, RowLayout layout,
                                          size_t* bytes) const {
  const moe_problem p = problem_.c();
  const bool masked = layout == RowLayout::kMasked;
  gpu::WorkspaceCarver c(base);
  Workspace ws{};
  const size_t perm_bytes = masked ? gpu::masked_permutation_workspace_bytes(p, tokens)
                                   : gpu::permutation_workspace_bytes(p, tokens);
  void* perm_base = c.take(perm_bytes);
  const int64_t rows = masked ? groups_ * tokens : gpu::permutation_max_rows(p, tokens);
  if (base != nullptr) {
    ws.perm = masked ? gpu::carve_masked_permutation(p, tokens, perm_base)
                     : gpu::carve_permutation(p, tokens, perm_base);
    ws.perm.local_of_global = local_map_.as<int32_t>();
  }
  const size_t r = size_t(rows), h = size_t(p.hidden), i = size_t(p.intermediate);
  ws.rows = c.take<uint8_t>(r * h);
  ws.row_scales = c.take<float>(r * (h / kBlock));
  ws.gemm1 = c.take<float>(r * size_t(n1_));
  ws.act = c.take<uint8_t>(r * i);
  ws.act_scales = c.take<float>(r * (i / kBlock));
  ws.gemm2 = c.take<uint16_t>(r * h);
  ws.gemm_ws = c.take(gemm_ws_bytes_);
  ws.sinks = c.take(sinks_ ? sinks_->workspace_bytes(tokens) : 0);
  const bool stage = !masked && gpu::fp8_staging_pays(p.top_k, p.local_experts, p.experts);
  ws.staging = stage ? c.take(gpu::gather_quantize_fp8_staging_bytes(tokens, p.hidden)) : nullptr;
  if (bytes != nullptr) *bytes = c.used();
  return ws;
}

// Enough for any batch up to `tokens`, so one workspace serves every smaller batch too: with
// the auto layout a batch at the masked threshold can need more than a larger contiguous one.
size_t DeviceLayer::workspace_size(int64_t tokens) const {
  if (tokens == 0) return 0;
  size_t bytes = 0, masked = 0;
  carve(nullptr, tokens, layout(tokens), &bytes);
  const int64_t largest_masked = std::min(tokens, options_.masked_max_tokens);
  if (!options_.layout && largest_masked >= 1 && largest_masked < tokens)
    carve(nullptr, largest_masked, RowLayout::kMasked, &masked);
  return std::max(bytes, masked);
}

void DeviceLayer::run(const moe_run_args& a) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = sdk::check_run_tensors(p, a, [&](int64_t t) { return workspace_size(t); });
  if (tokens == 0) return;
  auto stream = static_cast<cudaStream_t>(a.stream);
  const bool masked = layout(tokens) == RowLayout::kMasked;
  const Workspace ws = carve(a.workspace, tokens, layout(tokens), nullptr);
  const gpu::Permutation& perm = ws.perm;
  const Fp8Tiles tiles = this->tiles(tokens);
  const auto* topk_ids = static_cast<const int32_t*>(a.topk_ids.data);
  if (masked)
    gpu::launch_permute_masked(p, tokens, topk_ids, perm, stream);
  else
    gpu::launch_permute(p, tokens, topk_ids, perm, stream);

  // Rows in use: [0, offsets[G]) in the contiguous layout; in the masked one the rows its slots
  // took (slot_row: T x W (+ T shared) entries, -1 for a slot of another rank or a skipped one), so
  // that the row-wise steps never visit the dead rows, most of the G x T at decode.
  const int64_t r = perm.max_rows;
  const gpu::RowRange rows = masked ? gpu::RowRange{r, nullptr, nullptr, perm.slot_row,
                                                    gpu::permutation_max_rows(p, tokens)}
                                    : gpu::RowRange{r, nullptr, perm.group_offsets + groups_};
  // The sinks' rows are skipped by the e4m3 steps (GEMMs, gather, activation): they run apart.
  const int32_t sink0 = int32_t(gpu::first_sink_group(p)),
                sink1 = int32_t(gpu::first_sink_group(p) + p.sink_experts);
  gpu::launch_gather_quantize_fp8_1x128(
      static_cast<const uint16_t*>(a.hidden.data), p.hidden, perm.row_token, rows, ws.rows,
      {ws.row_scales, 1, r}, stream, {perm.row_group, sink0, sink1}, {ws.staging, tokens});

  Fp8GemmArgs g{};
  g.groups = int(groups_);
  g.offsets = masked ? nullptr : perm.group_offsets;
  g.counts = masked ? perm.group_counts : nullptr;
  g.max_m = masked ? perm.max_m : 0;
  g.scale_ld = r;
  g.workspace = ws.gemm_ws;
  g.workspace_bytes = gemm_ws_bytes_;
  g.skip_begin = sink0;
  g.skip_end = sink1;
  g.sm_count = sm_count_;
  // The permutation wrote the group rows before the quantisation (GEMM1's previous launch) began;
  // GEMM2's is the activation or GEMM1.
  g.groups_settled = true;

  Fp8GemmArgs g1 = g;
  g1.n = int(n1_);
  g1.k = int(p.hidden);
  g1.rows = ws.rows;
  g1.row_scales = ws.row_scales;
  g1.weights = w13_ptrs_.as<const void*>();
  g1.w_scales = s13_ptrs_.as<const float*>();
  g1.weight_stack = w13_.as<uint8_t>();
  g1.w_scale_stack = s13_.as<float>();
  g1.out = ws.gemm1;
  g1.f32_out = true;
  // gemm1_epilogue: fused, where the own kernel runs: GEMM1 writes the intermediate's codes and
  // scales itself, those the activation kernel would make (the same bias, routed groups only).
  Fp8FusedGemm1 fused;
  if (fuses_gemm1(p, options_, tiles, tokens)) {
    fused.activation = int(p.activation);
    fused.alpha = p.activation_alpha;
    fused.limit = p.activation_limit;
    fused.gelu_tanh = p.gelu_tanh;
    fused.bias = p.expert_bias != 0 ? b13_.as<float>() : nullptr;
    fused.bias_groups = p.expert_bias != 0 ? int(p.local_experts) : 0;
    fused.bias_ld = n1_;
    fused.codes = ws.act;
    fused.scales = ws.act_scales;
    fused.scale_ld = r;
    g1.fused = &fused;
    g1.out = ws.act;
    g1.f32_out = false;
  }
  run_fp8_grouped_gemm(tiles, g1, stream);

  gpu::ActivationArgs act;
  act.gemm1_f32 = ws.gemm1;
  act.intermediate = p.intermediate;
  act.layout = gpu::GateUpLayout::kConcatenated;
  act.rows = rows;
  act.bias = p.expert_bias != 0 ? b13_.as<float>() : nullptr;  // routed groups only
  act.bias_groups = p.expert_bias != 0 ? int32_t(p.local_experts) : 0;
  act.row_group = perm.row_group;
  act.skip_group_begin = sink0;
  act.skip_group_end = sink1;
  act.out_fp8 = ws.act;
  act.out_scales = {ws.act_scales, 1, r};
  if (g1.fused == nullptr) gpu::launch_activation(p, act, stream);

  Fp8GemmArgs g2 = g;
  g2.n = int(p.hidden);
  g2.k = int(p.intermediate);
  g2.rows = ws.act;
  g2.row_scales = ws.act_scales;
  g2.weights = w2_ptrs_.as<const void*>();
  g2.w_scales = s2_ptrs_.as<const float*>();
  g2.weight_stack = w2_.as<uint8_t>();
  g2.w_scale_stack = s2_.as<float>();
  g2.out = ws.gemm2;
  run_fp8_grouped_gemm(gemm2_tiles(tokens), g2, stream);
  if (sinks_)
    sinks_->run(tokens, static_cast<const uint16_t*>(a.hidden.data), perm, ws.gemm2, ws.sinks,
                stream);

  gpu::FinalizeArgs fin;
  fin.gemm2 = ws.gemm2;
  fin.topk_weights = static_cast<const float*>(a.topk_weights.data);
  fin.bias = p.expert_bias != 0 ? b2_.as<float>() : nullptr;
  fin.out = static_cast<uint16_t*>(a.output.data);
  fin.accumulate = sdk::run_accumulates(a);
  gpu::launch_finalize(p, tokens, perm, fin, stream);
}

}  // namespace moe::deepgemm
