#include "moe_cuda/rows.hpp"

#include "moe/sdk/error.hpp"

namespace moe::gpu {

void check_row_range(const char* what, const RowRange& rows, bool takes_list) {
  constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;
  MOE_CHECK(rows.max_rows >= 0, kInvalid, "{}: rows.max_rows={} must be >= 0", what, rows.max_rows);
  const bool has_list = rows.list != nullptr || rows.list_count != 0;
  MOE_CHECK(takes_list || !has_list, kInvalid,
            "{}: takes rows as a range only, not a row list ({} entries)", what, rows.list_count);
  MOE_CHECK(!has_list || (rows.begin == nullptr && rows.end == nullptr), kInvalid,
            "{}: a row list ({} entries) replaces the range: begin and end must be null", what,
            rows.list_count);
  MOE_CHECK(rows.list_count >= 0 && (rows.list != nullptr || rows.list_count == 0), kInvalid,
            "{}: a row list of {} entries {}", what, rows.list_count,
            rows.list_count < 0 ? "(a count must be >= 0)" : "has no device array");
}

}  // namespace moe::gpu
