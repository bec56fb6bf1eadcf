// cutlass_mega's timeline (a measurement, off unless MOE_MEGA_TIMELINE names a file; plain C++,
// also compiled for the device, so the kernel and the host's writer share the layout): per CTA,
// thread 0's clocks at the layer's phase boundaries and at the end of each work item it computed.
// A CTA's record is kTimelineHead + 3 x items words of uint64:
//   word 0: (GEMM2's K parts << 32) | how many items this run recorded (at most `items`);
//   words 1 + 2 p, 2 + 2 p: phase boundary p's %globaltimer (ns) and clock64 (SM cycles);
//   then per item i: (phase << 32) | the item's index u in its phase, %globaltimer, clock64, taken
//   when its epilogue is done (an item's time is the gap since the boundary or item before it).
#pragma once

#include <cstdint>

#include "kernels/host_device.hpp"

namespace moe::mega::kernels {

// The phase boundaries, in order; kernel entry first.
enum TimelinePhase : int {
  kAtEntry = 0,   // the kernel starts
  kScheduled,     // the schedule is built
  kGemm1Start,    // fp8_block: the hidden states quantised, after their barrier
  kGemm1Done,     // this CTA's last GEMM1 item done
  kGemm2Start,    // after the barrier (fp8_block: and the intermediate's quantisation)
  kGemm2Done,     // this CTA's last GEMM2 item done
  kCombineStart,  // after the last barrier
  kAtExit,        // the combine done
  kTimelinePhases,
};

constexpr int kTimelineHead = 1 + 2 * kTimelinePhases;

MOE_MEGA_HD constexpr int64_t timeline_record_words(int items) {
  return kTimelineHead + 3 * int64_t(items);
}
MOE_MEGA_HD constexpr int64_t timeline_count_word(int cta, int items) {
  return cta * timeline_record_words(items);
}
MOE_MEGA_HD constexpr int64_t timeline_phase_word(int cta, int items, int phase) {
  return cta * timeline_record_words(items) + 1 + 2 * phase;
}
MOE_MEGA_HD constexpr int64_t timeline_item_word(int cta, int items, int item) {
  return cta * timeline_record_words(items) + kTimelineHead + 3 * int64_t(item);
}

}  // namespace moe::mega::kernels
