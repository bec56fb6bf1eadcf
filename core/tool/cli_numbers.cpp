#include "cli_numbers.hpp"

#include <fmt/format.h>

#include <charconv>

namespace moe::tool {
namespace {

// from_chars takes exactly the decimal digits (and a leading '-' for signed types): no spaces,
// '+', prefixes or exponents, and it refuses an out-of-range value instead of wrapping it.
template <class T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty();
}

std::string range_text(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max()) return fmt::format("an integer >= {}", min);
  return fmt::format("an integer in [{}, {}]", min, max);
}

// "" when `text` is an integer in [min, max], else why not, naming the value.
std::string check_integer(const std::string& text, int64_t min, int64_t max) {
  if (parse_integer(text, min, max)) return "";
  return fmt::format("'{}' is not {}", text, range_text(min, max));
}

// "1,,8" -> {"1", "", "8"}; "" -> {""}.
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(list.substr(start, comma - start));
  out.push_back(list.substr(start));
  return out;
}

}  // namespace

std::optional<int64_t> parse_integer(const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  if (parse_whole(text, v) && v >= min && v <= max) return v;
  return std::nullopt;
}

CLI::Validator integer_in(int64_t min, int64_t max) {
  // The help's type column: "INT:POSITIVE" and the like.
  const std::string desc = min == 1   ? "POSITIVE"
                           : min == 0 ? "NONNEGATIVE"
                                      : fmt::format(">= {}", min);
  return CLI::Validator([min, max](std::string& text) { return check_integer(text, min, max); },
                        desc);
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) {
        uint64_t v = 0;
        if (parse_whole(text, v)) return std::string();
        return fmt::format("'{}' is not an integer in [0, {}]", text,
                           std::numeric_limits<uint64_t>::max());
      },
      "NONNEGATIVE");
}

CLI::Validator token_counts() {
  return CLI::Validator(
      [](std::string& list) -> std::string {
        for (const std::string& item : split_commas(list)) {
          const std::string err = check_integer(item, 1, std::numeric_limits<int64_t>::max());
          if (!err.empty())
            return fmt::format("in '{}': {}", list, item.empty() ? "an empty entry" : err);
        }
        return "";
      },
      "T,T,...");
}

std::vector<int64_t> parse_token_counts(const std::string& list) {
  std::vector<int64_t> out;
  for (const std::string& item : split_commas(list)) {
    int64_t v = 0;
    parse_whole(item, v);
    out.push_back(v);
  }
  return out;
}

}  // namespace moe::tool
