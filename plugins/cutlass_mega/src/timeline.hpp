// cutlass_mega's timeline on the host (a measurement; kernels/timeline.hpp has the records):
// with MOE_MEGA_TIMELINE=<file> in the environment at prepare, a layer keeps device records that
// every run overwrites, and writes the last run's to <file> as JSON when the layer is destroyed
// (a layer never run writes nothing; of several layers, the last destroyed wins).
// bench/mega_timeline.py reads it: per phase when each CTA reached it, per item how long it took
// and at what rate its weights streamed. Off by default; a run with it off records nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "moe_cuda/device.hpp"

namespace moe::mega {

// What the JSON says besides the clocks, so a reader can turn items into bytes: the phases' K
// steps an item (GEMM2's before a K split) and the weight bytes a step streams.
struct TimelineInfo {
  int ctas = 0;
  int items = 0;  // items a CTA records at most
  std::string format;
  int64_t tokens = 0;
  int64_t steps1 = 0, steps2 = 0;
  int64_t step_bytes = 0;
  int instance = -1;    // the kernel instance that ran (kernels/config.cuh WeightKind)
  bool routes = false;  // the launch routed the batch itself (kernels/config.cuh Params::route)
};

// The records of one run (ctas x kernels::timeline_record_words(items) words) as JSON: "ctas",
// "items", the info, "phases" (the boundary names), and per CTA its boundaries ({"ns", "clock"},
// ns relative to the earliest entry of any CTA, 0-clock entries as null where a boundary was not
// reached), GEMM2's K parts ("split2": an item of phase 2 is steps2 / split2 steps) and its items
// ({"phase", "u", "ns", "clock"}).
std::string timeline_json(const std::vector<unsigned long long>& records, const TimelineInfo& info);

// One layer's records. A measurement for one thread: two threads running the same layer at once
// would have their kernels write the same records (note_run itself is guarded).
class Timeline {
 public:
  Timeline(std::string path, int ctas, int items);
  ~Timeline();  // writes the file; a failure is logged, never thrown
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  unsigned long long* records() const { return records_.as<unsigned long long>(); }
  int items() const { return info_.items; }
  // The last run's facts (run() sets them before each launch).
  void note_run(const std::string& format, int64_t tokens, int64_t steps1, int64_t steps2,
                int64_t step_bytes, int instance, bool routes);

 private:
  std::string path_;
  std::mutex mutex_;
  bool ran_ = false;  // written only after a run
  TimelineInfo info_;
  gpu::DeviceBuffer records_;
};

// A Timeline when MOE_MEGA_TIMELINE names a file, else null.
std::unique_ptr<Timeline> timeline_from_env(int ctas);

}  // namespace moe::mega
