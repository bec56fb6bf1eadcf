// Stream-ordered edits of a step's top-k id matrices and copies in a plugin's memory, for
// ep::DeviceStep's sink experts and ragged padding: device memory through the CUDA driver (a CUDA
// graph captures them as memset and copy nodes), host memory (host plugins, and test fixtures whose
// "device" memory is the host's) at once on the host. What a pointer is comes from
// cuPointerGetAttributes, which needs the device's context current on the calling thread (the
// plugin's own calls make it so, as for ep::StepGraph); without a driver every pointer is host
// memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe::ep {

// Whether `p` is device memory (asked once, where the step's buffers are made: a pointer query
// costs host time that a step should not pay).
bool is_device_memory(const void* p);

// Columns [first, first + count) of `rows` rows of an i32 matrix `width` columns wide become -1
// (no expert); `on_device`: is_device_memory of the matrix.
void clear_id_columns(bool on_device, int32_t* ids, int64_t rows, int64_t width, int64_t first,
                      int64_t count, void* stream);

// `bytes` from src to dst, both in one plugin's memory (device memory if `on_device`), in stream
// order.
void copy_in_stream(bool on_device, void* dst, const void* src, size_t bytes, void* stream);

}  // namespace moe::ep
