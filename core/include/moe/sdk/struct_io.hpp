// Reading and writing the structs that cross the ABI by the struct_size rules (docs/design.md §2
// rule 3): minimum sizes, callers older or newer than this build, outputs written where they fit.
#pragma once

#include <algorithm>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/error.hpp"

namespace moe::sdk {

// Throws INVALID_ARGUMENT for NULL and ABI_MISMATCH for a struct_size below `min_size`.
void check_struct_size(const void* ptr, size_t struct_size, size_t min_size, const char* name);
template <class T>
void check_struct(const T* ptr, size_t min_size, const char* name) {
  if (ptr == nullptr) MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{} is NULL", name);
  check_struct_size(ptr, ptr->struct_size, min_size, name);
}

// Copies the fields a caller's struct holds over our defaults; later fields keep defaults.
template <class T>
T read_struct(const T* ptr, const T& defaults) {
  T out = defaults;
  std::memcpy(&out, ptr, std::min(sizeof(T), ptr->struct_size));
  out.struct_size = sizeof(T);
  return out;
}

// Writes the fields of `value` that fit in the caller's output struct (its struct_size and ext
// chain kept: they are the caller's, not out-fields). A moe_problem is a value the caller passes
// back in, written whole: its ext is `value`'s (NULL), never an uninitialised field of the caller.
template <class T>
void write_struct(T* out, const T& value) {
  const size_t caller_size = out->struct_size;
  const auto caller_ext = out->ext;
  std::memcpy(out, &value, std::min(sizeof(T), caller_size));
  out->struct_size = caller_size;
  if constexpr (!std::is_same_v<T, moe_problem>) out->ext = caller_ext;
}

// moe_run_args.accumulate (ABI 1.4) as the caller set it: false where its struct is older than
// the field; INVALID_ARGUMENT for a value other than 0 or 1.
bool run_accumulates(const moe_run_args& args);

// moe_bench_args.runs read by the stride rule (docs/design.md §2.7): num_runs structs laid out
// runs[0].struct_size bytes apart (a 1.6 caller's size; a 1.1-1.3 caller's 496 bytes, a 1.4-1.5
// caller's 504), each copied over zeroed defaults. INVALID_ARGUMENT for no runs or a run whose
// struct_size differs from the first's; ABI_MISMATCH below the minimum.
std::vector<moe_run_args> read_bench_runs(const moe_bench_args& args);

// Whether the caller asks run() to route (ABI 1.6): its struct holds router_logits and their data
// is not NULL. False for an older caller's struct.
bool run_routes(const moe_run_args& args);
// INVALID_ARGUMENT where the caller's struct holds routing_bias or is_padding data without
// router_logits: those fields belong to routing in run, and a run from topk_ids would ignore them.
void check_routing_fields_of_run(const moe_run_args& args);

// The moe_route_args of a run that routes (run_routes): the run's logits, bias, padding, ids,
// weights, workspace and stream, for `problem` (borrowed: it must outlive the call).
moe_route_args route_args_of_run(const moe_run_args& args, const moe_problem& problem);

// Checked copy of the caller's problem: struct size, extension chain, normalised, validated.
// Throws moe::Refusal for an enum value this build does not know.
moe_problem read_problem(const moe_problem* problem);

// Fills a moe_support answer (checked) with yes, or no + reason + message; `routes` (-1 = leave
// the caller's value) where the caller's struct holds it.
void answer_support(moe_support* out, moe_reason reason, std::string_view message,
                    int32_t routes = -1);

}  // namespace moe::sdk
