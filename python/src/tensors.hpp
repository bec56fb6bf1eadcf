// Array arguments (anything with __dlpack__ or the buffer protocol: NumPy, torch, CuPy) as the
// ABI's moe_tensor views, checked first so that a wrong dtype, shape, stride or device is a
// moe_registry.MoeError naming the Python argument, never a crash in a plugin.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::py {

namespace nb = nanobind;

constexpr int64_t kAnyDim = -1;
constexpr int32_t kEitherMemory = -1;  // Placement::memory: host or CUDA, as the first tensor is

// Where every tensor of one call must live: the layer's memory kind (or, for weights, wherever the
// first tensor is), and one device for all.
struct Placement {
  Placement(int32_t memory_kind, int32_t device) : memory(memory_kind), device_id(device) {}

  int32_t memory;     // moe_memory, or kEitherMemory until a first tensor decides
  int32_t device_id;  // CUDA: the first tensor's device; -1 until one is seen
  // The call's CUDA stream (0: the legacy default), where a call has one: a CUDA array is
  // exported on it (DLPack's stream handshake), so its producer orders its pending work before
  // the call's stream and never touches another stream (one that a graph capture would break on).
  std::optional<uintptr_t> stream;
  // The stream is the one the caller's framework has current (the call was given none): that
  // already orders the producer's work, so arrays are exported with DLPack's -1, no
  // synchronisation asked (torch would record and wait on an event per array otherwise).
  bool stream_is_current = false;
  std::string first;  // after kEitherMemory: the argument that decided, and where it is
  std::string first_place;
};

// The arrays behind the views of one call, kept alive until the call returns: read-only views of
// inputs, writable ones of what the call writes.
struct Keep {
  std::vector<nb::ndarray<nb::ro>> read;
  std::vector<nb::ndarray<>> written;
};

// Whether the call writes an argument: a written one is imported writable, so an array its owner
// marked read-only (NumPy's flags, DLPack 1.0's READ_ONLY bit, a read-only buffer) is refused.
enum class Access { kRead, kWrite };

// `obj` as a view: an array, or a tuple (array, "bf16") whose bits are read as that dtype (same
// item size: uint16 as bf16, uint8 as e4m3 / e2m1x2 / ue8m0). NumPy arrays of ml_dtypes' bfloat16,
// float8_e4m3fn and float8_e8m0fnu are read by their bits the same way. Checks: an array, a dtype
// the ABI has, C-contiguous, in `where`'s memory (and device). `name` is the argument's.
moe_tensor tensor_arg(nb::handle obj, const std::string& name, Placement& where, Keep& keep,
                      Access access = Access::kRead);

// tensor_arg, then the dtype and shape (kAnyDim matches any extent) a call expects.
moe_tensor tensor_arg(nb::handle obj, const std::string& name, moe_dtype dtype,
                      const std::vector<int64_t>& shape, Placement& where, Keep& keep,
                      Access access = Access::kRead);

// The ABI's name of a dtype ("bf16", "f32", ...), "invalid" for none.
const char* dtype_name(int32_t dtype);

}  // namespace moe::py
