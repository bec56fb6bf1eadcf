#include "loading/scan_json.hpp"

namespace moe::detail {

nlohmann::json info_to_json(const PluginInfo& info) {
  nlohmann::json j = {{"name", info.name},
                      {"version", info.version},
                      {"description", info.description},
                      {"abi_major", info.abi_major},
                      {"abi_minor", info.abi_minor},
                      {"aliases", info.aliases},
                      {"priority", info.priority},
                      {"decode_priority", info.decode.priority},
                      {"decode_max_tokens", info.decode.max_tokens},
                      {"decode_max_tokens_by_format", info.decode.by_format},
                      {"memory", static_cast<int32_t>(info.memory)},
                      {"format_mask", info.format_mask},
                      {"activation_mask", info.activation_mask},
                      {"routing_mask", info.routing_mask},
                      {"run_features", info.run_features},
                      {"build", nullptr}};
  if (info.build) {
    j["build"] = {{"sdk_version", info.build->sdk_version},
                  {"compiler", info.build->compiler},
                  {"cuda_runtime", info.build->cuda_runtime},
                  {"targets", info.build->targets}};
  }
  return j;
}

PluginInfo info_from_json(const nlohmann::json& j) {
  PluginInfo info;
  info.name = j.at("name").get<std::string>();
  info.version = j.at("version").get<std::string>();
  info.description = j.at("description").get<std::string>();
  info.abi_major = j.at("abi_major").get<uint32_t>();
  info.abi_minor = j.at("abi_minor").get<uint32_t>();
  info.aliases = j.at("aliases").get<std::vector<std::string>>();
  info.priority = j.at("priority").get<int32_t>();
  info.decode.priority = j.at("decode_priority").get<int32_t>();
  info.decode.max_tokens = j.at("decode_max_tokens").get<int64_t>();
  info.decode.by_format =
      j.at("decode_max_tokens_by_format").get<decltype(info.decode.by_format)>();
  info.memory = static_cast<moe_memory>(j.at("memory").get<int32_t>());
  info.format_mask = j.at("format_mask").get<uint32_t>();
  info.activation_mask = j.at("activation_mask").get<uint32_t>();
  info.routing_mask = j.at("routing_mask").get<uint32_t>();
  info.run_features = j.at("run_features").get<uint32_t>();
  if (const auto& b = j.at("build"); !b.is_null()) {
    info.build =
        BuildInfo{b.at("sdk_version").get<std::string>(), b.at("compiler").get<std::string>(),
                  b.at("cuda_runtime").get<std::string>(), b.at("targets").get<std::string>()};
  }
  return info;
}

}  // namespace moe::detail
