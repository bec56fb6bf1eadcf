#include "elf_check.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace moe::detail {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;
#endif

const char* machine_name(uint16_t m) {
  switch (m) {
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "arm";
    case EM_PPC64:
      return "ppc64";
    case EM_RISCV:
      return "riscv";
    default:
      return "another machine";
  }
}

}  // namespace

std::string elf_problem(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!in || ec) return "cannot be read";
  Elf64_Ehdr eh{};
  in.read(reinterpret_cast<char*>(&eh), sizeof(eh));
  if (in.gcount() < 4 || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return "not a shared library (no ELF header)";
  if (in.gcount() < static_cast<std::streamsize>(sizeof(eh)) || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF shared library";
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return "not a little-endian ELF file";
  if (eh.e_type != ET_DYN) return "an ELF file, but not a shared library (e_type is not ET_DYN)";
  if (kHostMachine != EM_NONE && eh.e_machine != kHostMachine)
    return fmt::format("built for {}, this machine is {}", machine_name(eh.e_machine),
                       machine_name(kHostMachine));
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr) > size)
    return fmt::format("truncated or corrupt: program headers lie outside the {}-byte file", size);
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  in.read(reinterpret_cast<char*>(ph.data()), std::streamsize(ph.size() * sizeof(Elf64_Phdr)));
  if (!in) return "truncated or corrupt: cannot read the program headers";
  for (const auto& p : ph) {
    if ((p.p_type == PT_LOAD || p.p_type == PT_DYNAMIC) && p.p_offset + p.p_filesz > size)
      return fmt::format("truncated or corrupt: a segment ends at byte {} of a {}-byte file",
                         p.p_offset + p.p_filesz, size);
  }
  return "";
}

}  // namespace moe::detail
