// Row ranges whose bounds may live on the device. Permuted buffers are sized for the worst case
// (R_max rows) while the rows actually used are only known on the device (group_offsets), so a
// kernel is launched over R_max rows and reads its bounds there: no host sync, graph capturable.
#pragma once

#include <cstdint>

namespace moe::gpu {

// bf16 tensors cross this library's host API as their bits (uint16_t, as moe/formats.hpp does):
// no CUDA types in the declarations. Device pointers are 16-byte aligned for the vector paths;
// other alignments take a scalar path.

struct RowRange {
  int64_t max_rows = 0;            // rows the buffers hold; the grid is sized from it
  const int64_t* begin = nullptr;  // device scalar, first row; null = 0
  const int64_t* end = nullptr;    // device scalar, one past the last row (clamped to max_rows);
                                   // null = max_rows
  // Instead of [begin, end): only the rows list[0, list_count) names (entries < 0 skipped), in
  // that order, e.g. a masked layout's Permutation::slot_row over its T x W (+ T) slots: its live
  // rows, without a visit to the dead ones (at decode most of G x max_m). Entries must be <
  // max_rows. Taken by the activation and the 1x128 quantisation; the per-tensor quantisers refuse
  // it.
  const int32_t* list = nullptr;  // device
  int64_t list_count = 0;
};

// Throws INVALID_ARGUMENT naming `what` and the values when max_rows < 0, when a list is given to
// a step that takes none (takes_list false), or when the list is inconsistent (a count < 0, a
// count > 0 with no list, or a begin or end next to it).
void check_row_range(const char* what, const RowRange& rows, bool takes_list);

}  // namespace moe::gpu
