// safetensors reading: header validation (pure, the fuzz target's entry), the mapped file, and
// sharded checkpoints. Every check runs before a pointer into the data section is handed out.
#include "moe/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace moe {
namespace {

struct DtypeName {
  const char* st;
  moe_dtype dtype;  // MOE_DTYPE_INVALID: a dtype no reader here takes
  uint64_t bits;    // an element's; F4 and F6 pack below a byte
};
// U8 also carries packed fp4 and ue8m0 scales: the checkpoint adapters reinterpret it. The
// dtypes that no reader takes may still sit in a checkpoint (in another layer, say): parsed and
// their sizes checked, refused only when a tensor of theirs is read.
constexpr DtypeName kDtypes[] = {
    {"BF16", MOE_DTYPE_BF16, 16},      {"F16", MOE_DTYPE_F16, 16},
    {"F32", MOE_DTYPE_F32, 32},        {"F64", MOE_DTYPE_F64, 64},
    {"F8_E4M3", MOE_DTYPE_E4M3, 8},    {"F8_E8M0", MOE_DTYPE_UE8M0, 8},
    {"U8", MOE_DTYPE_U8, 8},           {"I8", MOE_DTYPE_I8, 8},
    {"I32", MOE_DTYPE_I32, 32},        {"I64", MOE_DTYPE_I64, 64},
    {"BOOL", MOE_DTYPE_INVALID, 8},    {"F8_E5M2", MOE_DTYPE_INVALID, 8},
    {"I16", MOE_DTYPE_INVALID, 16},    {"U16", MOE_DTYPE_INVALID, 16},
    {"U32", MOE_DTYPE_INVALID, 32},    {"U64", MOE_DTYPE_INVALID, 64},
    {"C64", MOE_DTYPE_INVALID, 64},    {"F4", MOE_DTYPE_INVALID, 4},
    {"F6_E2M3", MOE_DTYPE_INVALID, 6}, {"F6_E3M2", MOE_DTYPE_INVALID, 6}};

const DtypeName& dtype_of(const std::string& st, const std::string& at) {
  for (const auto& d : kDtypes)
    if (st == d.st) return d;
  std::vector<std::string> names;
  for (const auto& d : kDtypes) names.emplace_back(d.st);
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "{} has dtype '{}', which is not a safetensors dtype moe-registry knows ({})", at, st,
           fmt::join(names, ", "));
}

// JSON leaves duplicate keys undefined and parsers disagree on them (Python and nlohmann keep
// the last), so a header with one could mean two checkpoints: refuse it.
json parse_json(std::string_view text, const std::string& where, const char* what) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t check_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && duplicate.empty() && !open_objects.empty() &&
        parsed.is_string() && !open_objects.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), check_keys);
  } catch (const json::exception& e) {
    MOE_FAIL(MOE_STATUS_IO_ERROR, "{}: the {} is not valid JSON: {}", where, what, e.what());
  }
  MOE_CHECK(duplicate.empty(), MOE_STATUS_INVALID_ARGUMENT, "{}: duplicate key '{}' in the {}",
            where, duplicate, what);
  MOE_CHECK(j.is_object(), MOE_STATUS_INVALID_ARGUMENT, "{}: the {} must be a JSON object, got {}",
            where, what, j.type_name());
  return j;
}

