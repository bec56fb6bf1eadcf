// Reading a moe_problem from a YAML mapping (shared by configs and conformance problem files).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "moe/sdk/problem.hpp"

namespace moe::detail {

// "<source>:<line>:<col>" of a node (1-based).
std::string where(const std::string& source, const YAML::Node& node);

// A mapping key as a string; CONFIG_ERROR when it is a list or mapping.
std::string key_name(const std::string& source, const YAML::Node& key, const char* section);

// Throws CONFIG_ERROR for keys of `map` not in `known`, duplicate and non-scalar keys.
void check_keys(const std::string& source, const YAML::Node& map,
                const std::vector<std::string>& known, const char* section);

// Typed reads with messages that name the key, the expected type and the place.
template <class T>
T read_scalar(const std::string& source, const YAML::Node& node, const std::string& key);
std::vector<std::string> read_string_list(const std::string& source, const YAML::Node& node,
                                          const std::string& key);

// Keys the problem's routing or activation never reads, set to other than their default: refused
// where a person wrote the mapping (a config, a problem file: the value would be ignored,
// silently), read as written where it is the whole of a moe_problem as text
// (moe_host_problem_parse, which every field of a C struct reaches).
enum class InapplicableKeys { kRefuse, kRead };

// Parses, finalises (EP map, defaults) and validates a `problem:` mapping.
Problem parse_problem(const std::string& source, const YAML::Node& map,
                      InapplicableKeys inapplicable = InapplicableKeys::kRefuse);

// Loads a YAML file or text, turning parser errors into CONFIG_ERROR with the line.
YAML::Node load_yaml_file(const std::string& path);
YAML::Node load_yaml_text(const std::string& text, const std::string& source);

}  // namespace moe::detail
