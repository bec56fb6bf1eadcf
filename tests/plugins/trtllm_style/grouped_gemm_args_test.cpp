// The grouped GEMM launchers' argument checks, which fail before any CUDA call: so they run on
// any machine. The pointers are never dereferenced.
#include <cstdint>

#include "../../support/test_env.hpp"
#include "src/grouped_gemm.hpp"

namespace moe::test {
namespace {

using trtllm::GemmTiles;
using trtllm::GroupedGemmArgs;

alignas(16) char arena[256];

GroupedGemmArgs args_with(int n) {
  GroupedGemmArgs a;
  a.groups = 2;
  a.offsets = reinterpret_cast<const int64_t*>(arena);
  a.n = n;
  a.k = 64;
  a.rows = arena;
  a.weights = reinterpret_cast<const void* const*>(arena);
  a.out = arena + 64;
  a.workspace = arena + 128;
  a.workspace_bytes = 1 << 20;
  a.sm_count = 132;
  return a;
}

TEST(GroupedGemmArgs, MisalignedOperandsAreAnInvalidArgument) {
  GroupedGemmArgs a = args_with(64);
  a.out = arena + 2;
  expect_error([&] { trtllm::run_grouped_gemm(GemmTiles::kTokens, a, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, {"must be 16-byte aligned"});
}

TEST(GroupedGemmArgs, NotAMultipleOf8IsUnsupported) {
  expect_error([&] { trtllm::run_grouped_gemm(GemmTiles::kWide, args_with(60), nullptr); },
               MOE_STATUS_UNSUPPORTED, {"N=60", "multiples of 8"});
}

TEST(GroupedGemmArgs, E4m3OperandsNeedMultiplesOf16AndTheirScales) {
  trtllm::Fp8Scales scales;
  GroupedGemmArgs a = args_with(40);  // 80 bytes of bf16, 40 of e4m3
  a.fp8 = &scales;
  expect_error([&] { trtllm::run_grouped_gemm(GemmTiles::kTokens, a, nullptr); },
               MOE_STATUS_UNSUPPORTED, {"e4m3", "N=40", "multiples of 16"});
  a.n = 64;
  expect_error([&] { trtllm::run_grouped_gemm(GemmTiles::kTokens, a, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, {"e4m3", "activation or weight scales"});
}

TEST(GroupedGemmArgs, AGatedActivationEpilogueNeedsNAMultipleOf16) {
  moe_problem p{};
  p.activation = MOE_ACTIVATION_SILU_MUL;
  expect_error(
      [&] {
        trtllm::run_grouped_gemm_activation(GemmTiles::kTokens, p, args_with(24), {}, nullptr);
      },
      MOE_STATUS_UNSUPPORTED, {"gated N=24", "multiple of 16"});
}

TEST(GroupedGemmArgs, Relu2WithSiluGroupsIsAnInvalidArgument) {
  moe_problem p{};
  p.activation = MOE_ACTIVATION_RELU2;
  trtllm::ActivationEpilogueArgs e;
  e.silu_begin = 2;
  e.silu_end = 3;
  expect_error(
      [&] {
        trtllm::run_grouped_gemm_activation(GemmTiles::kTokens, p, args_with(64), e, nullptr);
      },
      MOE_STATUS_INVALID_ARGUMENT, {"relu2 rows", "silu_mul groups [2, 3)"});
}

}  // namespace
}  // namespace moe::test