// A non-negative JSON integer; `what` names it in the message.
uint64_t read_count(const json& v, const std::string& at, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return 0;  // "-0"
  if (v.is_number_integer())
    MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{}: {} is {}, must be >= 0", at, what, v.get<int64_t>());
  if (v.is_number())
    MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{}: {} is {}, not an integer", at, what,
             v.get<double>());
  MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{}: {} is a JSON {}, not an integer", at, what,
           v.type_name());
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size,
                             const std::string& where) {
  const std::string at = fmt::format("{}: tensor '{}'", where, name);
  MOE_CHECK(v.is_object(), MOE_STATUS_INVALID_ARGUMENT,
            "{} must be an object with dtype, shape and data_offsets, got a JSON {}", at,
            v.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    MOE_CHECK(v.contains(key), MOE_STATUS_INVALID_ARGUMENT, "{} has no '{}'", at, key);
  const json& dtype = v["dtype"];
  const json& shape = v["shape"];
  const json& offsets = v["data_offsets"];
  MOE_CHECK(dtype.is_string(), MOE_STATUS_INVALID_ARGUMENT, "{}: dtype must be a string, got {}",
            at, dtype.type_name());
  MOE_CHECK(shape.is_array(), MOE_STATUS_INVALID_ARGUMENT, "{}: shape must be a list, got {}", at,
            shape.type_name());
  MOE_CHECK(offsets.is_array() && offsets.size() == 2, MOE_STATUS_INVALID_ARGUMENT,
            "{}: data_offsets must be a list [begin, end]", at);

  SafetensorsEntry e;
  e.name = name;
  e.st_dtype = dtype.get<std::string>();
  const DtypeName& d = dtype_of(e.st_dtype, at);
  e.dtype = d.dtype;
  e.bits = uint32_t(d.bits);
  uint64_t numel = 1;
  bool overflow = false, empty = false;  // a zero dimension makes any product of the rest 0
  for (size_t i = 0; i < shape.size(); ++i) {
    const uint64_t d = read_count(shape[i], at, fmt::format("shape[{}]", i));
    MOE_CHECK(d <= uint64_t(INT64_MAX), MOE_STATUS_INVALID_ARGUMENT,
              "{}: shape[{}]={} is too large", at, i, d);
    e.shape.push_back(int64_t(d));
    overflow |= __builtin_mul_overflow(numel, d, &numel);
    empty |= d == 0;
  }
  uint64_t bits = 0;
  overflow |= __builtin_mul_overflow(numel, d.bits, &bits);
  if (empty) bits = 0;
  MOE_CHECK(empty || !overflow, MOE_STATUS_INVALID_ARGUMENT,
            "{}: shape [{}] has more elements than 64 bits can count", at,
            fmt::join(e.shape, ", "));
  MOE_CHECK(bits % 8 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: shape [{}] of {} is {} bits, not whole bytes", at, fmt::join(e.shape, ", "),
            e.st_dtype, bits);
  const uint64_t bytes = bits / 8;

  e.begin = read_count(offsets[0], at, "data_offsets[0]");
  e.end = read_count(offsets[1], at, "data_offsets[1]");
  MOE_CHECK(e.begin <= e.end, MOE_STATUS_INVALID_ARGUMENT,
            "{}: data_offsets [{}, {}] end before they begin", at, e.begin, e.end);
  MOE_CHECK(e.end <= data_size, MOE_STATUS_IO_ERROR,
            "{}: data_offsets [{}, {}] lie outside the {}-byte data section: truncated file?", at,
            e.begin, e.end, data_size);
  MOE_CHECK(e.end - e.begin == bytes, MOE_STATUS_INVALID_ARGUMENT,
            "{}: data_offsets [{}, {}] hold {} bytes, but shape [{}] of {} needs {} bytes", at,
            e.begin, e.end, e.end - e.begin, fmt::join(e.shape, ", "), e.st_dtype, bytes);
  return e;
}

// Two tensors sharing bytes would alias; empty tensors occupy nothing and never overlap.
void check_no_overlap(const std::vector<SafetensorsEntry>& entries, const std::string& where) {
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->begin < b->begin; });
  const SafetensorsEntry* furthest = nullptr;  // the range reaching furthest so far
  for (const auto* e : by_offset) {
    if (furthest && e->begin < furthest->end)
      MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT,
               "{}: tensors '{}' (bytes [{}, {})) and '{}' (bytes [{}, {})) overlap", where,
               furthest->name, furthest->begin, furthest->end, e->name, e->begin, e->end);
    if (!furthest || e->end > furthest->end) furthest = e;
  }
}

