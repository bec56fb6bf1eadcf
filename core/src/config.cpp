#include "moe/config.hpp"

#include <set>

#include "moe/error.hpp"
#include "yaml_problem.hpp"

namespace moe {
namespace {

Config from_node(const YAML::Node& root, const std::string& source) {
  using namespace detail;
  if (!root || root.IsNull())
    throw Error(MOE_STATUS_CONFIG_ERROR, source + ": the config is empty");
  check_keys(source, root,
             {"backend", "fallback", "plugin_dirs", "problem", "options", "tokens", "seed"},
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
      c.options.emplace_back(key, read_scalar<std::string>(source, kv.second, key));
    }
  }
  if (root["tokens"]) {
    c.tokens = read_scalar<int64_t>(source, root["tokens"], "tokens");
    MOE_CHECK(c.tokens >= 0, MOE_STATUS_CONFIG_ERROR, "{}: tokens={} must be >= 0",
              where(source, root["tokens"]), c.tokens);
  }
  if (root["seed"]) c.seed = read_scalar<uint64_t>(source, root["seed"], "seed");
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
