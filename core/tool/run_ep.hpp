// The expert-parallel branch of `moe run` (cmd_run_ep.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "commands.hpp"
#include "moe/config.hpp"

namespace moe::tool {

struct EpRunOptions {
  int64_t tokens = 16;  // per rank
  uint64_t seed = 1;
  bool skew = false;        // every token to rank 0's experts
  int32_t empty_rank = -1;  // this rank gets no tokens
  int32_t bench = 0;        // > 0: time this many steps (and NCCL's all-to-all of the same bytes)
  std::string inputs;       // --inputs: every rank reads it and runs its share of the tokens
  std::string output;       // --output: rank 0 writes every rank's rows, in token order
  std::string jsonl;        // --ep-jsonl: with bench, each rank appends its record here
  int32_t chunks = 1;       // --ep-chunks: with bench, the device step chunked too (> 1)
};

void run_expert_parallel(const Config& config, const Discovery& d, const EpRunOptions& options);

}  // namespace moe::tool
