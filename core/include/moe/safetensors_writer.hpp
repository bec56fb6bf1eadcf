// Writing safetensors files: `moe run --output`, test fixtures and checkpoint export.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "moe/sdk/host_tensor.hpp"

namespace moe {

struct NamedTensor {
  std::string name;
  HostTensor tensor;
};

// The safetensors dtype a moe_dtype is stored as: e2m1x2 and ue8m0 bytes are stored as "U8"
// (as checkpoints ship them). Throws for dtypes safetensors cannot hold.
const char* safetensors_dtype(moe_dtype dtype);

// Writes a file the reference writer would accept (8-byte header length, JSON header padded to
// a multiple of 8, tensors in the given order). Throws IO_ERROR naming the path.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace moe
