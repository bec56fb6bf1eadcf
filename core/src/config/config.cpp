#include "moe/config.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "moe/sdk/error.hpp"
#include "yaml_problem.hpp"

namespace moe {
namespace {

CheckpointSpec parse_checkpoint(const std::string& source, const YAML::Node& map) {
  using namespace detail;
  check_keys(source, map,
             {"path", "convention", "prefix", "layer", "interleaved_gate_up", "tp_size", "tp_rank",
              "router_dtype"},
             "checkpoint");
  CheckpointSpec spec;
  for (const char* required : {"path", "convention"}) {
    if (!map[required])
      throw Error(MOE_STATUS_CONFIG_ERROR,
                  fmt::format("{}: checkpoint needs '{}'", where(source, map), required));
  }
  spec.path = read_scalar<std::string>(source, map["path"], "path");
  spec.convention = read_scalar<std::string>(source, map["convention"], "convention");
  const auto& known = checkpoint_conventions();
  if (std::find(known.begin(), known.end(), spec.convention) == known.end())
    throw Error(MOE_STATUS_CONFIG_ERROR, fmt::format("{}: convention '{}' is not one of: {}",
                                                     where(source, map["convention"]),
                                                     spec.convention, fmt::join(known, ", ")));
  if (map["prefix"]) spec.prefix = read_scalar<std::string>(source, map["prefix"], "prefix");
  if (map["layer"]) {
    spec.layer = read_scalar<int64_t>(source, map["layer"], "layer");
    MOE_CHECK(spec.layer >= 0, MOE_STATUS_CONFIG_ERROR, "{}: layer={} must be >= 0",
              where(source, map["layer"]), spec.layer);
  }
  if (map["interleaved_gate_up"]) {
    spec.interleaved_gate_up =
        read_scalar<bool>(source, map["interleaved_gate_up"], "interleaved_gate_up");
    // Only the stacked convention reads it (gpt_oss's rows are interleaved by definition, the
    // others' gate and up are tensors of their own): true elsewhere would be ignored.
    MOE_CHECK(spec.convention == "stacked" || !spec.interleaved_gate_up, MOE_STATUS_CONFIG_ERROR,
              "{}: interleaved_gate_up is for convention stacked; {} never reads it",
              where(source, map["interleaved_gate_up"]), spec.convention);
  }
  auto small_int = [&](const char* key, int32_t& out) {
    if (!map[key]) return;
    const int64_t v = read_scalar<int64_t>(source, map[key], key);
    if (v < 0 || v > 65536)
      throw Error(MOE_STATUS_CONFIG_ERROR, fmt::format("{}: {}={} is out of range [0, 65536]",
                                                       where(source, map[key]), key, v));
    out = static_cast<int32_t>(v);
  };
  if (const auto node = map["router_dtype"]) {
    const auto text = read_scalar<std::string>(source, node, "router_dtype");
    const auto v = parse_router_dtype(text);
    if (!v)
      throw Error(MOE_STATUS_CONFIG_ERROR,
                  fmt::format("{}: router_dtype: '{}' is not one of: {}", where(source, node), text,
                              router_dtype_names()));
    spec.router_dtype = *v;
  }
  small_int("tp_size", spec.tp_size);
  small_int("tp_rank", spec.tp_rank);
  MOE_CHECK(spec.tp_size >= 1, MOE_STATUS_CONFIG_ERROR, "{}: tp_size={} must be >= 1",
            where(source, map["tp_size"]), spec.tp_size);
  if (spec.tp_rank >= spec.tp_size)
    throw Error(MOE_STATUS_CONFIG_ERROR,
                fmt::format("{}: tp_rank={} must be in [0, tp_size={})", where(source, map),
                            spec.tp_rank, spec.tp_size));
  return spec;
}

Config from_node(const YAML::Node& root, const std::string& source) {
  using namespace detail;
  if (!root || root.IsNull())
    throw Error(MOE_STATUS_CONFIG_ERROR, source + ": the config is empty");
  check_keys(
      source, root,
      {"backend", "fallback", "plugin_dirs", "problem", "options", "tokens", "seed", "checkpoint"},
      "the config");
  Config c;
  c.source = source;
  if (root["backend"]) c.backend = read_scalar<std::string>(source, root["backend"], "backend");
  if (root["fallback"]) c.fallback = read_string_list(source, root["fallback"], "fallback");
  if (root["plugin_dirs"])
    c.plugin_dirs = read_string_list(source, root["plugin_dirs"], "plugin_dirs");
  if (!root["problem"])
    throw Error(MOE_STATUS_CONFIG_ERROR, source + ": the config needs 'problem'");
  c.problem = parse_problem(source, root["problem"]);
  if (const auto opts = root["options"]) {
    if (!opts.IsMap())
      throw Error(MOE_STATUS_CONFIG_ERROR, where(source, opts) + ": options must be a mapping");
    std::set<std::string> seen;
    for (const auto& kv : opts) {
      const auto key = key_name(source, kv.first, "options");
      if (!seen.insert(key).second)
        throw Error(MOE_STATUS_CONFIG_ERROR,
                    where(source, kv.first) + ": duplicate key '" + key + "' in options");
      if (!kv.second.IsMap()) {
        c.options.emplace_back(key, read_scalar<std::string>(source, kv.second, key));
        continue;
      }
      // A section of one plugin's options (by name or alias), given only to that plugin.
      const std::string section = "options." + key;
      Options own;
      std::set<std::string> own_seen;
      for (const auto& entry : kv.second) {
        const auto name = key_name(source, entry.first, section.c_str());
        if (!own_seen.insert(name).second)
          throw Error(MOE_STATUS_CONFIG_ERROR,
                      where(source, entry.first) + ": duplicate key '" + name + "' in " + section);
        own.emplace_back(name,
                         read_scalar<std::string>(source, entry.second, section + "." + name));
      }
      c.plugin_options.push_back({key, std::move(own), where(source, kv.first)});
    }
    // Under auto the plugin is not known when the config is written, and each plugin refuses
    // options it does not know: plain entries would reach whichever plugin wins.
    if (c.backend == "auto" && !c.options.empty())
      throw Error(MOE_STATUS_CONFIG_ERROR,
                  where(source, opts) + ": options: '" + c.options.front().first +
                      "' is given to no plugin in particular, but backend: auto chooses the "
                      "plugin; give options per plugin, e.g. options: {cutlass_mega: {sms: 64}}");
  }
  // auto asks every plugin found already (the reference last): a fallback list would do nothing.
  if (c.backend == "auto" && !c.fallback.empty())
    throw Error(MOE_STATUS_CONFIG_ERROR,
                where(source, root["fallback"]) +
                    ": fallback: backend: auto already tries every plugin found, by priority; "
                    "fallback lists the backends to try after a named one");
  if (root["tokens"]) {
    c.tokens = read_scalar<int64_t>(source, root["tokens"], "tokens");
    MOE_CHECK(c.tokens >= 0, MOE_STATUS_CONFIG_ERROR, "{}: tokens={} must be >= 0",
              where(source, root["tokens"]), c.tokens);
    MOE_CHECK(c.tokens <= c.problem.raw().max_tokens, MOE_STATUS_CONFIG_ERROR,
              "{}: tokens={} is above the problem's max_tokens={}", where(source, root["tokens"]),
              c.tokens, c.problem.raw().max_tokens);
  } else {
    c.tokens = std::min<int64_t>(c.tokens, c.problem.raw().max_tokens);  // the default batch fits
  }
  if (root["seed"]) c.seed = read_scalar<uint64_t>(source, root["seed"], "seed");
  if (const auto ck = root["checkpoint"]) c.checkpoint = parse_checkpoint(source, ck);
  return c;
}

}  // namespace

Config Config::load_file(const std::string& path) {
  return from_node(detail::load_yaml_file(path), path);
}

Config Config::parse(const std::string& text, const std::string& source) {
  return from_node(detail::load_yaml_text(text, source), source);
}

}  // namespace moe
