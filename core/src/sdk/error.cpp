#include "moe/sdk/error.hpp"

namespace moe {

const char* status_name(moe_status status) noexcept {
  switch (status) {
    case MOE_STATUS_OK:
      return "ok";
    case MOE_STATUS_INVALID_ARGUMENT:
      return "invalid_argument";
    case MOE_STATUS_UNSUPPORTED:
      return "unsupported";
    case MOE_STATUS_SHAPE_MISMATCH:
      return "shape_mismatch";
    case MOE_STATUS_DTYPE_MISMATCH:
      return "dtype_mismatch";
    case MOE_STATUS_CAPACITY_EXCEEDED:
      return "capacity_exceeded";
    case MOE_STATUS_ABI_MISMATCH:
      return "abi_mismatch";
    case MOE_STATUS_OUT_OF_MEMORY:
      return "out_of_memory";
    case MOE_STATUS_DEVICE_ERROR:
      return "device_error";
    case MOE_STATUS_INTERNAL:
      return "internal";
    case MOE_STATUS_NOT_FOUND:
      return "not_found";
    case MOE_STATUS_IO_ERROR:
      return "io_error";
    case MOE_STATUS_CONFIG_ERROR:
      return "config_error";
  }
  return "unknown_status";
}

}  // namespace moe
