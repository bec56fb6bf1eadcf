// How conformance cases are measured and reported: output errors, the summary and the JSON.
#include <cmath>
#include <nlohmann/json.hpp>

#include "moe/conformance.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace moe {
namespace {

double value_at(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case MOE_DTYPE_F64:
      return t.data<double>()[i];
    case MOE_DTYPE_F32:
      return t.data<float>()[i];
    case MOE_DTYPE_BF16:
      return bf16_to_float(t.data<uint16_t>()[i]);
    default:
      MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "no float view of dtype {}", int(t.dtype()));
  }
}

// JSON has no NaN or infinity: those are written as strings, so that no reader takes them for 0.
nlohmann::json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
nlohmann::json number(const std::optional<double>& v) {
  return v ? number(*v) : nlohmann::json(nullptr);
}

}  // namespace

double relative_l2(const HostTensor& out, const HostTensor& ref) {
  MOE_CHECK(out.numel() == ref.numel(), MOE_STATUS_SHAPE_MISMATCH,
            "relative_l2 of {} and {} elements", out.numel(), ref.numel());
  double diff = 0, norm = 0, out_norm = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double a = value_at(out, i), b = value_at(ref, i);
    if (!std::isfinite(a)) return INFINITY;
    diff += (a - b) * (a - b);
    norm += b * b;
    out_norm += a * a;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(out_norm);
}

OutputComparison compare_outputs(const HostTensor& out, const HostTensor& ref) {
  MOE_CHECK(out.numel() == ref.numel() && out.shape().size() == 2, MOE_STATUS_SHAPE_MISMATCH,
            "compare_outputs of {} and {} elements (an output [T, H] each)", out.numel(),
            ref.numel());
  const int64_t cols = out.shape()[1];
  OutputComparison c;
  int64_t worst = -1;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double a = value_at(out, i), b = value_at(ref, i);
    if (!std::isfinite(a)) {
      c.rel_err = c.max_abs_err = INFINITY;
      c.worst = {.token = i / cols, .column = i % cols, .got = a, .want = b};
      return c;
    }
    if (worst < 0 || std::abs(a - b) > c.max_abs_err) {
      c.max_abs_err = std::abs(a - b);
      worst = i;
    }
  }
  c.rel_err = relative_l2(out, ref);
  if (worst >= 0)
    c.worst = {.token = worst / cols,
               .column = worst % cols,
               .got = value_at(out, worst),
               .want = value_at(ref, worst)};
  return c;
}

namespace {

// The summary counter a case adds to: passes split into real, empty (T = 0) and self.
int& counter(ConformanceSummary& s, const CaseResult& c) {
  switch (c.status) {
    case CaseStatus::kPass:
      switch (c.pass_kind) {
        case PassKind::kReal:
          return s.pass;
        case PassKind::kEmpty:
          return s.empty;
        case PassKind::kSelf:
          return s.self;
      }
      return s.pass;
    case CaseStatus::kFail:
      return s.fail;
    case CaseStatus::kError:
      return s.error;
    case CaseStatus::kSkip:
      return s.skip;
  }
  return s.skip;
}

}  // namespace

const char* counted_as(const CaseResult& c) {
  if (c.status != CaseStatus::kPass) return case_status_name(c.status);
  switch (c.pass_kind) {
    case PassKind::kReal:
      return "pass";
    case PassKind::kEmpty:
      return "empty";
    case PassKind::kSelf:
      return "self";
  }
  return "pass";
}

ConformanceSummary summarize(const std::vector<CaseResult>& results) {
  ConformanceSummary s;
  for (const auto& r : results) ++counter(s, r);
  return s;
}

nlohmann::json to_json(const std::vector<CaseResult>& results) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& r : results) {
    // Nothing was measured for a skip or an error, whatever the fields hold: null, never 0.
    const bool measured = r.status == CaseStatus::kPass || r.status == CaseStatus::kFail;
    nlohmann::json worst = nullptr;
    if (r.worst)
      worst = {{"token", r.worst->token},
               {"column", r.worst->column},
               {"got", number(r.worst->got)},
               {"want", number(r.worst->want)}};
    cases.push_back({{"plugin", r.plugin},
                     {"plugin_path", r.plugin_path},
                     {"plugin_version", r.plugin_version},
                     {"plugin_abi", r.plugin_abi},
                     {"problem", r.problem},
                     {"params",
                      {{"experts", r.params.experts},
                       {"top_k", r.params.top_k},
                       {"hidden", r.params.hidden},
                       {"intermediate", r.params.intermediate},
                       {"format", r.params.format},
                       {"input_format", r.params.input_format},
                       {"activation", r.params.activation},
                       {"routing", r.params.routing}}},
                     {"stage", r.stage},
                     {"oracle", r.oracle},
                     {"tokens", r.tokens},
                     {"scenario", r.scenario},
                     {"seed", r.seed},
                     {"status", case_status_name(r.status)},
                     {"counted_as", counted_as(r)},
                     {"detail", r.detail},
                     {"rel_err", measured ? number(r.rel_err) : nullptr},
                     {"max_abs_err", measured ? number(r.max_abs_err) : nullptr},
                     {"worst", worst},
                     {"tolerance", r.tolerance},
                     {"ms", measured && r.rel_err ? number(r.ms) : nullptr}});
  }
  const ConformanceSummary s = summarize(results);
  return {{"summary",
           {{"pass", s.pass},
            {"fail", s.fail},
            {"error", s.error},
            {"skip", s.skip},
            {"empty", s.empty},
            {"self", s.self}}},
          {"cases", cases}};
}

}  // namespace moe
