// Random inputs of a problem's shape: canonical weights quantised to the problem's format, and
// batches (hidden states, router logits, selection bias, padding mask). Deterministic per seed
// on every platform (own generator, no std:: distributions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/host_tensor.hpp"

namespace moe {

// splitmix64 stream with uniform and normal draws.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // N(0, 1), Box-Muller
 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// FNV-1a of `n` bytes, continuing from `h` (chain calls to hash several pieces): checksums,
// digests and seeds that are the same on every machine.
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnvOffset);

uint64_t mix_seed(uint64_t seed, std::string_view salt);

// Canonical weights that own their storage; view() borrows them as moe_weights.
struct LayerWeights {
  HostTensor w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, b13, b2, a13_scale, a2_scale;
  HostTensor shared_w13, shared_w13_scale, shared_w13_scale_2, shared_w2, shared_w2_scale,
      shared_w2_scale_2;
  HostTensor sink_w13, sink_w2;
  moe_weights view() const;
};

// Weights ~ N(0, 1/K) times a smooth per-block magnitude factor (so a misplaced scale shows),
// quantised with the rules of formats.hpp. With EP, only this rank's local experts.
LayerWeights random_weights(const moe_problem& problem, uint64_t seed);

// For model-sized layers (tens of GB: benchmarks, gpu_sized conformance), on every core. Plain
// bf16 layers: uniform values of the same spread from a hash of (seed, index). Every other layer:
// random_weights' distribution and scale-block structure, each matrix from its own stream (so
// the values differ from random_weights'). DeepSeek-V3 (11.3 G elements), timed on 4 of its
// experts: random_weights 16 ns (bf16) / 32 ns (fp8_block) per element on one core, 3 / 6 min;
// this 3.2 / 32 ns per element per core, ~2 s / ~25 s on 16 cores.
LayerWeights random_weights_fast(const moe_problem& problem, uint64_t seed);

// The weights of `ep`'s local experts (in local order) out of a whole layer's `global` weights;
// shared, sink and activation-scale tensors are copied whole.
LayerWeights slice_local_experts(const LayerWeights& global, const moe_problem& ep);

enum class Scenario {
  kRandom,     // routed from N(0, 2) logits
  kTies,       // logits on a 0.5 grid: many exact ties
  kPadding,    // every third token is padding (all ids -1, zero output row)
  kOneExpert,  // every token to one expert with weight 1, other routed slots -1
};
const char* scenario_name(Scenario s);
bool parse_scenario(std::string_view name, Scenario* out);

struct Batch {
  HostTensor hidden;      // [T, H] bf16
  HostTensor logits;      // [T, E + S] f32
  HostTensor bias;        // [E] f32 iff routing_bias, else empty
  HostTensor is_padding;  // [T] u8 for kPadding, else empty
};

// `bias_std`: spread of the selection bias. The default 0.5 makes the bias matter to the choice
// (conformance); a model's trained correction bias is far smaller, and a large one routes most
// tokens to a few experts, so benchmarks pass a small one.
Batch random_batch(const moe_problem& problem, int64_t tokens, uint64_t seed, Scenario scenario,
                   double bias_std = 0.5);

}  // namespace moe
