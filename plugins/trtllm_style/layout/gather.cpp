#include "gather.hpp"

#include <atomic>

#include <algorithm>
#include <cstring>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/parallel_for.hpp"
#include "scale_swizzle.hpp"

namespace moe::trtllm {

namespace {

// Output bytes per task: large enough that a task is mostly copying, small enough that one large
// matrix (Mixtral's w13: 235 MB) still spreads over the threads.
// Bytes of output one task writes; a matrix larger than this is split by rows across tasks.
std::atomic<int64_t> g_task_bytes{int64_t(4) << 20};

void check_plan(const GatherPlan& p, ByteSpan src) {
  check_stack(src, p.src, "gather");
  const MatrixStack &s = p.src, &d = p.dst;
  MOE_CHECK(d.batch == s.batch && d.elem_bytes == s.elem_bytes && d.rows >= 0 && d.cols >= 0,
            MOE_STATUS_INVALID_ARGUMENT, "gather: {} cannot be written from {}", to_string(d),
            to_string(s));
  MOE_CHECK(int64_t(p.rows.size()) == d.rows, MOE_STATUS_INVALID_ARGUMENT,
            "gather: row map has {} entries, the destination has rows={}", p.rows.size(), d.rows);
  for (int64_t r : p.rows)
    MOE_CHECK(r == kZeroRow || (r >= 0 && r < s.rows), MOE_STATUS_INVALID_ARGUMENT,
              "gather: row map entry {} is outside [0, {})", r, s.rows);
  MOE_CHECK(p.block_k == 0 || !p.swizzle, MOE_STATUS_INVALID_ARGUMENT,
            "gather: BlockMajorK weights and swizzled scales are different tensors");
  MOE_CHECK(p.block_k == 0 || (p.block_k > 0 && d.cols % p.block_k == 0),
            MOE_STATUS_INVALID_ARGUMENT, "gather: cols={} is not a multiple of block_k={}", d.cols,
            p.block_k);
}

// Rows of one stored matrix (swizzled: padded to whole 128-row tiles) and bytes per row.
int64_t stored_rows(const GatherPlan& p) {
  return p.swizzle ? round_up(p.dst.rows, 128) : p.dst.rows;
}
int64_t stored_row_bytes(const GatherPlan& p) {
  return (p.swizzle ? round_up(p.dst.cols, 4) : p.dst.cols) * p.dst.elem_bytes;
}

// n bytes at dst: the first `avail` (clamped to [0, n]) from src, zeros after.
void copy_or_zero(uint8_t* dst, const uint8_t* src, int64_t avail, int64_t n) {
  avail = src == nullptr ? 0 : std::clamp<int64_t>(avail, 0, n);
  if (avail > 0) std::memcpy(dst, src, size_t(avail));
  if (n > avail) std::memset(dst + avail, 0, size_t(n - avail));
}

// The source row of destination row d of matrix b, or nullptr for a zero row.
const uint8_t* source_row(const GatherPlan& p, ByteSpan src, int64_t b, int64_t d) {
  const int64_t r = p.rows[size_t(d)];
  return r == kZeroRow ? nullptr : src.data() + row_offset(p.src, b, r);
}

// Swizzled scales: the task's whole 128-row tiles are zeroed (their padding is zero), then each
// present element lands at its swizzled offset. kBytes: the element size at compile time.
template <int kBytes>
void write_swizzled(const GatherPlan& p, ByteSpan src, uint8_t* matrix, int64_t b, int64_t r0,
                    int64_t r1) {
  const int64_t cols4 = round_up(p.dst.cols, 4);
  std::memset(matrix + r0 * cols4 * kBytes, 0, size_t((r1 - r0) * cols4 * kBytes));
  const int64_t n = std::min(p.src.cols, p.dst.cols);
  for (int64_t d = r0; d < std::min(r1, p.dst.rows); ++d) {
    const uint8_t* in = source_row(p, src, b, d);
    if (in == nullptr) continue;
    for (int64_t c = 0; c < n; ++c)
      std::memcpy(matrix + swizzled_offset(d, c, p.dst.cols) * kBytes, in + c * kBytes, kBytes);
  }
}

// Writes stored rows [r0, r1) of matrix b. Tasks with disjoint row ranges write disjoint bytes
// (a swizzled task covers whole 128-row tiles, which are contiguous in the swizzled layout).
void write_rows(const GatherPlan& p, ByteSpan src, uint8_t* out, int64_t b, int64_t r0,
                int64_t r1) {
  uint8_t* matrix = out + b * stored_rows(p) * stored_row_bytes(p);
  if (p.swizzle) {
    switch (p.dst.elem_bytes) {
      case 1:
        return write_swizzled<1>(p, src, matrix, b, r0, r1);
      case 2:
        return write_swizzled<2>(p, src, matrix, b, r0, r1);
      case 4:
        return write_swizzled<4>(p, src, matrix, b, r0, r1);
      default:
        return write_swizzled<8>(p, src, matrix, b, r0, r1);  // checked: 1, 2, 4, 8
    }
  }
  const int64_t in_bytes = p.src.row_bytes(), out_bytes = p.dst.row_bytes();
  if (p.block_k == 0) {
    for (int64_t d = r0; d < r1; ++d)
      copy_or_zero(matrix + d * out_bytes, source_row(p, src, b, d), in_bytes, out_bytes);
    return;
  }
  // BlockMajorK: (K/bk, M, bk); slab kb of row d sits at (kb * M + d) * slab.
  const int64_t slab = p.block_k * p.dst.elem_bytes, k_blocks = p.dst.cols / p.block_k;
  for (int64_t d = r0; d < r1; ++d) {
    const uint8_t* in = source_row(p, src, b, d);
    for (int64_t kb = 0; kb < k_blocks; ++kb)
      copy_or_zero(matrix + (kb * p.dst.rows + d) * slab,
                   in != nullptr && kb * slab < in_bytes ? in + kb * slab : nullptr,
                   in_bytes - kb * slab, slab);  // past the source row (K padding): zeros
  }
}

struct Task {
  const GatherJob* job;
  int64_t b, r0, r1;
};

}  // namespace

RowMap compose(const RowMap& first, const RowMap& second) {
  RowMap out(second.size());
  for (size_t d = 0; d < second.size(); ++d) {
    const int64_t r = second[d];
    MOE_CHECK(r == kZeroRow || (r >= 0 && r < int64_t(first.size())), MOE_STATUS_INVALID_ARGUMENT,
              "compose: row {} outside [0, {})", r, first.size());
    out[d] = r == kZeroRow ? kZeroRow : first[size_t(r)];
  }
  return out;
}

int64_t stored_bytes(const GatherPlan& p) {
  return p.dst.batch * stored_rows(p) * stored_row_bytes(p);
}

void run_gathers(std::span<GatherJob> jobs) {
  std::vector<Task> tasks;
  for (GatherJob& job : jobs) {
    check_plan(job.plan, job.src);
    *job.out = Bytes(size_t(stored_bytes(job.plan)));
    // Whole 128-row tiles per task, so swizzled tasks never share a tile.
    const int64_t rows = stored_rows(job.plan);
    const int64_t step =
        round_up(std::max<int64_t>(
                     1, g_task_bytes.load() / std::max<int64_t>(1, stored_row_bytes(job.plan))),
                 128);
    for (int64_t b = 0; b < job.plan.dst.batch; ++b)
      for (int64_t r0 = 0; r0 < rows; r0 += step)
        tasks.push_back({&job, b, r0, std::min(rows, r0 + step)});
  }
  parallel_for(int64_t(tasks.size()), [&](int64_t i) {
    const Task& t = tasks[size_t(i)];
    write_rows(t.job->plan, t.job->src, t.job->out->data(), t.b, t.r0, t.r1);
  });
}

int64_t set_gather_task_bytes(int64_t bytes) {
  return g_task_bytes.exchange(std::max<int64_t>(1, bytes));
}

Bytes gather(const GatherPlan& plan, ByteSpan src) {
  Bytes out;
  GatherJob job{plan, src, &out};
  run_gathers(std::span(&job, 1));
  return out;
}

}  // namespace moe::trtllm
