// Argument validation shared by every plugin: a wrong shape, dtype or size is a clear status,
// never a crash inside a kernel.
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/tensor_checks.hpp"

namespace moe::sdk {

bool is_contiguous(const moe_tensor& t) {
  bool all_zero = true;
  for (int i = 0; i < t.ndim; ++i) all_zero = all_zero && t.strides[i] == 0;
  if (all_zero) return true;
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

std::string tensor_str(const moe_tensor& t) {
  if (t.ndim < 0 || t.ndim > MOE_TENSOR_MAX_DIMS) return fmt::format("<ndim {}>", t.ndim);
  std::vector<int64_t> dims(t.shape, t.shape + t.ndim);
  return fmt::format("[{}] {}", fmt::join(dims, ", "), dtype_name(static_cast<moe_dtype>(t.dtype)));
}

namespace {

std::string expected_str(std::initializer_list<int64_t> shape, moe_dtype dtype) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(d == kAnyDim ? "*" : std::to_string(d));
  return fmt::format("[{}] {}", fmt::join(dims, ", "), dtype_name(dtype));
}

// A run's tensor (checked by check_tensor first) with elements starts on a multiple of their size:
// a kernel's typed loads and stores at a misaligned address fault and leave the context unusable.
// (Weights are not checked so: a checkpoint's tensors may lie at any offset of a mapped file, and
// prepare copies them.)
void check_aligned(const moe_tensor& t, const char* name) {
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) return;  // no element to read or write (an empty batch's buffers)
  const size_t bytes = dtype_size(static_cast<moe_dtype>(t.dtype));
  MOE_CHECK(bytes <= 1 || reinterpret_cast<uintptr_t>(t.data) % bytes == 0,
            MOE_STATUS_INVALID_ARGUMENT,
            "{}: data at {} is not aligned to its {}-byte elements; pass an aligned buffer", name,
            t.data, bytes);
}

// Bytes [data, data + size) of a checked tensor (its shape is valid), empty for no data.
std::pair<uintptr_t, uintptr_t> byte_range(const moe_tensor& t) {
  const auto at = reinterpret_cast<uintptr_t>(t.data);
  if (t.data == nullptr) return {at, at};
  size_t bytes = dtype_size(static_cast<moe_dtype>(t.dtype));
  for (int i = 0; i < t.ndim; ++i) bytes *= size_t(t.shape[i]);
  return {at, at + bytes};
}

// An output written while `other` is read or written must not share a byte with it: the
// routing's ids over its weights came back as the weights' bits, with a success.
void check_apart(const moe_tensor& out, const char* out_name, const moe_tensor& other,
                 const char* other_name) {
  const auto [a0, a1] = byte_range(out);
  const auto [b0, b1] = byte_range(other);
  MOE_CHECK(a0 == a1 || b0 == b1 || a1 <= b0 || b1 <= a0, MOE_STATUS_INVALID_ARGUMENT,
            "{} and {} overlap in memory ({} bytes at {:#x}, {} at {:#x}); the call writes {}: "
            "pass separate buffers",
            out_name, other_name, a1 - a0, a0, b1 - b0, b0, out_name);
}

void check_run_tensor(const moe_tensor& t, const char* name, moe_dtype dtype,
                      std::initializer_list<int64_t> shape) {
  check_tensor(t, name, dtype, shape);
  check_aligned(t, name);
}

}  // namespace

void check_tensor(const moe_tensor& t, const char* name, moe_dtype dtype,
                  std::initializer_list<int64_t> shape) {
  // An empty tensor needs no storage: a framework's empty device tensor (a batch of 0 tokens)
  // may come with a NULL pointer, which nothing reads.
  const bool empty = t.ndim >= 1 && t.ndim <= MOE_TENSOR_MAX_DIMS &&
                     std::any_of(t.shape, t.shape + t.ndim, [](int64_t d) { return d == 0; });
  MOE_CHECK(t.data != nullptr || empty, MOE_STATUS_INVALID_ARGUMENT,
            "{}: tensor is missing (data is NULL)", name);
  MOE_CHECK(t.dtype == dtype, MOE_STATUS_DTYPE_MISMATCH, "{}: expected {}, got {}", name,
            expected_str(shape, dtype), tensor_str(t));
  bool same = t.ndim == static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t d : shape) {
    if (!same) break;
    same = t.shape[i] >= 0 && (d == kAnyDim || t.shape[i] == d);
    ++i;
  }
  MOE_CHECK(same, MOE_STATUS_SHAPE_MISMATCH, "{}: expected {}, got {}", name,
            expected_str(shape, dtype), tensor_str(t));
  MOE_CHECK(is_contiguous(t), MOE_STATUS_INVALID_ARGUMENT,
            "{}: {} is not contiguous row-major; pass a contiguous copy", name, tensor_str(t));
}

