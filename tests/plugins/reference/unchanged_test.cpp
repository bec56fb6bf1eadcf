// The reference's outputs are pinned bit for bit: every small problem of configs/problems, fixed
// seeds, f64 output, FNV-1a of the bytes. The checksums were recorded before the GEMMs moved
// behind ExpertGemms (so the GPU oracle could share the rest of the layer) and prove that move
// changed no bit. A change here means the oracle's semantics changed: re-record only on purpose
// (the failure prints the new line). They depend on random_weights, random_batch and libm, so a
// platform with another libm may need its own recording.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "moe/conformance.hpp"
#include "moe/inputs.hpp"
#include "moe/sdk/problem.hpp"
#include "reference_layer.hpp"
#include "routing.hpp"

namespace {

struct Pinned {
  const char* problem;
  moe::Scenario scenario;
  uint64_t checksum;
};

constexpr auto kRandom = moe::Scenario::kRandom;
constexpr auto kPadding = moe::Scenario::kPadding;

// Recorded with the reference at 5b6819d (before ExpertGemms); the fp8_block problems on whole
// blocks and the decode ones were added at 2026-12-01 with the reference unchanged;
// fp8_tensor_static re-recorded 2026-12-02 when its problem grew to H = 256, I = 128; the 4-bit
// decode problems on e4m3 activations added 2026-12-05 with the reference unchanged;
// bf16_many_tokens and ep_linear_own_map added 2026-12-06 (session 56), the reference unchanged.
const Pinned kPinned[] = {
    {"bf16_gelu_tanh_bias_select", kRandom, 0x14dbf28c888110c2ull},
    {"bf16_gelu_tanh_bias_select", kPadding, 0x9566fa0da1e69551ull},
    {"bf16_grouped_topk_shared", kRandom, 0x8477379d20bdb88dull},
    {"bf16_grouped_topk_shared", kPadding, 0x553e1b7b91bc3f54ull},
    {"bf16_decode_grouped_shared", kRandom, 0x03d050c31b28bf21ull},
    {"bf16_decode_grouped_shared", kPadding, 0x04c16671ab63b048ull},
    {"bf16_decode_relu2", kRandom, 0xd621690054c42208ull},
    {"bf16_decode_relu2", kPadding, 0x98d10c6381f66e17ull},
    {"bf16_decode_silu", kRandom, 0xce7e52cca5300111ull},
    {"bf16_decode_silu", kPadding, 0x2178b18a2c57db6aull},
    {"bf16_decode_sinks", kRandom, 0x166f36167b072b5full},
    {"bf16_decode_sinks", kPadding, 0x951b42337f0f5a68ull},
    {"bf16_many_tokens", kRandom, 0x8d4d5f7b926db3b5ull},
    {"bf16_many_tokens", kPadding, 0x4b6169988bdc2877ull},
    {"bf16_relu2", kRandom, 0x9310f4e97c7de9f0ull},
    {"bf16_relu2", kPadding, 0xe4f5523e7d003d13ull},
    {"bf16_sigmoid_gelu_odd", kRandom, 0x5c6926be420fb722ull},
    {"bf16_sigmoid_gelu_odd", kPadding, 0xbb93922538ddc21bull},
    {"bf16_silu_clamp", kRandom, 0xda5d77cc75ecbe37ull},
    {"bf16_silu_clamp", kPadding, 0xc0b6df7cedd10317ull},
    {"bf16_sink_inkling", kRandom, 0xa061171bfed5769full},
    {"bf16_sink_inkling", kPadding, 0x478260970ea94711ull},
    {"bf16_softmax_silu", kRandom, 0x751d811cdd6c8c25ull},
    {"bf16_softmax_silu", kPadding, 0x9ab94b26b3f33bbcull},
    {"bf16_swiglu_oai_bias", kRandom, 0x8b9c96ba5985e7f7ull},
    {"bf16_swiglu_oai_bias", kPadding, 0x382bf1bba0268a55ull},
    {"bf16_top1_many_experts", kRandom, 0x92c5c79208ded6f5ull},
    {"bf16_top1_many_experts", kPadding, 0x7a9ab3351dbf0b39ull},
    {"ckpt_deepseek_fp8_block", kRandom, 0x3c439d1994e88107ull},
    {"ckpt_deepseek_fp8_block", kPadding, 0xe46552165de0ca47ull},
    {"ckpt_gpt_oss_bf16", kRandom, 0x96e3519cfba95fd2ull},
    {"ckpt_gpt_oss_bf16", kPadding, 0xe3288538da56d5b2ull},
    {"ckpt_gpt_oss_mxfp4", kRandom, 0x0da77cb9d1f92e61ull},
    {"ckpt_gpt_oss_mxfp4", kPadding, 0xa2a4c87052b89969ull},
    {"ckpt_mixtral_nvfp4", kRandom, 0x73266fbf435ea7c5ull},
    {"ckpt_mixtral_nvfp4", kPadding, 0x2bbd8409af56c9b6ull},
    {"ckpt_qwen_moe_fp8_tensor", kRandom, 0x9883031d6f48c164ull},
    {"ckpt_qwen_moe_fp8_tensor", kPadding, 0xa6cf404dd27013efull},
    {"ckpt_stacked_interleaved_mxfp8", kRandom, 0x52e5d11dee8b4184ull},
    {"ckpt_stacked_interleaved_mxfp8", kPadding, 0xa64a5932b759f482ull},
    {"ep_linear", kRandom, 0xee685064b9ad9294ull},
    {"ep_linear", kPadding, 0x60ede0d34d9308b3ull},
    {"ep_linear_own_map", kRandom, 0x8e760224f5991e47ull},
    {"ep_linear_own_map", kPadding, 0x96759b57a182d884ull},
    {"ep_round_robin", kRandom, 0x4403e83aaa836b19ull},
    {"ep_round_robin", kPadding, 0xcac62dd5ddf5f256ull},
    {"fp8_block_bf16_input", kRandom, 0x37be274c252c5c0full},
    {"fp8_block_bf16_input", kPadding, 0x3d309b31373a187eull},
    {"fp8_block_grouped", kRandom, 0xf90ac80200441db6ull},
    {"fp8_block_grouped", kPadding, 0x8b1a19c793f5d141ull},
    {"fp8_block_bias_shared", kRandom, 0x3d62c7ace714eff1ull},
    {"fp8_block_bias_shared", kPadding, 0x153d5610cbb2a073ull},
    {"fp8_block_decode_relu2", kRandom, 0x175ef8d007d6e085ull},
    {"fp8_block_decode_relu2", kPadding, 0x11e7fcab07759978ull},
    {"fp8_block_decode_shared", kRandom, 0x9fff812fb1a99285ull},
    {"fp8_block_decode_shared", kPadding, 0x3b3e0945fd86fd62ull},
    {"fp8_block_decode_silu", kRandom, 0x897847c11a6f8d96ull},
    {"fp8_block_decode_silu", kPadding, 0xf7a98088b52e5d8cull},
    {"fp8_block_relu2", kRandom, 0x9b36ad343208b24aull},
    {"fp8_block_relu2", kPadding, 0x9a298c58b4122dc4ull},
    {"fp8_block_sinks", kRandom, 0xb36ad9a96be3bb7dull},
    {"fp8_block_sinks", kPadding, 0x361188f03bee0ca8ull},
    {"fp8_block_swiglu_shared", kRandom, 0x1a34c0da5087d38aull},
    {"fp8_block_swiglu_shared", kPadding, 0xa43c99613a0bf99bull},
    {"fp8_tensor_dynamic", kRandom, 0x5d93ba20203aebddull},
    {"fp8_tensor_dynamic", kPadding, 0x23b9c73cbaa01950ull},
    {"fp8_tensor_static", kRandom, 0x94fa1b887f5b3196ull},
    {"fp8_tensor_static", kPadding, 0xf1289fde37fcf1a3ull},
    {"mxfp4_bf16_input", kRandom, 0xc64f5fc3340ec101ull},
    {"mxfp4_bf16_input", kPadding, 0x728a146c50ffe57bull},
    {"mxfp4_decode_silu", kRandom, 0x4f60a0b7b878ced6ull},
    {"mxfp4_decode_silu", kPadding, 0x92f540a81192bf33ull},
    {"mxfp4_decode_fp8_static", kRandom, 0xd69fbb837a6b700eull},
    {"mxfp4_decode_fp8_static", kPadding, 0x93001455a95ddea8ull},
    {"mxfp4_decode_mxfp8_input", kRandom, 0x7e25ef75a0911632ull},
    {"mxfp4_decode_mxfp8_input", kPadding, 0x79bd52456eb6078full},
    {"nvfp4_decode_fp8_dynamic", kRandom, 0x0c3487068d285bc5ull},
    {"nvfp4_decode_fp8_dynamic", kPadding, 0x605787e30d1e9077ull},
    {"mxfp4_decode_swiglu_oai_bias", kRandom, 0xa8541322869c042full},
    {"mxfp4_decode_swiglu_oai_bias", kPadding, 0x70385263613fc750ull},
    {"mxfp4_mxfp8_input", kRandom, 0x66a7eb3d0490a62full},
    {"mxfp4_mxfp8_input", kPadding, 0xcdad5422354a33c5ull},
    {"mxfp8", kRandom, 0xbaff5072d67be9c0ull},
    {"mxfp8", kPadding, 0x6386f95203c49d33ull},
    {"mxfp8_bf16_input", kRandom, 0x1126793f332d516eull},
    {"mxfp8_bf16_input", kPadding, 0x1102964bc14486a9ull},
    {"nvfp4_decode_relu2", kRandom, 0xa2a1830c9dbaad64ull},
    {"nvfp4_decode_relu2", kPadding, 0xea2d7f681f464475ull},
    {"nvfp4_fp8_input", kRandom, 0x7244f597f0ce11baull},
    {"nvfp4_fp8_input", kPadding, 0xb6428f5506d4b1d5ull},
    {"nvfp4_shared", kRandom, 0xd3900a646edf0079ull},
    {"nvfp4_shared", kPadding, 0xc404234a81fd5942ull},
};

// The reference layer's f64 output on 33 tokens (max_tokens if fewer) of `scenario`, routed by
// the reference: weights from seed mix_seed(1, name), the batch from mix_seed(2, name).
uint64_t output_checksum(const moe::ProblemFile& pf, moe::Scenario scenario) {
  const moe_problem p = pf.problem.c();
  const moe::LayerWeights w = moe::random_weights(p, moe::mix_seed(1, pf.name));
  const moe::reference::Layer layer(p, w.view());
  const int64_t tokens = std::min<int64_t>(33, p.max_tokens), width = moe::topk_width(p);
  const moe::Batch b = moe::random_batch(p, tokens, moe::mix_seed(2, pf.name), scenario);
  moe::HostTensor ids(MOE_DTYPE_I32, {tokens, width}), weights(MOE_DTYPE_F32, {tokens, width});
  moe::HostTensor out(MOE_DTYPE_F64, {tokens, p.hidden});
  moe::reference::route(p, tokens, b.logits.data<float>(),
                        p.routing_bias ? b.bias.data<float>() : nullptr,
                        b.is_padding.empty() ? nullptr : b.is_padding.data<uint8_t>(),
                        ids.data<int32_t>(), weights.data<float>());
  moe_run_args a{};
  a.struct_size = sizeof(a);
  a.hidden = b.hidden.view();
  a.topk_ids = ids.view();
  a.topk_weights = weights.view();
  a.output = out.view();
  layer.run(a);
  return moe::fnv1a(out.raw(), out.bytes());
}

TEST(ReferenceUnchanged, EverySmallProblemKeepsItsPinnedOutputBits) {
  std::map<std::string, moe::ProblemFile> files;
  for (auto& pf : moe::load_problem_dir(MOE_SOURCE_DIR "/configs/problems"))
    if (!pf.gpu_sized) files.emplace(pf.name, std::move(pf));
  size_t pinned_problems = 0;
  for (const auto& [name, pf] : files) {
    bool found = false;
    for (const Pinned& pin : kPinned) found |= name == pin.problem;
    pinned_problems += found;
    EXPECT_TRUE(found) << name << " is a new small problem: pin its checksums here";
  }
  EXPECT_EQ(pinned_problems, files.size());
  for (const Pinned& pin : kPinned) {
    const auto it = files.find(pin.problem);
    ASSERT_NE(it, files.end()) << pin.problem << " is no longer in configs/problems";
    const uint64_t got = output_checksum(it->second, pin.scenario);
    char line[160];
    std::snprintf(line, sizeof(line), "{\"%s\", k%s, 0x%016" PRIx64 "ull},", pin.problem,
                  pin.scenario == kRandom ? "Random" : "Padding", got);
    EXPECT_EQ(got, pin.checksum) << "changed output bits; now: " << line;
  }
}

}  // namespace
