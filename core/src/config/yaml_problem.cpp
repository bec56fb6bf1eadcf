#include "yaml_problem.hpp"

#include <yaml-cpp/eventhandler.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "moe/sdk/error.hpp"

namespace moe::detail {
namespace {

[[noreturn]] void fail(const std::string& at, const std::string& message) {
  throw Error(MOE_STATUS_CONFIG_ERROR, at + ": " + message);
}

template <class T>
const char* type_word() {
  if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>)
    return "an integer >= 0";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else
    return "a string";
}

template <class E>
int32_t read_enum(const std::string& source, const YAML::Node& node, const std::string& key,
                  std::optional<E> (*parse)(std::string_view), const std::string& names) {
  const auto text = read_scalar<std::string>(source, node, key);
  const auto v = parse(text);
  if (!v) fail(where(source, node), fmt::format("{}: '{}' is not one of: {}", key, text, names));
  return static_cast<int32_t>(*v);
}

// Ignores every parse event: used only to count documents.
struct NullEvents : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

std::string key_name(const std::string& source, const YAML::Node& key, const char* section) {
  if (!key.IsScalar())
    fail(where(source, key),
         fmt::format("a key in {} must be a plain name, not a list or mapping", section));
  return key.Scalar();
}

std::string where(const std::string& source, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return source;
  return fmt::format("{}:{}:{}", source, m.line + 1, m.column + 1);
}

void check_keys(const std::string& source, const YAML::Node& map,
                const std::vector<std::string>& known, const char* section) {
  if (!map.IsMap()) fail(where(source, map), fmt::format("{} must be a mapping", section));
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const auto key = key_name(source, kv.first, section);
    if (!seen.insert(key).second)
      fail(where(source, kv.first), fmt::format("duplicate key '{}' in {}", key, section));
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      fail(where(source, kv.first), fmt::format("unknown key '{}' in {}; known keys: {}", key,
                                                section, fmt::join(known, ", ")));
    }
  }
}

template <class T>
T read_scalar(const std::string& source, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar())
    fail(where(source, node), fmt::format("{} must be {}", key, type_word<T>()));
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
    // Decimal only, as the command line reads numbers: yaml-cpp alone reads 010 as 8 and 0x10 as
    // 16, so `experts: 010` would mean 8 here and 10 in --tokens.
    const std::string& text = node.Scalar();
    const char* first = text.data();
    const char* last = first + text.size();
    if (first != last && *first == '+') ++first;
    T value{};
    const auto [end, ec] = std::from_chars(first, last, value, 10);
    const char* digits = first != last && *first == '-' ? first + 1 : first;
    const bool leading_zero = last - digits > 1 && *digits == '0';
    if (ec == std::errc::result_out_of_range)
      fail(where(source, node),
           fmt::format("{} = {} is out of range for {}", key, text, type_word<T>()));
    if (leading_zero)  // 010, and 0x10 too
      fail(where(source, node),
           fmt::format("{} must be {} in decimal digits, got '{}' (no leading 0, no 0x: YAML "
                       "readers differ on octal and hex)",
                       key, type_word<T>(), text));
    if (ec != std::errc{} || end != last || first == last)
      fail(where(source, node), fmt::format("{} must be {}, got '{}'", key, type_word<T>(), text));
    return value;
  }
  try {
    return node.as<T>();
  } catch (const YAML::BadConversion&) {
    fail(where(source, node),
         fmt::format("{} must be {}, got '{}'", key, type_word<T>(), node.Scalar()));
  }
}
template bool read_scalar<bool>(const std::string&, const YAML::Node&, const std::string&);
template int64_t read_scalar<int64_t>(const std::string&, const YAML::Node&, const std::string&);
template uint64_t read_scalar<uint64_t>(const std::string&, const YAML::Node&, const std::string&);
template double read_scalar<double>(const std::string&, const YAML::Node&, const std::string&);
template std::string read_scalar<std::string>(const std::string&, const YAML::Node&,
                                              const std::string&);

std::vector<std::string> read_string_list(const std::string& source, const YAML::Node& node,
                                          const std::string& key) {
  if (node.IsScalar()) return {read_scalar<std::string>(source, node, key)};
  if (!node.IsSequence()) fail(where(source, node), key + " must be a list of strings");
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(read_scalar<std::string>(source, item, key));
  return out;
}

