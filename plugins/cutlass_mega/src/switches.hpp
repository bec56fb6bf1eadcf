// cutlass_mega's measurement switches (docs/design.md §13): environment variables read at prepare,
// each with the values it knows. A set MOE_MEGA_ variable that is not a switch, or a switch holding
// a value it does not know, is refused at prepare, naming it: a typo (MOE_MEGA_GEMM2=Early) would
// otherwise run, and measure, the default.
#pragma once

#include <string>

namespace moe::mega {

// The switch `name` set to `value` in the environment (off unless set). `value` must be one the
// switch knows (an INTERNAL error otherwise: the table and the code disagree).
bool env_is(const char* name, const char* value);

// "" when every MOE_MEGA_ variable of `env` (NAME=VALUE strings, null-terminated, as `environ`)
// is a switch holding one of its values; else the first that is not, named with what is
// accepted.
std::string switch_error(const char* const* env);

// switch_error on the process's environment, refused as CONFIG_ERROR.
void check_switches();

}  // namespace moe::mega