std::string read_small_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  MOE_CHECK(!ec && size <= kSafetensorsMaxHeaderBytes, MOE_STATUS_IO_ERROR, "cannot read '{}': {}",
            path, ec ? ec.message() : "larger than 100 MB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  MOE_CHECK(in.good() || in.eof(), MOE_STATUS_IO_ERROR, "cannot read '{}'", path);
  return ss.str();
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view text, uint64_t data_size,
                                           const std::string& where) {
  const json j = parse_json(text, where, "safetensors header");
  SafetensorsHeader h;
  for (const auto& [name, value] : j.items()) {
    if (name != "__metadata__") {
      h.entries.push_back(parse_entry(name, value, data_size, where));
      continue;
    }
    MOE_CHECK(value.is_object(), MOE_STATUS_INVALID_ARGUMENT,
              "{}: __metadata__ must be an object of strings, got a JSON {}", where,
              value.type_name());
    for (const auto& [key, v] : value.items()) {
      MOE_CHECK(v.is_string(), MOE_STATUS_INVALID_ARGUMENT,
                "{}: __metadata__ value of '{}' must be a string, got a JSON {}", where, key,
                v.type_name());
      h.metadata.emplace(key, v.get<std::string>());
    }
  }
  check_no_overlap(h.entries, where);
  std::sort(h.entries.begin(), h.entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return h;
}

// ---- SafetensorsFile --------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO opens at once (then fstat refuses it) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    MOE_CHECK(err != ENOENT, MOE_STATUS_NOT_FOUND, "safetensors file '{}' does not exist", path);
    MOE_FAIL(MOE_STATUS_IO_ERROR, "cannot open '{}': {}", path, std::strerror(err));
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const uint64_t size = stat_ok ? uint64_t(st.st_size) : 0;
  void* map = nullptr;
  if (stat_ok && S_ISREG(st.st_mode) && size >= 8)
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  MOE_CHECK(stat_ok && S_ISREG(st.st_mode), MOE_STATUS_IO_ERROR, "'{}' is not a regular file",
            path);
  MOE_CHECK(size >= 8, MOE_STATUS_IO_ERROR,
            "{}: {} bytes is too short for a safetensors file (8-byte header length first)", path,
            size);
  MOE_CHECK(map != MAP_FAILED, MOE_STATUS_IO_ERROR, "cannot map '{}': {}", path,
            std::strerror(map_errno));

  SafetensorsFile f;  // owns the mapping from here on, so a throw below unmaps it
  f.path_ = path;
  f.map_ = std::unique_ptr<void, Unmap>(map, Unmap{size});
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t n = 0;  // little-endian whatever the host
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  MOE_CHECK(n <= kSafetensorsMaxHeaderBytes, MOE_STATUS_IO_ERROR,
            "{}: header length {} exceeds the {}-byte limit: not a safetensors file?", path, n,
            kSafetensorsMaxHeaderBytes);
  MOE_CHECK(n <= size - 8, MOE_STATUS_IO_ERROR,
            "{}: header length {} exceeds the file size ({} bytes): truncated file?", path, n,
            size);
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), n);
  f.header_ = parse_safetensors_header(header, size - 8 - n, path);
  f.data_section_ = bytes + 8 + n;
  return f;
}

