// Reading safetensors checkpoints: one file, memory-mapped, or a sharded set through
// model.safetensors.index.json. Every file is validated before any tensor is handed out, so a
// truncated or hostile file is a moe::Error naming the file and the tensor, never a crash.
//
// File layout: u64 little-endian N, N bytes of JSON header, then the data section. The header
// maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data section) and may hold "__metadata__": {string: string}.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe {

struct SafetensorsEntry {
  std::string name;
  moe_dtype dtype = MOE_DTYPE_INVALID;
  std::string st_dtype;  // as the file spells it ("BF16", "F8_E4M3", ...)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
  uint32_t bits = 0;            // an element's size in bits, by st_dtype (F4: 4, F6_*: 6)
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// The largest header we accept (as the reference implementation does): a bigger N means a
// corrupt or foreign file, and we refuse before allocating for it.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Parses and validates a header (the JSON text) against a data section of `data_size` bytes.
// `where` names the file in messages. Pure and total: any bytes give a header or a moe::Error
// (INVALID_ARGUMENT for a bad field, IO_ERROR for ranges past the data section).
SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t data_size,
                                           const std::string& where);

// One file mapped read-only; the mapping lives as long as the object. Pointers from data() and
// view() point into that read-only mapping (writing through them faults) and may be unaligned:
// copy with memcpy rather than dereferencing a cast pointer.
class SafetensorsFile {
 public:
  // NOT_FOUND when the file does not exist, IO_ERROR when it is truncated or corrupt.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }  // by name
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr when absent
  const uint8_t* data(const SafetensorsEntry& e) const;       // e from this file's entries()
  // A borrowed view of the mapping; INVALID_ARGUMENT above MOE_TENSOR_MAX_DIMS dimensions.
  moe_tensor view(const SafetensorsEntry& e) const;

 private:
  SafetensorsFile() = default;
  struct Unmap {
    size_t size;  // no default member initialiser: unique_ptr needs Unmap default-constructible
                  // while SafetensorsFile is still incomplete
    void operator()(void* p) const;
  };

  std::string path_;
  SafetensorsHeader header_;
  std::unique_ptr<void, Unmap> map_;  // move-only, like the mapping it owns
  const uint8_t* data_section_ = nullptr;
};

// A checkpoint: one .safetensors file, a model.safetensors.index.json ({"weight_map": {tensor:
// shard file}}) whose shards sit beside it, or a directory holding either (the index preferred,
// then model.safetensors, then a lone *.safetensors). Move-only, like the files it maps.
class Checkpoint {
 public:
  static Checkpoint open(const std::string& path);

  const std::string& path() const { return path_; }
  // Sorted; with a prefix, only the names that start with it (found in the index, not by a scan).
  std::vector<std::string> names(std::string_view prefix = {}) const;
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr when absent
  // Both throw NOT_FOUND naming the tensor and the checkpoint when it is absent.
  moe_tensor view(std::string_view name) const;  // borrowed, valid while *this lives
  const uint8_t* data(std::string_view name) const;

 private:
  struct Location {
    size_t file;   // index into files_
    size_t entry;  // index into files_[file].entries()
  };
  const Location& locate(std::string_view name) const;

  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Location, std::less<>> tensors_;
};

}  // namespace moe
