// The checkpoint conventions by name (see checkpoint.hpp): each one an ExpertSource (reader) and
// a LayerWriter (export_layer) in its own file. A new convention is its file plus one entry here.
#include "conventions.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "moe/sdk/error.hpp"

namespace moe::detail {

using SourceFactory = std::unique_ptr<ExpertSource> (*)(const Checkpoint&, const CheckpointSpec&,
                                                        const moe_problem&);

std::unique_ptr<ExpertSource> make_mixtral_source(const Checkpoint&, const CheckpointSpec&,
                                                  const moe_problem&);
std::unique_ptr<ExpertSource> make_deepseek_source(const Checkpoint&, const CheckpointSpec&,
                                                   const moe_problem&);
std::unique_ptr<ExpertSource> make_qwen_moe_source(const Checkpoint&, const CheckpointSpec&,
                                                   const moe_problem&);
std::unique_ptr<ExpertSource> make_gpt_oss_source(const Checkpoint&, const CheckpointSpec&,
                                                  const moe_problem&);
std::unique_ptr<ExpertSource> make_stacked_source(const Checkpoint&, const CheckpointSpec&,
                                                  const moe_problem&);
std::unique_ptr<ExpertSource> make_inkling_source(const Checkpoint&, const CheckpointSpec&,
                                                  const moe_problem&);

extern const LayerWriter kMixtralWriter, kDeepseekWriter, kQwenMoeWriter, kGptOssWriter,
    kStackedWriter, kInklingWriter;

namespace {

struct Convention {
  std::string_view name;
  SourceFactory make;
  const LayerWriter* writer;
};

// In the order messages list them.
constexpr Convention kConventions[] = {
    {"mixtral", make_mixtral_source, &kMixtralWriter},     // mixtral_source.cpp
    {"deepseek", make_deepseek_source, &kDeepseekWriter},  // hf_proj_source.cpp
    {"qwen_moe", make_qwen_moe_source, &kQwenMoeWriter},   // hf_proj_source.cpp
    {"gpt_oss", make_gpt_oss_source, &kGptOssWriter},      // gpt_oss_source.cpp
    {"stacked", make_stacked_source, &kStackedWriter},     // stacked_source.cpp
    {"inkling", make_inkling_source, &kInklingWriter},     // inkling_source.cpp
};

const Convention& find_convention(const CheckpointSpec& spec) {
  const auto* c = std::find_if(std::begin(kConventions), std::end(kConventions),
                               [&](const Convention& k) { return k.name == spec.convention; });
  MOE_CHECK(c != std::end(kConventions), MOE_STATUS_CONFIG_ERROR,
            "checkpoint convention '{}' is not one of {}", spec.convention,
            fmt::join(checkpoint_conventions(), ", "));
  return *c;
}

}  // namespace

std::unique_ptr<ExpertSource> make_expert_source(const Checkpoint& checkpoint,
                                                 const CheckpointSpec& spec,
                                                 const moe_problem& problem) {
  return find_convention(spec).make(checkpoint, spec, problem);
}

const LayerWriter& layer_writer(const CheckpointSpec& spec) {
  return *find_convention(spec).writer;
}

}  // namespace moe::detail

namespace moe {

const std::vector<std::string>& checkpoint_conventions() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& c : detail::kConventions) out.emplace_back(c.name);
    return out;
  }();
  return names;
}

}  // namespace moe
