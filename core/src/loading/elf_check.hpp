// A look at a plugin file before dlopen(): dlopen trusts the file, and a truncated or foreign
// library can crash the process (SIGBUS when a mapped segment lies past the end of the file).
#pragma once

#include <filesystem>
#include <string>

namespace moe::detail {

// "" when the file is a shared object for this machine whose loadable segments lie inside it;
// otherwise why not, in words ("not a shared library (no ELF header)", "truncated: ...").
std::string elf_problem(const std::filesystem::path& path);

}  // namespace moe::detail
