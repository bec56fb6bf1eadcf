// The YAML spellings of the ABI's enums and of the host's router_dtype (see enum_names.hpp);
// formats come from the format table.
#include "moe/sdk/enum_names.hpp"

#include <string>

#include "moe/sdk/format_table.hpp"

namespace moe {
namespace {

template <class E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<moe_input_format> kInputFormats[] = {
    {MOE_INPUT_DEFAULT, "default"},
    {MOE_INPUT_BF16, "bf16"},
    {MOE_INPUT_FP8_TENSOR_DYNAMIC, "fp8_tensor_dynamic"},
    {MOE_INPUT_FP8_TENSOR_STATIC, "fp8_tensor_static"},
    {MOE_INPUT_FP8_1X128, "fp8_1x128"},
    {MOE_INPUT_MXFP8, "mxfp8"},
};
constexpr Named<moe_activation> kActivations[] = {
    {MOE_ACTIVATION_SILU_MUL, "silu_mul"},     {MOE_ACTIVATION_SILU_MUL_CLAMP, "silu_mul_clamp"},
    {MOE_ACTIVATION_SWIGLU_OAI, "swiglu_oai"}, {MOE_ACTIVATION_GELU_MUL, "gelu_mul"},
    {MOE_ACTIVATION_RELU2, "relu2"},
};
constexpr Named<moe_routing> kRoutings[] = {
    {MOE_ROUTING_SOFTMAX_TOPK, "softmax_topk"},
    {MOE_ROUTING_SIGMOID_TOPK, "sigmoid_topk"},
    {MOE_ROUTING_GROUPED_TOPK, "grouped_topk"},
    {MOE_ROUTING_SIGMOID_BIAS_SINK, "sigmoid_bias_sink"},
};
constexpr Named<moe_score_function> kScores[] = {
    {MOE_SCORE_SIGMOID, "sigmoid"},
    {MOE_SCORE_SOFTMAX, "softmax"},
};
constexpr Named<moe_ep_placement> kPlacements[] = {
    {MOE_EP_NONE, "none"},
    {MOE_EP_LINEAR, "linear"},
    {MOE_EP_ROUND_ROBIN, "round_robin"},
};
constexpr Named<RouterDtype> kRouterDtypes[] = {
    {RouterDtype::kBf16, "bf16"},
    {RouterDtype::kFp32, "fp32"},
};
constexpr Named<moe_reason> kReasons[] = {
    {MOE_REASON_NONE, "none"},
    {MOE_REASON_FORMAT, "format"},
    {MOE_REASON_INPUT_FORMAT, "input_format"},
    {MOE_REASON_ACTIVATION, "activation"},
    {MOE_REASON_ROUTING, "routing"},
    {MOE_REASON_SHAPE, "shape"},
    {MOE_REASON_ARCH, "arch"},
    {MOE_REASON_EP, "ep"},
    {MOE_REASON_BIAS, "bias"},
    {MOE_REASON_SHARED, "shared"},
    {MOE_REASON_MAX_TOKENS, "max_tokens"},
    {MOE_REASON_OTHER, "other"},
};
constexpr Named<moe_memory> kMemories[] = {
    {MOE_MEMORY_HOST, "host"},
    {MOE_MEMORY_CUDA_DEVICE, "cuda_device"},
};

template <class E, size_t N>
const char* name_of(const Named<E> (&table)[N], E v) {
  for (const auto& n : table)
    if (n.value == v) return n.name;
  return "invalid";
}

template <class E, size_t N>
std::optional<E> parse(const Named<E> (&table)[N], std::string_view s) {
  for (const auto& n : table)
    if (s == n.name) return n.value;
  return std::nullopt;
}

template <class E, size_t N>
std::string names(const Named<E> (&table)[N]) {
  std::string out;
  for (const auto& n : table) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

template <class E, size_t N>
bool known(const Named<E> (&table)[N], int32_t v) {
  for (const auto& n : table)
    if (n.value == v) return true;
  return false;
}

template <class E, size_t N>
std::vector<E> values(const Named<E> (&table)[N]) {
  std::vector<E> out;
  for (const auto& n : table) out.push_back(n.value);
  return out;
}

}  // namespace

const char* format_name(moe_format v) {
  const FormatSpec* f = find_format(v);
  return f != nullptr ? f->name : "invalid";
}
const char* input_format_name(moe_input_format v) {
  return name_of(kInputFormats, v);
}
const char* activation_name(moe_activation v) {
  return name_of(kActivations, v);
}
const char* routing_name(moe_routing v) {
  return name_of(kRoutings, v);
}
const char* score_function_name(moe_score_function v) {
  return name_of(kScores, v);
}
const char* ep_placement_name(moe_ep_placement v) {
  return name_of(kPlacements, v);
}
const char* router_dtype_name(RouterDtype v) {
  return name_of(kRouterDtypes, v);
}
const char* reason_name(moe_reason v) {
  return name_of(kReasons, v);
}
const char* memory_name(moe_memory v) {
  return name_of(kMemories, v);
}

std::optional<moe_format> parse_format(std::string_view s) {
  for (const FormatSpec& f : format_table())
    if (s == f.name) return f.format;
  return std::nullopt;
}
std::optional<moe_input_format> parse_input_format(std::string_view s) {
  return parse(kInputFormats, s);
}
std::optional<moe_activation> parse_activation(std::string_view s) {
  return parse(kActivations, s);
}
std::optional<moe_routing> parse_routing(std::string_view s) {
  return parse(kRoutings, s);
}
std::optional<moe_score_function> parse_score_function(std::string_view s) {
  return parse(kScores, s);
}
std::optional<moe_ep_placement> parse_ep_placement(std::string_view s) {
  return parse(kPlacements, s);
}
std::optional<RouterDtype> parse_router_dtype(std::string_view s) {
  return parse(kRouterDtypes, s);
}

std::string format_names() {
  std::string out;
  for (const FormatSpec& f : format_table()) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}
std::string input_format_names() {
  return names(kInputFormats);
}
std::string activation_names() {
  return names(kActivations);
}
std::string routing_names() {
  return names(kRoutings);
}
std::string router_dtype_names() {
  return names(kRouterDtypes);
}

std::vector<moe_input_format> known_input_formats() {
  return values(kInputFormats);
}
std::vector<moe_activation> known_activations() {
  return values(kActivations);
}
std::vector<moe_routing> known_routings() {
  return values(kRoutings);
}

bool known_input_format(int32_t v) {
  return known(kInputFormats, v);
}
bool known_activation(int32_t v) {
  return known(kActivations, v);
}
bool known_routing(int32_t v) {
  return known(kRoutings, v);
}
bool known_score_function(int32_t v) {
  return known(kScores, v);
}
bool known_ep_placement(int32_t v) {
  return known(kPlacements, v);
}

}  // namespace moe
