#include "moe_cuda/wo_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "kernels/narrow_width.hpp"
#include "moe/sdk/error.hpp"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/mxfp8_chunks.hpp"
#include "moe_cuda/tensor_map.hpp"
#include "wo_gemm_launch.hpp"

namespace moe::gpu {

int64_t wo_chunk_bytes(WoWeights w) {
  switch (w) {
    case WoWeights::kMxfp4:
      return fp4_chunk_bytes(Fp4Scales::kMx);
    case WoWeights::kNvfp4:
      return fp4_chunk_bytes(Fp4Scales::kNv);
    case WoWeights::kMxfp8:
      return kMx8ChunkBytes;
    case WoWeights::kBf16:
      return 128 * 128 * 2;
    case WoWeights::kE4m3:
      return 128 * 128;
  }
  return 0;
}

const char* wo_weights_name(WoWeights w) {
  switch (w) {
    case WoWeights::kMxfp4:
      return "mxfp4";
    case WoWeights::kNvfp4:
      return "nvfp4";
    case WoWeights::kMxfp8:
      return "mxfp8";
    case WoWeights::kBf16:
      return "bf16";
    case WoWeights::kE4m3:
      return "e4m3";
  }
  return "?";
}

int wo_gemm_max_groups() {
  return detail::wo_max_groups();
}

namespace {

// The auto token tile: the tile of least expected cost for a batch averaging `average` rows an
// expert. An expert's rows are taken as Normal(average, sqrt(average)) (uniform routing), read at
// the midpoints of its sixteen quantiles; each of its ceil(rows / tile) token blocks costs
// max(stream, tile / rate): streaming the expert's weights once (`stream`, in rows' worth of
// compute) or computing tile rows at the tile's relative throughput, whichever is longer.
// Measured on the H200 and H100 (bench/NOTES.md sessions 18-22), the model picks what the A/Bs
// picked at every point: 16 at 8 rows an expert, 32 at 16, 64 at 32 and 48, 96 at 64 and 80 (3-13%
// ahead of 128), 128 at 96, 112 and 256, 192 at 128 (5-10%), 1024 and 4096 (6% and 10% on
// Mixtral mxfp8). Past hidden 4096 (DeepSeek-V3) the model holds up to 128 rows an expert without
// 192 (96 ties 64 at 48 and 64 rows, and 128 at 80; 192 is 8% behind 128 at 128 rows on mxfp4, 3%
// on mxfp8), then it is 128 up to 256 rows (3% ahead of the model's 96 at 160), then the model
// again (192 8% ahead of 128 at 512 rows, mxfp8); why the wide layers differ is open. bf16 takes
// 256 past 512 rows (12-16% ahead of 128 at 1024).
struct TileRate {
  int tile;
  double rate;  // throughput on computed rows, relative to 128-token tiles
};
constexpr TileRate kTileRates[] = {{16, 0.25}, {32, 0.40}, {64, 0.70},
                                   {96, 0.85}, {128, 1.0}, {192, 1.15}};
constexpr int64_t kBf16TallAbove = 512;  // rows an expert past which bf16 takes 256
constexpr int64_t kWideTallAbove = 256;  // past hidden 4096: 128, no 192, up to here

// Rows whose compute takes as long as streaming the weights they multiply: throughput x bytes a
// weight / (2 flops x bandwidth), at ~600 TFLOP/s (bf16 ~490) and ~3.5 TB/s achieved.
double stream_rows(WoWeights w) {
  switch (w) {
    case WoWeights::kMxfp4:
      return 45;  // 4.25 bits a weight
    case WoWeights::kNvfp4:
      return 48;  // 4.5
    case WoWeights::kMxfp8:
      return 88;  // 8.25
    case WoWeights::kBf16:
      return 140;
    case WoWeights::kE4m3:
      // A byte a weight at twice bf16's rate would give ~170, but the A/Bs (session 23) fit
      // mxfp8's: 128 ahead of 192 by 13% at 256 rows an expert (Qwen3 T=4096), 192 ahead by 5%
      // at 128 (Mixtral T=512), tied at 1024.
      return 88;
  }
  return 0;
}

double expected_cost(int64_t average, const TileRate& t, double stream) {
  // The upper half of the standard normal's 16-quantile midpoints; the lower half mirrors them.
  constexpr double kZ[] = {0.0784, 0.2372, 0.4023, 0.5791, 0.7764, 1.0100, 1.3180, 1.8627};
  const double mean = double(average), sigma = std::sqrt(mean);
  double blocks = 0;
  for (double z : kZ)
    for (double side : {-1.0, 1.0})
      blocks += std::ceil(std::max(0.0, mean + side * z * sigma) / t.tile);
  return blocks / 16 * std::max(stream, t.tile / t.rate);
}

int tile_for_average(int64_t average, WoWeights weights, int64_t hidden, bool tall) {
  if (weights == WoWeights::kBf16 && average > kBf16TallAbove) return 256;
  const bool wide = hidden > 4096;
  if (wide && average > 128 && average <= kWideTallAbove) return 128;
  int best = kTileRates[0].tile;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const TileRate& t : kTileRates) {
    if ((t.tile == 192 && wide && average <= kWideTallAbove) ||
        (tall && (t.tile == 96 || t.tile == 192)))
      continue;
    const double cost = expected_cost(average, t, stream_rows(weights));
    if (cost < best_cost * (1 - 1e-9)) best = t.tile, best_cost = cost;
  }
  return best;
}

}  // namespace