bool check_optional_tensor(const moe_tensor& t, const char* name, moe_dtype dtype,
                           std::initializer_list<int64_t> shape) {
  if (t.data == nullptr) return false;
  check_tensor(t, name, dtype, shape);
  return true;
}

int64_t check_run_tensors(const moe_problem& p, const moe_run_args& a, size_t workspace_needed,
                          bool wide_output_ok) {
  const int64_t width = topk_width(p);
  check_run_tensor(a.hidden, "hidden", MOE_DTYPE_BF16, {kAnyDim, p.hidden});
  const int64_t tokens = a.hidden.shape[0];
  MOE_CHECK(tokens <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
            "{} tokens exceed max_tokens={} of this layer; raise max_tokens in the problem or "
            "split the batch",
            tokens, p.max_tokens);
  check_run_tensor(a.topk_ids, "topk_ids", MOE_DTYPE_I32, {tokens, width});
  check_run_tensor(a.topk_weights, "topk_weights", MOE_DTYPE_F32, {tokens, width});
  moe_dtype out = MOE_DTYPE_BF16;
  if (wide_output_ok && (a.output.dtype == MOE_DTYPE_F32 || a.output.dtype == MOE_DTYPE_F64))
    out = static_cast<moe_dtype>(a.output.dtype);
  check_run_tensor(a.output, "output", out, {tokens, p.hidden});
  // The output is written while the inputs are read, by more than one launch in some backends
  // (sinks apart, a second pass over hidden): an output over them would feed a later launch
  // what an earlier one wrote. An in-place residual add wants accumulate=1 on its own buffer.
  check_apart(a.output, "output", a.hidden, "hidden");
  check_apart(a.output, "output", a.topk_ids, "topk_ids");
  check_apart(a.output, "output", a.topk_weights, "topk_weights");
  check_run_workspace(a, workspace_needed, tokens);
  return tokens;
}

void check_run_workspace(const moe_run_args& a, size_t workspace_needed, int64_t tokens) {
  MOE_CHECK(workspace_needed == 0 || a.workspace != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "workspace is NULL but {} bytes are needed for {} tokens", workspace_needed, tokens);
  MOE_CHECK(a.workspace_size >= workspace_needed, MOE_STATUS_CAPACITY_EXCEEDED,
            "workspace of {} bytes is smaller than the {} bytes needed for {} tokens",
            a.workspace_size, workspace_needed, tokens);
}

int64_t check_route_tensors(const moe_problem& p, const moe_route_args& a) {
  const int64_t width = topk_width(p);
  check_run_tensor(a.logits, "logits", MOE_DTYPE_F32, {kAnyDim, p.experts + p.sink_experts});
  const int64_t tokens = a.logits.shape[0];
  MOE_CHECK(tokens <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED, "{} tokens exceed max_tokens={}",
            tokens, p.max_tokens);
  if (p.routing_bias) {
    check_run_tensor(a.bias, "bias", MOE_DTYPE_F32, {p.experts});
  } else {
    MOE_CHECK(a.bias.data == nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "bias: given, but the problem has routing_bias: 0");
  }
  check_optional_tensor(a.is_padding, "is_padding", MOE_DTYPE_U8, {tokens});  // bytes
  check_run_tensor(a.topk_ids, "topk_ids", MOE_DTYPE_I32, {tokens, width});
  check_run_tensor(a.topk_weights, "topk_weights", MOE_DTYPE_F32, {tokens, width});
  check_apart(a.topk_ids, "topk_ids", a.topk_weights, "topk_weights");
  for (const auto& [out, out_name] :
       {std::pair{&a.topk_ids, "topk_ids"}, std::pair{&a.topk_weights, "topk_weights"}}) {
    check_apart(*out, out_name, a.logits, "logits");
    check_apart(*out, out_name, a.bias, "bias");
    check_apart(*out, out_name, a.is_padding, "is_padding");
  }
  return tokens;
}

}  // namespace moe::sdk
