#include "moe_cuda/tensor_map.hpp"

#include <cuda_runtime_api.h>

#include "driver_entry.hpp"

namespace moe::gpu {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = driver_entry<EncodeTiled>("cuTensorMapEncodeTiled");
  return fn;
}

}  // namespace

bool encode_tensor_map_2d(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                          int64_t rows, int64_t cols, int elem_bytes, int box_rows,
                          int box_cols) noexcept {
  const EncodeTiled fn = encode_tiled();
  if (fn == nullptr) return false;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * cuuint64_t(elem_bytes)};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t step[2] = {1, 1};
  return fn(map, dtype, 2, const_cast<void*>(base), dims, strides, box, step,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool encode_tensor_map_row_pairs(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                                 int64_t rows, int64_t cols, int64_t row_ld, int elem_bytes,
                                 int pair_rows, int half_rows, int box_cols) noexcept {
  const EncodeTiled fn = encode_tiled();
  if (fn == nullptr || rows % 16 != 0) return false;
  const cuuint64_t row = cuuint64_t(row_ld) * cuuint64_t(elem_bytes);
  const cuuint64_t dims[4] = {cuuint64_t(cols), 8, 2, cuuint64_t(rows / 16)};
  const cuuint64_t strides[3] = {row * cuuint64_t(pair_rows), row * cuuint64_t(half_rows),
                                 row * 16};
  const cuuint32_t box[4] = {cuuint32_t(box_cols), 8, 2, 8};
  const cuuint32_t step[4] = {1, 1, 1, 1};
  return fn(map, dtype, 4, const_cast<void*>(base), dims, strides, box, step,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace moe::gpu
