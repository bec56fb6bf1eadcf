// HostTensor: an owning, contiguous host array with a dtype and a shape, viewable as moe_tensor.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/formats.hpp"

namespace moe {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(moe_dtype dtype, std::vector<int64_t> shape);

  moe_dtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;  // elements as stored (bytes for e2m1x2)
  size_t bytes() const { return data_.size(); }
  // Absent (default-constructed), as opposed to present with zero elements (e.g. T = 0).
  bool empty() const { return dtype_ == MOE_DTYPE_INVALID; }

  template <class T>
  T* data() {
    return reinterpret_cast<T*>(data_.data());
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(data_.data());
  }
  void* raw() { return data_.data(); }
  const void* raw() const { return data_.data(); }

  void fill_bytes(uint8_t value) { std::memset(data_.data(), value, data_.size()); }
  // Relabels the bytes as another dtype of the same element size (u8 -> e2m1x2 or ue8m0).
  void reinterpret(moe_dtype dtype);

  // A borrowed view (mutable data pointer: the ABI has one tensor type for inputs and outputs).
  moe_tensor view() const;

 private:
  moe_dtype dtype_ = MOE_DTYPE_INVALID;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> data_;
};

// A moe_tensor over memory someone else owns.
moe_tensor make_view(void* data, moe_dtype dtype, std::initializer_list<int64_t> shape);

}  // namespace moe
