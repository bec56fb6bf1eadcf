// The problem as a value, read and written as a config's `problem:` text by the C API.
#include <vector>

#include "handles.hpp"
#include "status.hpp"

namespace moe::py {

Problem Problem::parse(const std::string& text) {
  Problem p;
  p.c.struct_size = sizeof p.c;
  check(moe_host_problem_parse(c_text(text, "problem (YAML text)"), &p.c));
  return p;
}

Problem Problem::copy(const moe_problem& from) {
  Problem p;
  p.c = from;
  p.c.struct_size = sizeof p.c;
  p.c.ep_map = nullptr;  // the source's map lives with the source; the core makes it again
  return p;
}

std::string Problem::to_json() const {
  size_t needed = 0;
  check(moe_host_problem_format(&c, nullptr, 0, &needed));
  std::vector<char> text(needed);
  check(moe_host_problem_format(&c, text.data(), text.size(), &needed));
  return text.data();
}

}  // namespace moe::py