namespace {

// A key the problem's routing or activation never reads, set to anything but its default, would
// be ignored silently: a config that sets routed_scaling_factor: 2.5 on softmax_topk, or
// activation_limit on silu_mul, expects an effect it does not get. Each is refused, naming the key
// and what it applies to. The default value changes nothing, so it passes: a problem written out
// with every key (moe_host_problem_format, Python's Problem.as_dict) reads back as a config.
void refuse_keys_that_do_not_apply(const std::string& source, const YAML::Node& map,
                                   const moe_problem& p) {
  const moe_problem d = default_problem();
  const auto routing = static_cast<moe_routing>(p.routing);
  const auto activation = static_cast<moe_activation>(p.activation);
  const bool grouped = routing == MOE_ROUTING_GROUPED_TOPK;
  const bool sink = routing == MOE_ROUTING_SIGMOID_BIAS_SINK;
  const bool oai = activation == MOE_ACTIVATION_SWIGLU_OAI;
  const std::string routes = fmt::format("this problem routes {}", routing_name(routing));
  const std::string activates =
      fmt::format("this problem's activation is {}", activation_name(activation));
  struct Rule {
    const char* key;
    bool applies, at_default;
    const char* to;
    const std::string& has;
  };
  const std::string no_sinks = "this problem has no sink experts";
  const Rule rules[] = {
      {"score_function", grouped, p.score_function == d.score_function,
       "routing grouped_topk (softmax_topk and sigmoid_topk score as they are named)", routes},
      {"num_groups", grouped, p.num_groups == d.num_groups, "routing grouped_topk", routes},
      {"topk_group", grouped, p.topk_group == d.topk_group, "routing grouped_topk", routes},
      {"routed_scaling_factor", grouped, p.routed_scaling_factor == d.routed_scaling_factor,
       "routing grouped_topk", routes},
      {"renormalize", !sink, p.renormalize == d.renormalize,
       "routings other than sigmoid_bias_sink (its sink softmax normalises)", routes},
      {"route_scale", sink, p.route_scale == d.route_scale, "routing sigmoid_bias_sink", routes},
      {"global_scale", sink, p.global_scale == d.global_scale, "routing sigmoid_bias_sink", routes},
      {"activation_alpha", oai, p.activation_alpha == d.activation_alpha, "activation swiglu_oai",
       activates},
      {"activation_limit", oai || activation == MOE_ACTIVATION_SILU_MUL_CLAMP,
       p.activation_limit == d.activation_limit, "activations swiglu_oai and silu_mul_clamp",
       activates},
      {"gelu_tanh", activation == MOE_ACTIVATION_GELU_MUL, p.gelu_tanh == d.gelu_tanh,
       "activation gelu_mul", activates},
      {"sink_intermediate", p.sink_experts > 0, p.sink_intermediate == d.sink_intermediate,
       "sink experts (sink_experts > 0)", no_sinks},
  };
  for (const Rule& r : rules)
    if (map[r.key] && !r.applies && !r.at_default)
      fail(where(source, map[r.key]),
           fmt::format("{} applies to {} only, and {}: its value would be ignored (remove it, or "
                       "change what it belongs with)",
                       r.key, r.to, r.has));
}

// The key a validation message names first ("invalid problem: top_k=-1 must be ..."), where the
// map has it, so the error points at its line; else the map itself.
YAML::Node key_named(const YAML::Node& map, const std::string& message) {
  for (size_t i = 0; i < message.size(); ++i) {
    if (!std::islower(static_cast<unsigned char>(message[i])) ||
        (i > 0 &&
         (std::isalnum(static_cast<unsigned char>(message[i - 1])) || message[i - 1] == '_')))
      continue;
    size_t j = i;
    while (j < message.size() &&
           (std::islower(static_cast<unsigned char>(message[j])) || message[j] == '_'))
      ++j;
    if (j < message.size() && message[j] == '=') {
      const std::string key = message.substr(i, j - i);
      if (map[key]) return map[key];
    }
    i = j;
  }
  return map;
}

}  // namespace

