#include "moe/sdk/host_tensor.hpp"

#include "moe/sdk/error.hpp"

namespace moe {

HostTensor::HostTensor(moe_dtype dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  MOE_CHECK(shape_.size() <= MOE_TENSOR_MAX_DIMS, MOE_STATUS_INVALID_ARGUMENT,
            "a tensor has at most {} dimensions, got {}", MOE_TENSOR_MAX_DIMS, shape_.size());
  MOE_CHECK(dtype_size(dtype) > 0, MOE_STATUS_INVALID_ARGUMENT, "invalid dtype {}", int(dtype));
  data_.resize(size_t(numel()) * dtype_size(dtype));
}

void HostTensor::reinterpret(moe_dtype dtype) {
  MOE_CHECK(dtype_size(dtype) == dtype_size(dtype_) && dtype_size(dtype) > 0,
            MOE_STATUS_INVALID_ARGUMENT, "cannot reinterpret {} as {}: element sizes differ",
            dtype_name(dtype_), dtype_name(dtype));
  dtype_ = dtype;
}

int64_t HostTensor::numel() const {
  if (dtype_ == MOE_DTYPE_INVALID) return 0;  // an absent tensor holds nothing
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

moe_tensor HostTensor::view() const {
  moe_tensor t{};
  if (dtype_ == MOE_DTYPE_INVALID) return t;  // absent
  t.data = const_cast<uint8_t*>(data_.data());
  t.dtype = dtype_;
  t.ndim = static_cast<int32_t>(shape_.size());
  for (size_t i = 0; i < shape_.size(); ++i) t.shape[i] = shape_[i];
  // An empty tensor (e.g. zero tokens) still needs a non-NULL pointer to count as present.
  static uint8_t empty_storage;
  if (t.data == nullptr) t.data = &empty_storage;
  return t;
}

moe_tensor make_view(void* data, moe_dtype dtype, std::initializer_list<int64_t> shape) {
  moe_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t d : shape) t.shape[i++] = d;
  return t;
}

}  // namespace moe
