#include "moe_cuda/wo_gemm.hpp"

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "moe/sdk/error.hpp"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/mxfp8_chunks.hpp"
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
  }
  return "?";
}

int wo_gemm_max_groups() {
  return detail::wo_max_groups();
}

namespace {

// The auto token tile's steps: `tile` up to `most` rows an expert on average, `above` past the
// last. At least twice the average, so that the experts above it rarely take a second
// token block (measured on the H200, bench/NOTES.md sessions 18 and 20: at 16 rows an expert
// 32-row tiles are 20-27% faster than 16-row ones, at 32 rows 64-row tiles beat 32- and 128-row
// ones, at 64 rows 128-row tiles beat 64-row ones by 5-16% on Mixtral and Qwen3 in every format).
// Past hidden 4096 (DeepSeek-V3) 64-row tiles stay ahead up to 64 rows an expert: mxfp4 8% at 48
// rows, mxfp4 and mxfp8 2% at 64 (why is open: bench/NOTES.md session 20). bf16 weights take 256
// past 512 (12-16% faster than 128 at 1024 rows an expert, 4% slower at 256).
struct TileRule {
  struct Step {
    int64_t most;  // rows an expert on average, at most
    int tile;
  };
  int count = 0;
  Step steps[4];
  int above = 0;  // the tile past the last step
};

TileRule token_tile_rule(WoWeights weights, int64_t hidden) {
  TileRule r{3, {{8, 16}, {16, 32}, {hidden > 4096 ? 64 : 32, 64}}, 128};
  if (weights == WoWeights::kBf16) r.steps[r.count++] = {512, 128}, r.above = 256;
  return r;
}

}  // namespace

int wo_tokens_per_tile(int64_t rows, int groups, WoWeights weights, int64_t hidden) {
  const int64_t average = groups > 0 ? (rows + groups - 1) / groups : rows;
  const TileRule r = token_tile_rule(weights, hidden);
  for (int i = 0; i < r.count; ++i)
    if (average <= r.steps[i].most) return r.steps[i].tile;
  return r.above;
}

std::string wo_token_tile_rule(WoWeights weights, int64_t hidden) {
  const TileRule r = token_tile_rule(weights, hidden);
  std::string out = "tokens a tile by the batch's rows an expert on average:";
  for (int i = 0; i < r.count; ++i)
    out += fmt::format(" {} up to {},", r.steps[i].tile, r.steps[i].most);
  return out + fmt::format(" {} above", r.above);
}

bool wo_tall_tiles(const WoGemmArgs& a, int tokens_per_tile) {
  return a.weight_tile_rows == 256 && a.weights == WoWeights::kBf16 &&
         (tokens_per_tile == 64 || tokens_per_tile == 128) && a.n_tiles % 2 == 0;
}

void check_wo_gemm_operands(const WoGemmArgs& a) {
  constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;
  MOE_CHECK(a.groups >= 1 && a.groups <= detail::wo_max_groups() && a.offsets != nullptr, kInvalid,
            "weight-only GEMM: groups={} must be in [1, {}], with their row offsets", a.groups,
            detail::wo_max_groups());
  MOE_CHECK(a.n_tiles >= 1 && a.k_stages >= 1 && a.k >= 1 && a.k <= int64_t(a.k_stages) * 128 &&
                a.k % 8 == 0,
            kInvalid,
            "weight-only GEMM: n_tiles={}, k_stages={} and k={} must be positive, k a multiple "
            "of 8 and at most 128 x k_stages",
            a.n_tiles, a.k_stages, a.k);
  MOE_CHECK(a.max_rows >= 0 && a.max_rows < (int64_t(1) << 31), kInvalid,
            "weight-only GEMM: max_rows={} must be in [0, 2^31)", a.max_rows);
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  MOE_CHECK(a.rows && a.out && aligned16(a.rows) && aligned16(a.out), kInvalid,
            "weight-only GEMM: rows and out must be non-null and 16-byte aligned");
  const bool bf16 = a.weights == WoWeights::kBf16;
  MOE_CHECK(bf16 || (a.chunks && aligned16(a.chunks)), kInvalid,
            "weight-only GEMM: {} chunks must be non-null and 16-byte aligned",
            wo_weights_name(a.weights));
  MOE_CHECK(!bf16 || (a.weight_rows && aligned16(a.weight_rows)), kInvalid,
            "weight-only GEMM: bf16 weight rows must be non-null and 16-byte aligned");
  const int64_t tile_cols = a.epilogue == WoEpilogue::kGated ? 64 : 128;
  MOE_CHECK(a.out_cols >= 1 && a.out_cols % 8 == 0 && a.out_cols <= a.n_tiles * tile_cols &&
                a.out_ld >= a.out_cols && a.out_ld % 8 == 0,
            kInvalid,
            "weight-only GEMM: out_cols={} must be a positive multiple of 8 within the {} tiles "
            "of {} columns, and out_ld={} a multiple of 8 at least as large",
            a.out_cols, a.n_tiles, tile_cols, a.out_ld);
  MOE_CHECK(a.weights != WoWeights::kNvfp4 || a.scale_2 != nullptr, kInvalid,
            "weight-only GEMM: nvfp4 weights need their per-expert scale_2");
  MOE_CHECK(a.bias == nullptr || a.epilogue != WoEpilogue::kGated ||
                a.up_offset >= int64_t(a.n_tiles) * 64,
            kInvalid, "weight-only GEMM: a gated bias needs up_offset={} past the {} gate columns",
            a.up_offset, int64_t(a.n_tiles) * 64);
  MOE_CHECK(a.bias == nullptr || (a.bias_groups >= 0 && a.bias_groups <= a.groups &&
                                  a.bias_ld >= a.n_tiles * tile_cols + a.up_offset),
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
  MOE_CHECK(a.sm_count >= 1, kInvalid, "weight-only GEMM: sm_count={} must be positive",
            a.sm_count);
}

void run_wo_grouped_gemm(const moe_problem& p, const WoGemmArgs& a, cudaStream_t stream) {
  check_wo_gemm_operands(a);
  if (a.max_rows == 0) return;
  const int n = a.tokens_per_tile != 0
                    ? a.tokens_per_tile
                    : wo_tokens_per_tile(a.max_rows, a.groups, a.weights, p.hidden);
  const detail::WoLaunchResult r = detail::launch_wo_gemm(p, a, n, stream);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "weight-only GEMM ({}, {} tokens per tile, {} weight tiles, {} K stages) {}: {}",
            wo_weights_name(a.weights), n, a.n_tiles, a.k_stages, r.stage ? r.stage : "",
            r.message ? r.message : "");
}

}  // namespace moe::gpu
