// Helpers for writing a plugin in C++: the exception guard at the ABI, the per-thread last
// error, logging through the host, struct-size checks and argument validation. A plugin links
// this statically (moe_registry::sdk); nothing here crosses the ABI.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::sdk {

// ---- last error and the guard --------------------------------------------------------------

const char* last_error() noexcept;
void set_last_error(const char* message) noexcept;

// Every table entry goes through here: no exception crosses the ABI.
template <class Fn>
moe_status guarded(Fn&& fn) noexcept {
  try {
    fn();
    set_last_error("");
    return MOE_STATUS_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return MOE_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return MOE_STATUS_INTERNAL;
  } catch (...) {
    set_last_error("unknown exception inside the plugin");
    return MOE_STATUS_INTERNAL;
  }
}

// ---- host services --------------------------------------------------------------------------

// Stores the host table (checked) and the plugin's name for log lines. Called from init().
void init_host(const moe_host_api* host, const char* plugin_name);
void log(moe_log_level level, std::string_view message);
template <class... Args>
void logf(moe_log_level level, fmt::format_string<Args...> f, Args&&... args) {
  log(level, fmt::format(f, std::forward<Args>(args)...));
}

// ---- structs crossing the ABI ----------------------------------------------------------------

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

// Checked copy of the caller's problem: struct size, normalised, validated.
moe_problem read_problem(const moe_problem* problem);

// Writes the fields of `value` that fit in the caller's output struct (its struct_size kept).
template <class T>
void write_struct(T* out, const T& value) {
  const size_t caller_size = out->struct_size;
  std::memcpy(out, &value, std::min(sizeof(T), caller_size));
  out->struct_size = caller_size;
}

// Fills a moe_support answer (checked) with yes, or no + reason + message.
void answer_support(moe_support* out, moe_reason reason, std::string_view message);

// ---- tensors ---------------------------------------------------------------------------------

constexpr int64_t kAnyDim = -1;

bool is_contiguous(const moe_tensor& t);
std::string tensor_str(const moe_tensor& t);  // e.g. "[5, 2048] bf16"

// Checks presence, dtype, rank, shape (kAnyDim matches any extent) and contiguity; throws
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
// Same for moe_route_args; returns T.
int64_t check_route_tensors(const moe_problem& problem, const moe_route_args& args);

}  // namespace moe::sdk
