// What `moe run` runs on: weights from a checkpoint or random ones, a batch from --inputs or
// random, router logits from the checkpoint's router when there is one.
#pragma once

#include <string>

#include "moe/checkpoint.hpp"
#include "moe/config.hpp"
#include "moe/inputs.hpp"

namespace moe::tool {

struct RunInputs {
  LayerWeights weights;
  Batch batch;
  std::string weights_from, batch_from;  // for the report
};

// `inputs_path` (may be empty): a safetensors file with hidden_states [T, H] bf16 or f32 (the
// experts take f32 rounded to bf16; the router GEMM takes them in checkpoint.router_dtype's
// precision) and, when the config has no router weight, router_logits [T, E + S] f32.
RunInputs make_run_inputs(const Config& config, int64_t tokens, uint64_t seed,
                          const std::string& inputs_path);

// An --inputs file read and checked before any weight is loaded: hidden_states [T, H] (bf16, or
// f32 as stored: the router GEMM takes them so) finite, router_logits (where present) [T, E + S]
// with no NaN or +inf and every token one finite logit, and with `one_batch` (not under expert
// parallelism, where each rank takes a share) T <= max_tokens.
struct InputsFile {
  std::string path;
  HostTensor hidden;  // as stored
  HostTensor logits;  // empty: the file has none
};
InputsFile read_run_inputs_file(const Config& config, const std::string& inputs_path,
                                bool one_batch);

// The batch alone, as make_run_inputs makes it beside its weights: the file's tokens (null: none),
// with its router_logits or, when it has none, the logits of `checkpoint`'s router (null: no
// checkpoint); else `tokens` random ones, routed by the checkpoint's router where there is one.
// `from` says which, for the report.
Batch make_run_batch(const Config& config, const LayerCheckpoint* checkpoint, int64_t tokens,
                     uint64_t seed, const InputsFile* file, std::string* from);

}  // namespace moe::tool
