// Number options checked while the command line is parsed: a bad value is a usage error (exit 2)
// naming the option and the value, before any plugin loads or any weights are drawn.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace moe::tool {

// A decimal integer in [min, max]: "8", not "8x", "1e3", "0x10" or "".
CLI::Validator integer_in(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());

// `text` as a decimal integer in [min, max], else nullopt (the rule integer_in() checks).
std::optional<int64_t> parse_integer(const std::string& text, int64_t min,
                                     int64_t max = std::numeric_limits<int64_t>::max());

// A seed: a decimal integer in [0, 2^64 - 1].
CLI::Validator seed_value();

// Comma-separated token counts, each a decimal integer >= 1: "1,8,64".
CLI::Validator token_counts();
// The counts of a list token_counts() accepted.
std::vector<int64_t> parse_token_counts(const std::string& list);

}  // namespace moe::tool
