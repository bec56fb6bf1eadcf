#include "moe/safetensors_writer.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "moe/sdk/error.hpp"

namespace moe {

const char* safetensors_dtype(moe_dtype dtype) {
  switch (dtype) {
    case MOE_DTYPE_BF16:
      return "BF16";
    case MOE_DTYPE_F16:
      return "F16";
    case MOE_DTYPE_F32:
      return "F32";
    case MOE_DTYPE_F64:
      return "F64";
    case MOE_DTYPE_E4M3:
      return "F8_E4M3";
    case MOE_DTYPE_E2M1X2:
    case MOE_DTYPE_UE8M0:
    case MOE_DTYPE_U8:
      return "U8";
    case MOE_DTYPE_I8:
      return "I8";
    case MOE_DTYPE_I32:
      return "I32";
    case MOE_DTYPE_I64:
      return "I64";
    default:
      MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "dtype {} cannot be stored in safetensors", int(dtype));
  }
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  MOE_CHECK(out.good(), MOE_STATUS_IO_ERROR, "cannot write '{}': {}", path,
            errno ? std::strerror(errno) : "the stream could not be opened");
  const uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const auto& nt : tensors)
    out.write(static_cast<const char*>(nt.tensor.raw()), std::streamsize(nt.tensor.bytes()));
  MOE_CHECK(out.good(), MOE_STATUS_IO_ERROR, "writing '{}' failed", path);
}

}  // namespace moe