int wo_tokens_per_tile(int64_t rows, int groups, WoWeights weights, int64_t hidden, bool tall) {
  const int64_t average = groups > 0 ? (rows + groups - 1) / groups : rows;
  return tile_for_average(average, weights, hidden, tall);
}

std::string wo_token_tile_rule(WoWeights weights, int64_t hidden) {
  // The picks as steps up to 512 rows an expert (bf16 past it: 256), then the model in words.
  constexpr int64_t kListedRows = kBf16TallAbove;
  std::string out = "tokens a tile by the batch's rows an expert on average:";
  int tile = tile_for_average(1, weights, hidden, false);
  for (int64_t r = 2; r <= kListedRows; ++r) {
    const int next = tile_for_average(r, weights, hidden, false);
    if (next == tile) continue;
    out += fmt::format(" {} up to {},", tile, r - 1);
    tile = next;
  }
  if (weights == WoWeights::kBf16)
    return out + fmt::format(" {} to {}, 256 above", tile, kListedRows);
  return out + fmt::format(
                   " {} to {}, then the tile of least expected cost (token blocks x weight "
                   "streams)",
                   tile, kListedRows);
}

int wo_narrow_width(int count, int tokens_per_tile, int n_tiles) {
  return kernels::wo::narrow_width(count, tokens_per_tile,
                                   detail::wo_pairs_ctas(tokens_per_tile, n_tiles) ? 2 : 1);
}

bool wo_tall_tiles(const WoGemmArgs& a, int tokens_per_tile) {
  return a.weight_tile_rows == 256 && a.weights == WoWeights::kBf16 &&
         (tokens_per_tile == 64 || tokens_per_tile == 128) && a.n_tiles % 2 == 0;
}

WoWeightView wo_weight_view(const WoGemmArgs& a) {
  const bool interleaved = a.weight_order == WoWeightRows::kInterleaved;
  return {interleaved ? a.weight_group_rows : int64_t(a.n_tiles) * 128,
          interleaved && a.epilogue == WoEpilogue::kGated};
}

