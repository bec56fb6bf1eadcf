// Argument validation of the tensors a plugin is handed: a wrong shape, dtype, size or workspace
// is a clear status naming the tensor, never a crash inside a kernel.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

constexpr int64_t kAnyDim = -1;

bool is_contiguous(const moe_tensor& t);
std::string tensor_str(const moe_tensor& t);  // e.g. "[5, 2048] bf16"

// Checks presence (data may be NULL only where a dimension is 0), dtype, rank, shape (kAnyDim
// matches any extent) and contiguity; throws
// SHAPE_MISMATCH / DTYPE_MISMATCH / INVALID_ARGUMENT naming `name` and both shapes.
void check_tensor(const moe_tensor& t, const char* name, moe_dtype dtype,
                  std::initializer_list<int64_t> shape);
// Like check_tensor, for tensors that may be absent (data == NULL).
bool check_optional_tensor(const moe_tensor& t, const char* name, moe_dtype dtype,
                           std::initializer_list<int64_t> shape);

// Validates moe_run_args tensors against `problem` (hidden, ids, weights, output, workspace)
// and returns T. Throws CAPACITY_EXCEEDED when T > max_tokens or the workspace is short.
// `wide_output_ok` also accepts an f32 or f64 output (the reference, as an oracle, does).
int64_t check_run_tensors(const moe_problem& problem, const moe_run_args& args,
                          size_t workspace_needed, bool wide_output_ok = false);
// The workspace check of check_run_tensors alone: CAPACITY_EXCEEDED when args' workspace is
// short of `workspace_needed` bytes for `tokens` tokens (INVALID_ARGUMENT when it is NULL).
void check_run_workspace(const moe_run_args& args, size_t workspace_needed, int64_t tokens);
// check_run_tensors with the workspace `workspace_for(T)` bytes asked only once the tensors and
// T <= max_tokens are checked: a size function may refuse, or overflow, for a T past them, which
// would name the wrong problem.
template <class WorkspaceFor>
requires std::is_invocable_r_v<size_t, WorkspaceFor&, int64_t> int64_t check_run_tensors(
    const moe_problem& problem, const moe_run_args& args, WorkspaceFor&& workspace_for) {
  const int64_t tokens = check_run_tensors(problem, args, 0);
  check_run_workspace(args, workspace_for(tokens), tokens);
  return tokens;
}
// Same for moe_route_args; returns T.
int64_t check_route_tensors(const moe_problem& problem, const moe_route_args& args);

}  // namespace moe::sdk
