// Backend options: the YAML `options:` map as ordered key/value strings, as the host hands them
// to prepare (moe_prepare_args.options) and a plugin reads them back.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe {

using Options = std::vector<std::pair<std::string, std::string>>;

// A copy of the caller's option array (borrowed for the call); NULL keys or values are refused.
Options read_options(const moe_option* options, int64_t count);

}  // namespace moe