bool encode_wo_weights_map(CUtensorMap* map, const WoGemmArgs& a) noexcept {
  const bool e4m3 = a.weights == WoWeights::kE4m3;
  const int elem = e4m3 ? 1 : 2;
  const WoWeightView v = wo_weight_view(a);
  const bool interleaved = a.weight_order == WoWeightRows::kInterleaved;
  const int64_t ld = interleaved ? a.weight_ld : int64_t(a.k_stages) * 128;
  return encode_tensor_map_row_pairs(
      map, e4m3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a.weight_rows,
      a.groups * v.group_rows, interleaved ? a.k : ld, ld, elem, v.up_first ? 2 : 1,
      v.up_first ? 1 : 8, 128 / elem);
}

void check_wo_gemm_operands(const WoGemmArgs& a) {
  constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;
  MOE_CHECK(a.groups >= 1 && a.groups <= detail::wo_max_groups() && a.offsets != nullptr, kInvalid,
            "weight-only GEMM: groups={} must be in [1, {}], with their row offsets", a.groups,
            detail::wo_max_groups());
  MOE_CHECK(a.skip_begin >= 0 && a.skip_begin <= a.skip_end && a.skip_end <= a.groups, kInvalid,
            "weight-only GEMM: skipped groups [{}, {}) must lie in [0, {}]", a.skip_begin,
            a.skip_end, a.groups);
  MOE_CHECK(a.n_tiles >= 1 && a.k_stages >= 1 && a.k >= 1 && a.k <= int64_t(a.k_stages) * 128 &&
                a.k % 8 == 0,
            kInvalid,
            "weight-only GEMM: n_tiles={}, k_stages={} and k={} must be positive, k a multiple "
            "of 8 and at most 128 x k_stages",
            a.n_tiles, a.k_stages, a.k);
  MOE_CHECK(a.weights != WoWeights::kE4m3 || a.k % 16 == 0, kInvalid,
            "weight-only GEMM: e4m3 rows of k={} must be a multiple of 16 (16-byte TMA rows)", a.k);
  MOE_CHECK(a.max_rows >= 0 && a.max_rows < (int64_t(1) << 31), kInvalid,
            "weight-only GEMM: max_rows={} must be in [0, 2^31)", a.max_rows);
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool e4m3 = a.weights == WoWeights::kE4m3;
  const int outs = (a.out != nullptr) + (a.out_f32 != nullptr) + (a.out_e4m3 != nullptr);
  const void* out = a.out != nullptr       ? static_cast<const void*>(a.out)
                    : a.out_f32 != nullptr ? static_cast<const void*>(a.out_f32)
                                           : static_cast<const void*>(a.out_e4m3);
  MOE_CHECK(a.rows && aligned16(a.rows) && outs == 1 && aligned16(out), kInvalid,
            "weight-only GEMM: rows and one of out, out_f32 and out_e4m3 must be non-null and "
            "16-byte aligned");
  MOE_CHECK((a.out_f32 == nullptr && a.out_e4m3 == nullptr) || e4m3, kInvalid,
            "weight-only GEMM: f32 and e4m3 outputs are for e4m3 weights, not {}",
            wo_weights_name(a.weights));
  MOE_CHECK(a.out_e4m3 == nullptr || a.out_e4m3_scale != nullptr, kInvalid,
            "weight-only GEMM: e4m3 output (out_e4m3) needs its scale (out_e4m3_scale)");
  MOE_CHECK(a.out_e4m3_scale == nullptr || a.out_e4m3 != nullptr, kInvalid,
            "weight-only GEMM: out_e4m3_scale is the scale of the e4m3 output (out_e4m3), which "
            "is not given");
  MOE_CHECK(
      a.out_amax == nullptr || a.out_f32 != nullptr, kInvalid,
      "weight-only GEMM: out_amax is the amax of the f32 output (out_f32), which is not given");
  const bool tiles = a.weights == WoWeights::kBf16 || e4m3;  // weight rows, not chunks
  MOE_CHECK(tiles || (a.chunks && aligned16(a.chunks)), kInvalid,
            "weight-only GEMM: {} chunks must be non-null and 16-byte aligned",
            wo_weights_name(a.weights));
  MOE_CHECK(!tiles || (a.weight_rows && aligned16(a.weight_rows)), kInvalid,
            "weight-only GEMM: {} weight rows must be non-null and 16-byte aligned",
            wo_weights_name(a.weights));
  MOE_CHECK(!e4m3 || (a.scale_2 != nullptr && a.act_scale != nullptr), kInvalid,
            "weight-only GEMM: e4m3 weights need their weight scales (scale_2) and the activation "
            "scale");
  MOE_CHECK(e4m3 || (a.act_scale == nullptr && a.act_scale_shared == nullptr), kInvalid,
            "weight-only GEMM: activation scales are for e4m3 rows, not {} weights on bf16 rows",
            wo_weights_name(a.weights));
  MOE_CHECK(a.shared_group >= -1 && a.shared_group < a.groups &&
                (a.act_scale_shared == nullptr || a.shared_group >= 0),
            kInvalid,
            "weight-only GEMM: shared_group={} must be a group of the {} (or -1: none), and "
            "act_scale_shared needs one",
            a.shared_group, a.groups);
  const int64_t tile_cols = a.epilogue == WoEpilogue::kGated ? 64 : 128;
  MOE_CHECK(a.out_cols >= 1 && a.out_cols % 8 == 0 && a.out_cols <= a.n_tiles * tile_cols &&
                a.out_ld >= a.out_cols && a.out_ld % 8 == 0,
            kInvalid,
            "weight-only GEMM: out_cols={} must be a positive multiple of 8 within the {} tiles "
            "of {} columns, and out_ld={} a multiple of 8 at least as large",
            a.out_cols, a.n_tiles, tile_cols, a.out_ld);
  MOE_CHECK(a.weights != WoWeights::kNvfp4 || a.scale_2 != nullptr, kInvalid,
            "weight-only GEMM: nvfp4 weights need their per-expert scale_2");
  const bool interleaved = a.weight_order == WoWeightRows::kInterleaved;
  // The kernel addresses weight rows with 32-bit integers.
  MOE_CHECK(!tiles || interleaved || int64_t(a.groups) * a.n_tiles * 128 < (int64_t(1) << 31),
            kInvalid, "weight-only GEMM: the {} groups' {} tiles of 128 weight rows pass 2^31 rows",
            a.groups, a.n_tiles);
  if (interleaved) {
    MOE_CHECK(tiles, kInvalid,
              "weight-only GEMM: TensorRT-LLM's interleaved rows are bf16 or e4m3 weights, not {} "
              "chunks",
              wo_weights_name(a.weights));
    MOE_CHECK(a.weight_group_rows >= 16 && a.weight_group_rows % 16 == 0 &&
                  a.weight_group_rows <= int64_t(a.n_tiles) * 128 &&
                  a.weight_group_rows * a.groups < (int64_t(1) << 31),
              kInvalid,
              "weight-only GEMM: weight_group_rows={} must be a positive multiple of 16 within "
              "the {} tiles of 128 rows, and the {} groups' rows under 2^31",
              a.weight_group_rows, a.n_tiles, a.groups);
    MOE_CHECK(a.weight_ld >= a.k && a.weight_ld % (e4m3 ? 16 : 8) == 0, kInvalid,
              "weight-only GEMM: weight_ld={} must be at least k={} and a multiple of {} (16-byte "
              "TMA rows)",
              a.weight_ld, a.k, e4m3 ? 16 : 8);
    // Stored columns come from the group's own rows only (the rows past them, in the last
    // tile, are the next group's).
    const int64_t group_cols =
        a.epilogue == WoEpilogue::kGated ? a.weight_group_rows / 2 : a.weight_group_rows;
    MOE_CHECK(a.out_cols <= group_cols, kInvalid,
              "weight-only GEMM: out_cols={} past the {} columns of a group's {} interleaved rows",
              a.out_cols, group_cols, a.weight_group_rows);
    MOE_CHECK(a.weight_tile_rows == 0 || a.weight_tile_rows == 128, kInvalid,
              "weight-only GEMM: tall tiles (weight_tile_rows={}) are for the prepared tiles, not "
              "TensorRT-LLM's interleaved rows",
              a.weight_tile_rows);
  }
  // Gated bias rows: [gate | up] columns (kTiles), or as the interleaved weights, up and gate of
  // each column side by side (kInterleaved: up at 2c, gate at 2c + 1, up_offset 0).
  const bool gated = a.epilogue == WoEpilogue::kGated;
  MOE_CHECK(a.bias == nullptr || !gated || interleaved || a.up_offset >= int64_t(a.n_tiles) * 64,
            kInvalid, "weight-only GEMM: a gated bias needs up_offset={} past the {} gate columns",
            a.up_offset, int64_t(a.n_tiles) * 64);
  MOE_CHECK(a.bias == nullptr || !gated || !interleaved || a.up_offset == 0, kInvalid,
            "weight-only GEMM: an interleaved gated bias holds column c's up value at 2c, so "
            "up_offset must be 0, not {}",
            a.up_offset);
  const int64_t bias_cols = gated && interleaved ? int64_t(a.n_tiles) * 128
                                                 : int64_t(a.n_tiles) * tile_cols + a.up_offset;
  MOE_CHECK(a.bias == nullptr ||
                (a.bias_groups >= 0 && a.bias_groups <= a.groups && a.bias_ld >= bias_cols),
            kInvalid,
            "weight-only GEMM: the bias rows ({} wide, up columns at {}) must cover the {} "
            "tiles of {} columns",
            a.bias_ld, a.up_offset, a.n_tiles, tile_cols);
  MOE_CHECK(a.tokens_per_tile == 0 || a.tokens_per_tile == 16 || a.tokens_per_tile == 32 ||
                a.tokens_per_tile == 64 || a.tokens_per_tile == 96 || a.tokens_per_tile == 128 ||
                a.tokens_per_tile == 192 ||
                (a.tokens_per_tile == 256 && a.weights == WoWeights::kBf16),
            kInvalid,
            "weight-only GEMM: tokens_per_tile={} must be 16, 32, 64, 96, 128 or 192 (256: bf16 "
            "weights only), or 0: auto",
            a.tokens_per_tile);
  MOE_CHECK(a.weight_tile_rows == 0 || a.weight_tile_rows == 128 ||
                (a.weight_tile_rows == 256 && a.weights == WoWeights::kBf16),
            kInvalid,
            "weight-only GEMM: weight_tile_rows={} must be 128 or 256 (256: bf16 weights only), "
            "or 0: 128",
            a.weight_tile_rows);
  MOE_CHECK(!a.narrow_last_blocks || a.weights == WoWeights::kBf16, kInvalid,
            "weight-only GEMM: narrow last blocks are for bf16 weights, not {}",
            wo_weights_name(a.weights));
  MOE_CHECK(a.sm_count >= 1, kInvalid, "weight-only GEMM: sm_count={} must be positive",
            a.sm_count);
}

void run_wo_grouped_gemm(const moe_problem& p, const WoGemmArgs& a, cudaStream_t stream) {
  check_wo_gemm_operands(a);
  if (a.max_rows == 0) return;
  const int n = a.tokens_per_tile != 0 ? a.tokens_per_tile
                                       : wo_tokens_per_tile(a.max_rows, a.groups, a.weights,
                                                            p.hidden, a.weight_tile_rows == 256);
  const detail::WoLaunchResult r = detail::launch_wo_gemm(p, a, n, stream);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "weight-only GEMM ({}, {} tokens per tile, {} weight tiles, {} K stages) {}: {}",
            wo_weights_name(a.weights), n, a.n_tiles, a.k_stages, r.stage ? r.stage : "",
            r.message ? r.message : "");
}

}  // namespace moe::gpu