void SafetensorsFile::Unmap::operator()(void* p) const {
  ::munmap(p, size);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  const auto& es = header_.entries;
  auto it =
      std::lower_bound(es.begin(), es.end(), name,
                       [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != es.end() && it->name == name ? &*it : nullptr;
}

const uint8_t* SafetensorsFile::data(const SafetensorsEntry& e) const {
  return data_section_ + e.begin;
}

moe_tensor SafetensorsFile::view(const SafetensorsEntry& e) const {
  MOE_CHECK(e.shape.size() <= MOE_TENSOR_MAX_DIMS, MOE_STATUS_INVALID_ARGUMENT,
            "{}: tensor '{}' has {} dimensions; a moe_tensor holds at most {}", path_, e.name,
            e.shape.size(), MOE_TENSOR_MAX_DIMS);
  MOE_CHECK(e.dtype != MOE_DTYPE_INVALID, MOE_STATUS_UNSUPPORTED,
            "{}: tensor '{}' is {}, which moe-registry does not read", path_, e.name, e.st_dtype);
  moe_tensor t{};
  t.data = const_cast<uint8_t*>(data(e));  // the ABI's one tensor type has a mutable pointer
  t.dtype = e.dtype;
  t.ndim = int32_t(e.shape.size());
  std::copy(e.shape.begin(), e.shape.end(), t.shape);
  return t;
}

// ---- Checkpoint -------------------------------------------------------------------------------

Checkpoint Checkpoint::open(const std::string& path) {
  constexpr const char* kIndex = "model.safetensors.index.json";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  // Not "does not exist" for what exists but cannot be followed (a symbolic link loop, a
  // directory without search permission): the system's reason.
  MOE_CHECK(!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory,
            MOE_STATUS_IO_ERROR, "checkpoint '{}' cannot be read: {}", path, ec.message());
  MOE_CHECK(fs::exists(st), MOE_STATUS_NOT_FOUND, "checkpoint '{}' does not exist{}", path,
            fs::path(path).is_relative() ? fmt::format(" (relative to the current directory, {})",
                                                       fs::current_path(ec).string())
                                         : "");
  fs::path file = path;
  if (fs::is_directory(st)) {
    std::vector<std::string> shards;
    for (const auto& de : fs::directory_iterator(path, ec))
      if (de.path().extension() == ".safetensors") shards.push_back(de.path().filename());
    std::sort(shards.begin(), shards.end());
    const fs::file_status index_st = fs::symlink_status(file / kIndex, ec);
    if (fs::exists(index_st))  // an index that cannot be opened is named by reading it
      file /= kIndex;
    else if (std::find(shards.begin(), shards.end(), "model.safetensors") != shards.end())
      file /= "model.safetensors";
    else if (shards.size() == 1)
      file /= shards[0];
    else
      MOE_FAIL(shards.empty() ? MOE_STATUS_NOT_FOUND : MOE_STATUS_INVALID_ARGUMENT,
               "checkpoint directory '{}' holds {} .safetensors files ({}) and no {} saying "
               "which tensor is where",
               path, shards.size(), fmt::join(shards, ", "), kIndex);
  }

  Checkpoint c;
  c.path_ = path;
  if (file.extension() != ".json") {
    c.files_.push_back(SafetensorsFile::open(file.string()));
    const auto& es = c.files_[0].entries();
    for (size_t i = 0; i < es.size(); ++i) c.tensors_.emplace(es[i].name, Location{0, i});
    return c;
  }

  const std::string index = file.string();
  const json j = parse_json(read_small_file(index), index, "index");
  MOE_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), MOE_STATUS_INVALID_ARGUMENT,
            "{}: the index needs a 'weight_map' object {{tensor: shard file}}", index);
  std::map<std::string, size_t> opened;  // shard file -> index in files_
  for (const auto& [tensor, shard_json] : j["weight_map"].items()) {
    MOE_CHECK(shard_json.is_string(), MOE_STATUS_INVALID_ARGUMENT,
              "{}: weight_map['{}'] must be a file name, got a JSON {}", index, tensor,
              shard_json.type_name());
    const std::string shard = shard_json.get<std::string>();
    auto it = opened.find(shard);
    if (it == opened.end()) {
      // Shards lie in the index's directory: a path that leaves it is not this checkpoint's.
      const fs::path rel(shard);
      MOE_CHECK(!rel.is_absolute() && std::none_of(rel.begin(), rel.end(),
                                                   [](const fs::path& c) { return c == ".."; }),
                MOE_STATUS_INVALID_ARGUMENT,
                "{}: tensor '{}' is in shard '{}', a path outside the checkpoint's directory: an "
                "index names its shards relative to it",
                index, tensor, shard);
      const fs::path shard_path = file.parent_path() / shard;
      const fs::file_status shard_st = fs::status(shard_path, ec);
      MOE_CHECK(fs::is_regular_file(shard_st), MOE_STATUS_NOT_FOUND,
                "{}: tensor '{}' is in shard '{}', which {} ({})", index, tensor, shard,
                ec && ec != std::errc::no_such_file_or_directory
                    ? fmt::format("cannot be read: {}", ec.message())
                : fs::exists(shard_st) ? std::string("is not a regular file")
                                       : std::string("does not exist"),
                shard_path.string());
      c.files_.push_back(SafetensorsFile::open(shard_path.string()));
      it = opened.emplace(shard, c.files_.size() - 1).first;
    }
    const SafetensorsFile& f = c.files_[it->second];
    const SafetensorsEntry* e = f.find(tensor);
    MOE_CHECK(e, MOE_STATUS_NOT_FOUND,
              "{}: tensor '{}' is listed in shard '{}', but that file does not hold it", index,
              tensor, shard);
    c.tensors_.emplace(tensor, Location{it->second, size_t(e - f.entries().data())});
  }
  return c;
}

std::vector<std::string> Checkpoint::names(std::string_view prefix) const {
  std::vector<std::string> out;
  for (auto it = tensors_.lower_bound(prefix);
       it != tensors_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix; ++it)
    out.push_back(it->first);
  return out;
}

const SafetensorsEntry* Checkpoint::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &files_[it->second.file].entries()[it->second.entry];
}

const Checkpoint::Location& Checkpoint::locate(std::string_view name) const {
  const auto it = tensors_.find(name);
  MOE_CHECK(it != tensors_.end(), MOE_STATUS_NOT_FOUND, "{}: no tensor '{}' in the checkpoint",
            path_, name);
  return it->second;
}

moe_tensor Checkpoint::view(std::string_view name) const {
  const Location& l = locate(name);
  return files_[l.file].view(files_[l.file].entries()[l.entry]);
}

const uint8_t* Checkpoint::data(std::string_view name) const {
  const Location& l = locate(name);
  return files_[l.file].data(files_[l.file].entries()[l.entry]);
}

}  // namespace moe
