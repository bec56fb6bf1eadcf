#include "timeline.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "kernels/timeline.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/host_log.hpp"

namespace moe::mega {
namespace {

constexpr int kItemsPerCta = 512;  // records per CTA: a DeepSeek-V3 decode CTA computes ~10

constexpr const char* kPhaseNames[] = {"entry",       "scheduled",  "gemm1_start",   "gemm1_done",
                                       "gemm2_start", "gemm2_done", "combine_start", "exit"};
static_assert(std::size(kPhaseNames) == kernels::kTimelinePhases);

}  // namespace

std::string timeline_json(const std::vector<unsigned long long>& records,
                          const TimelineInfo& info) {
  using namespace kernels;
  MOE_CHECK(records.size() >= size_t(info.ctas) * size_t(timeline_record_words(info.items)),
            MOE_STATUS_INVALID_ARGUMENT,
            "cutlass_mega timeline: {} words hold fewer than {} CTAs of {} items", records.size(),
            info.ctas, info.items);
  unsigned long long t0 = std::numeric_limits<unsigned long long>::max();
  for (int c = 0; c < info.ctas; ++c) {
    const unsigned long long e = records[size_t(timeline_phase_word(c, info.items, kAtEntry))];
    if (e != 0) t0 = std::min(t0, e);
  }
  auto ns = [&](unsigned long long t) {
    return t == 0 || t < t0 ? std::string("null") : fmt::format("{}", t - t0);
  };
  std::string out = fmt::format(
      "{{\"ctas\": {}, \"items\": {}, \"format\": \"{}\", \"tokens\": {}, \"steps1\": {}, "
      "\"steps2\": {}, \"step_bytes\": {}, \"instance\": {}, \"routes_in_launch\": {}, "
      "\"phases\": [",
      info.ctas, info.items, info.format, info.tokens, info.steps1, info.steps2, info.step_bytes,
      info.instance, info.routes);
  for (int ph = 0; ph < kTimelinePhases; ++ph)
    out += fmt::format("{}\"{}\"", ph ? ", " : "", kPhaseNames[ph]);
  out += "],\n \"records\": [";
  for (int c = 0; c < info.ctas; ++c) {
    out += fmt::format("{}\n  {{\"cta\": {}, \"boundaries\": [", c ? "," : "", c);
    for (int ph = 0; ph < kTimelinePhases; ++ph) {
      const size_t w = size_t(timeline_phase_word(c, info.items, ph));
      out += fmt::format("{}{{\"ns\": {}, \"clock\": {}}}", ph ? ", " : "", ns(records[w]),
                         records[w + 1]);
    }
    const unsigned long long head = records[size_t(timeline_count_word(c, info.items))];
    const auto n = std::min<unsigned long long>(head & 0xffffffffu, unsigned(info.items));
    out += fmt::format("], \"split2\": {}, \"items\": [", head >> 32);
    for (unsigned long long i = 0; i < n; ++i) {
      const size_t w = size_t(timeline_item_word(c, info.items, int(i)));
      out += fmt::format("{}{{\"phase\": {}, \"u\": {}, \"ns\": {}, \"clock\": {}}}", i ? ", " : "",
                         records[w] >> 32, records[w] & 0xffffffffu, ns(records[w + 1]),
                         records[w + 2]);
    }
    out += "]}";
  }
  return out + "\n]}\n";
}

Timeline::Timeline(std::string path, int ctas, int items)
    : path_(std::move(path)),
      records_(size_t(ctas) * size_t(kernels::timeline_record_words(items)) * 8) {
  info_.ctas = ctas;
  info_.items = items;
  MOE_CHECK(cudaMemset(records_.get(), 0, records_.bytes()) == cudaSuccess, MOE_STATUS_DEVICE_ERROR,
            "cutlass_mega timeline: cannot clear {} device bytes", records_.bytes());
}

void Timeline::note_run(const std::string& format, int64_t tokens, int64_t steps1, int64_t steps2,
                        int64_t step_bytes, int instance, bool routes) {
  std::lock_guard lock(mutex_);
  ran_ = true;
  info_.format = format;
  info_.tokens = tokens;
  info_.steps1 = steps1;
  info_.steps2 = steps2;
  info_.step_bytes = step_bytes;
  info_.instance = instance;
  info_.routes = routes;
}

Timeline::~Timeline() {
  if (!ran_) return;  // a layer never run (or refused at prepare) leaves an earlier file alone
  try {
    std::vector<unsigned long long> host(records_.bytes() / 8);
    MOE_CHECK(cudaDeviceSynchronize() == cudaSuccess &&
                  cudaMemcpy(host.data(), records_.get(), records_.bytes(),
                             cudaMemcpyDeviceToHost) == cudaSuccess,
              MOE_STATUS_DEVICE_ERROR, "the records did not copy back");
    std::ofstream f(path_);
    f << timeline_json(host, info_);
    f.close();
    MOE_CHECK(!f.fail(), MOE_STATUS_IO_ERROR, "cannot write {}", path_);
    sdk::logf(MOE_LOG_INFO, "cutlass_mega: timeline of the last run ({} tokens) in {}",
              info_.tokens, path_);
  } catch (const std::exception& e) {
    sdk::logf(MOE_LOG_WARN, "cutlass_mega: timeline not written: {}", e.what());
  }
}

std::unique_ptr<Timeline> timeline_from_env(int ctas) {
  const char* path = std::getenv("MOE_MEGA_TIMELINE");
  if (path == nullptr || *path == '\0') return nullptr;
  return std::make_unique<Timeline>(path, ctas, kItemsPerCta);
}

}  // namespace moe::mega
