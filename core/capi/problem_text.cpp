// moe_host_problem_parse / _format: a problem as the text of a config's `problem:` mapping, so a
// host program in any language names fields and enum values as configs do ("format: bf16")
// instead of copying the ABI's enum numbers; JSON out, since JSON is also YAML and every language
// reads it.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "config/yaml_problem.hpp"
#include "handles.hpp"
#include "moe/sdk/enum_names.hpp"

namespace moe::capi {
namespace {

// A float by its shortest decimal (1.702f as 1.702, not 1.7020000219345093), read back exactly;
// a non-finite one has no JSON number, so the text could not be read back: refused, naming it.
double shortest(const char* field, float f) {
  MOE_CHECK(std::isfinite(f), MOE_STATUS_INVALID_ARGUMENT,
            "{}={} is not finite: the problem's text could not be read back", field, f);
  return std::stod(fmt::format("{}", f));
}

// An enum value by its config spelling; one without (an unknown value in a field this problem
// never reads, which validation lets pass) is refused, naming it.
const char* named(const char* field, int32_t value, const char* name) {
  MOE_CHECK(std::strcmp(name, "invalid") != 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}={} is not a known value: the problem's text could not be read back", field, value);
  return name;
}

// Every key of a config's `problem:` (config/yaml_problem.cpp), in that order.
nlohmann::ordered_json to_json(const moe_problem& p) {
  nlohmann::ordered_json j;
  j["experts"] = p.experts;
  j["top_k"] = p.top_k;
  j["hidden"] = p.hidden;
  j["intermediate"] = p.intermediate;
  j["format"] = named("format", p.format, format_name(static_cast<moe_format>(p.format)));
  j["input_format"] = named("input_format", p.input_format,
                            input_format_name(static_cast<moe_input_format>(p.input_format)));
  j["activation"] =
      named("activation", p.activation, activation_name(static_cast<moe_activation>(p.activation)));
  j["gelu_tanh"] = p.gelu_tanh != 0;
  j["activation_alpha"] = shortest("activation_alpha", p.activation_alpha);
  j["activation_limit"] = shortest("activation_limit", p.activation_limit);
  j["routing"] = named("routing", p.routing, routing_name(static_cast<moe_routing>(p.routing)));
  j["renormalize"] = p.renormalize != 0;
  j["score_function"] =
      named("score_function", p.score_function,
            score_function_name(static_cast<moe_score_function>(p.score_function)));
  j["routing_bias"] = p.routing_bias != 0;
  j["num_groups"] = p.num_groups;
  j["topk_group"] = p.topk_group;
  j["routed_scaling_factor"] = shortest("routed_scaling_factor", p.routed_scaling_factor);
  j["route_scale"] = shortest("route_scale", p.route_scale);
  j["global_scale"] = shortest("global_scale", p.global_scale);
  j["expert_bias"] = p.expert_bias != 0;
  j["shared_intermediate"] = p.shared_intermediate;
  j["sink_experts"] = p.sink_experts;
  j["sink_intermediate"] = p.sink_intermediate;
  j["ep_placement"] = named("ep_placement", p.ep_placement,
                            ep_placement_name(static_cast<moe_ep_placement>(p.ep_placement)));
  j["ep_size"] = p.ep_size;
  j["ep_rank"] = p.ep_rank;
  j["redundant_experts"] = p.redundant_experts;
  j["max_tokens"] = p.max_tokens;
  return j;
}

}  // namespace
}  // namespace moe::capi

using namespace moe::capi;  // NOLINT: the C entry points below are thin

extern "C" {

moe_status moe_host_problem_parse(const char* text, moe_problem* problem) {
  return guarded([&] {
    MOE_CHECK(text != nullptr, MOE_STATUS_INVALID_ARGUMENT, "text is NULL");
    moe::sdk::check_struct(problem, MOE_PROBLEM_MIN_SIZE, "moe_problem");
    const std::string source = "<problem>";
    const YAML::Node map = moe::detail::load_yaml_text(text, source);
    moe_problem out =
        moe::detail::parse_problem(source, map, moe::detail::InapplicableKeys::kRead).c();
    out.ep_map = nullptr;  // made again from the placement wherever the problem is read
    moe::sdk::write_struct(problem, out);
  });
}

moe_status moe_host_problem_format(const moe_problem* problem, char* buf, size_t cap,
                                   size_t* needed) {
  return guarded(
      [&] { write_text(to_json(read_problem(problem, "problem").c()).dump(), buf, cap, needed); });
}

}  // extern "C"