Problem parse_problem(const std::string& source, const YAML::Node& map,
                      InapplicableKeys inapplicable) {
  static const std::vector<std::string> kKeys = {"experts",
                                                 "top_k",
                                                 "hidden",
                                                 "intermediate",
                                                 "format",
                                                 "input_format",
                                                 "activation",
                                                 "gelu_tanh",
                                                 "activation_alpha",
                                                 "activation_limit",
                                                 "routing",
                                                 "renormalize",
                                                 "score_function",
                                                 "routing_bias",
                                                 "num_groups",
                                                 "topk_group",
                                                 "routed_scaling_factor",
                                                 "route_scale",
                                                 "global_scale",
                                                 "expert_bias",
                                                 "shared_intermediate",
                                                 "sink_experts",
                                                 "sink_intermediate",
                                                 "ep_placement",
                                                 "ep_size",
                                                 "ep_rank",
                                                 "redundant_experts",
                                                 "max_tokens"};
  // router_dtype reads like a problem setting but is not one (plugins take logits): point to
  // where it lives rather than only calling it unknown.
  if (map.IsMap() && map["router_dtype"])
    fail(where(source, map["router_dtype"]),
         "router_dtype belongs in the checkpoint section: plugins take router logits, and the "
         "router GEMM runs only on a checkpoint's router weight (docs/design.md §2.3)");
  check_keys(source, map, kKeys, "problem");
  for (const char* required : {"experts", "top_k", "hidden", "intermediate"}) {
    if (!map[required]) fail(where(source, map), fmt::format("problem needs '{}'", required));
  }
  Problem problem;
  moe_problem& p = problem.raw();
  auto i64 = [&](const char* k, int64_t& out) {
    if (map[k]) out = read_scalar<int64_t>(source, map[k], k);
  };
  auto i32 = [&](const char* k, int32_t& out) {
    if (!map[k]) return;
    const int64_t v = read_scalar<int64_t>(source, map[k], k);
    if (v < INT32_MIN || v > INT32_MAX)
      fail(where(source, map[k]), std::string(k) + " is out of range");
    out = static_cast<int32_t>(v);
  };
  auto flag = [&](const char* k, int32_t& out) {
    if (map[k]) out = read_scalar<bool>(source, map[k], k) ? 1 : 0;
  };
  auto f32 = [&](const char* k, float& out) {
    if (!map[k]) return;
    const double v = read_scalar<double>(source, map[k], k);
    // A finite value a float cannot hold would become inf or 0 unseen (inf and nan as written
    // are the validation's to name).
    if (std::isfinite(v) && (std::fabs(v) > std::numeric_limits<float>::max() ||
                             (v != 0 && std::fabs(v) < std::numeric_limits<float>::denorm_min())))
      fail(where(source, map[k]),
           fmt::format("{}={} is outside the range of a float (its magnitude must be 0, or from "
                       "{:g} to {:g})",
                       k, map[k].Scalar(), std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::max()));
    out = static_cast<float>(v);
  };
  i64("experts", p.experts);
  i64("top_k", p.top_k);
  i64("hidden", p.hidden);
  i64("intermediate", p.intermediate);
  if (map["format"])
    p.format = read_enum(source, map["format"], "format", parse_format, format_names());
  if (map["input_format"])
    p.input_format = read_enum(source, map["input_format"], "input_format", parse_input_format,
                               input_format_names());
  if (map["activation"])
    p.activation =
        read_enum(source, map["activation"], "activation", parse_activation, activation_names());
  flag("gelu_tanh", p.gelu_tanh);
  f32("activation_alpha", p.activation_alpha);
  f32("activation_limit", p.activation_limit);
  if (map["routing"])
    p.routing = read_enum(source, map["routing"], "routing", parse_routing, routing_names());
  flag("renormalize", p.renormalize);
  if (map["score_function"])
    p.score_function = read_enum(source, map["score_function"], "score_function",
                                 parse_score_function, std::string("sigmoid, softmax"));
  flag("routing_bias", p.routing_bias);
  i64("num_groups", p.num_groups);
  i64("topk_group", p.topk_group);
  f32("routed_scaling_factor", p.routed_scaling_factor);
  f32("route_scale", p.route_scale);
  f32("global_scale", p.global_scale);
  flag("expert_bias", p.expert_bias);
  i64("shared_intermediate", p.shared_intermediate);
  i64("sink_experts", p.sink_experts);
  i64("sink_intermediate", p.sink_intermediate);
  if (map["ep_placement"])
    p.ep_placement = read_enum(source, map["ep_placement"], "ep_placement", parse_ep_placement,
                               std::string("none, linear, round_robin"));
  i32("ep_size", p.ep_size);
  i32("ep_rank", p.ep_rank);
  i32("redundant_experts", p.redundant_experts);
  i64("max_tokens", p.max_tokens);
  if (inapplicable == InapplicableKeys::kRefuse) refuse_keys_that_do_not_apply(source, map, p);
  problem.finalize();
  try {
    validate_problem(problem.c());
  } catch (const Error& e) {
    fail(where(source, key_named(map, e.what())), e.what());
  }
  return problem;
}

YAML::Node load_yaml_text(const std::string& text, const std::string& source) {
  try {
    YAML::Node doc = YAML::Load(text);
    // A second document is an error. YAML::LoadAll would find it, but on a stray ',' ']' or '}'
    // yaml-cpp 0.7 yields empty documents forever: walk at most two documents instead.
    std::istringstream in(text);
    YAML::Parser parser(in);
    NullEvents events;
    if (parser.HandleNextDocument(events) && parser.HandleNextDocument(events))
      fail(source,
           "a config holds one YAML document; found a second (after '---' or stray characters "
           "at the top level)");
    return doc;
  } catch (const YAML::ParserException& e) {
    fail(fmt::format("{}:{}:{}", source, e.mark.line + 1, e.mark.column + 1),
         "YAML syntax error: " + e.msg);
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  std::error_code ec;
  MOE_CHECK(!std::filesystem::is_directory(path, ec), MOE_STATUS_NOT_FOUND,
            "config file '{}' is a directory", path);
  std::ifstream in(path, std::ios::binary);
  MOE_CHECK(in.good(), MOE_STATUS_NOT_FOUND, "cannot open config file '{}'", path);
  // Read with a bound, whatever the file is: a pipe (`--config <(...)`) is fine, a device such as
  // /dev/zero must not take the host's memory.
  constexpr size_t kMaxConfigBytes = size_t(16) << 20;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, size_t(in.gcount()));
    MOE_CHECK(text.size() <= kMaxConfigBytes, MOE_STATUS_CONFIG_ERROR,
              "config file '{}' holds more than {} MiB: not a config", path, kMaxConfigBytes >> 20);
  }
  return load_yaml_text(text, path);
}

}  // namespace moe::detail
