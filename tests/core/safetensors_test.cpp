// Proves moe/safetensors.hpp: files from the real Python writer (tests/fixtures/
// make_safetensors.py) read back with every dtype's values, shapes and metadata; sharded
// checkpoints resolve through their index; and every malformed file, built here byte by byte, is
// a moe::Error whose message names the file, the tensor and the problem.
#include "moe/safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace moe {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

const fs::path kFixtures = MOE_SAFETENSORS_FIXTURE_DIR;  // written by the safetensors_fixtures test

template <class Fn>
void expect_error(Fn&& fn, moe_status status, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << status_name(e.status()) << ": " << e.what();
    for (const auto& part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected moe::Error, got another exception: " << e.what();
  }
}

void expect_header_error(const std::string& json, uint64_t data_size, moe_status status,
                         std::initializer_list<std::string> parts) {
  expect_error([&] { parse_safetensors_header(json, data_size, "t.safetensors"); }, status, parts);
}

// A fresh directory per test (ctest runs tests as parallel processes), removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(testing::TempDir()) /
            ("moe_st_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  // Writes a safetensors file: u64 LE length (`n`, or the header's size), header, data.
  std::string write(const std::string& name, const std::string& header, const std::string& data,
                    std::optional<uint64_t> n = std::nullopt) const {
    std::string bytes(8, '\0');
    const uint64_t len = n.value_or(header.size());
    for (int i = 0; i < 8; ++i) bytes[i] = char((len >> (8 * i)) & 0xff);
    return write_raw(name, bytes + header + data);
  }
  std::string write_raw(const std::string& name, const std::string& bytes) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    return p.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

double f16_to_double(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return (h & 0x8000) ? -mag : mag;  // no inf/NaN in the fixtures
}

// Element i of a tensor as a double; memcpy because safetensors data need not be aligned.
double element(const uint8_t* p, moe_dtype dtype, int64_t i) {
  auto load = [&](auto v) {
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (dtype) {
    case MOE_DTYPE_BF16:
      return bf16_to_float(load(uint16_t()));
    case MOE_DTYPE_F16:
      return f16_to_double(load(uint16_t()));
    case MOE_DTYPE_F32:
      return load(float());
    case MOE_DTYPE_F64:
      return load(double());
    case MOE_DTYPE_E4M3:
      return e4m3_to_double(load(uint8_t()));
    case MOE_DTYPE_U8:
      return load(uint8_t());
    case MOE_DTYPE_I8:
      return load(int8_t());
    case MOE_DTYPE_I32:
      return load(int32_t());
    case MOE_DTYPE_I64:
      return double(load(int64_t()));  // fixture values are exact in double
    default:
      ADD_FAILURE() << "unexpected dtype " << dtype;
      return NAN;
  }
}

// Checks one tensor against make_safetensors.py's record of it.
void expect_tensor(const SafetensorsEntry* e, const uint8_t* data, const nlohmann::json& want) {
  ASSERT_NE(e, nullptr);
  SCOPED_TRACE(e->name);
  EXPECT_EQ(e->st_dtype, want["dtype"].get<std::string>());
  EXPECT_EQ(e->shape, want["shape"].get<std::vector<int64_t>>());
  const auto values = want["values"].get<std::vector<double>>();
  EXPECT_EQ(e->end - e->begin, values.size() * dtype_size(e->dtype));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(element(data, e->dtype, int64_t(i)), values[i]) << "element " << i;
}

nlohmann::json expected(const std::string& key) {
  std::ifstream in(kFixtures / "expected.json");
  EXPECT_TRUE(in.good()) << "missing fixtures: run ctest (safetensors_fixtures) first";
  return nlohmann::json::parse(in).at(key);
}

// ---- files from the real writer ---------------------------------------------------------------

TEST(SafetensorsFile, ReadsEveryDtypeTheRealWriterWrites) {
  const auto f = SafetensorsFile::open(kFixtures / "all_dtypes.safetensors");
  const auto want = expected("all_dtypes.safetensors");
  std::set<std::string> dtypes;
  EXPECT_EQ(f.entries().size(), want["tensors"].size());
  for (const auto& [name, t] : want["tensors"].items()) {
    const SafetensorsEntry* e = f.find(name);
    expect_tensor(e, e ? f.data(*e) : nullptr, t);
    dtypes.insert(t["dtype"].get<std::string>());
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"BF16", "F16", "F32", "F64", "F8_E4M3", "U8", "I8",
                                           "I32", "I64"}));
  EXPECT_EQ(f.find("bf16")->dtype, MOE_DTYPE_BF16);
  EXPECT_EQ(f.find("f8_e4m3")->dtype, MOE_DTYPE_E4M3);
  EXPECT_EQ(f.find("i64")->dtype, MOE_DTYPE_I64);
  EXPECT_EQ(f.find("no_such_tensor"), nullptr);
}

TEST(SafetensorsFile, ReadsMetadataAndListsEntriesByName) {
  const auto f = SafetensorsFile::open(kFixtures / "all_dtypes.safetensors");
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{
                              {"format", "pt"}, {"producer", "make_safetensors.py"}}));
  EXPECT_TRUE(std::is_sorted(f.entries().begin(), f.entries().end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
}

TEST(SafetensorsFile, ViewBorrowsTheMappedBytesWithDtypeAndShape) {
  const auto f = SafetensorsFile::open(kFixtures / "all_dtypes.safetensors");
  const SafetensorsEntry& e = *f.find("f32");
  const moe_tensor t = f.view(e);
  EXPECT_EQ(t.data, f.data(e));
  EXPECT_EQ(t.dtype, MOE_DTYPE_F32);
  ASSERT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[1], 5);
  EXPECT_EQ(t.strides[0], 0);  // contiguous

  const moe_tensor scalar = f.view(*f.find("scalar_f32"));
  EXPECT_EQ(scalar.ndim, 0);
  EXPECT_EQ(element(static_cast<uint8_t*>(scalar.data), MOE_DTYPE_F32, 0), -2.25);
  const moe_tensor empty = f.view(*f.find("empty_bf16"));
  EXPECT_NE(empty.data, nullptr);  // present, zero bytes
  EXPECT_EQ(empty.shape[0], 0);
}

TEST(SafetensorsCheckpoint, FindsTensorsAcrossShardsThroughTheIndex) {
  const auto want = expected("sharded")["tensors"];
  for (const fs::path& p :
       {kFixtures / "sharded", kFixtures / "sharded" / "model.safetensors.index.json"}) {
    SCOPED_TRACE(p);
    const auto c = Checkpoint::open(p);
    EXPECT_EQ(c.path(), p.string());
    EXPECT_EQ(c.names(),
              (std::vector<std::string>{"layers.0.b", "layers.0.w", "layers.1.ids", "layers.1.w"}));
    for (const auto& [name, t] : want.items()) expect_tensor(c.find(name), c.data(name), t);
    const moe_tensor v = c.view("layers.1.w");
    EXPECT_EQ(v.dtype, MOE_DTYPE_BF16);
    EXPECT_EQ(v.data, c.data("layers.1.w"));
  }
}

TEST(SafetensorsCheckpoint, OpensOneFileOrADirectoryHoldingOne) {
  const auto single = Checkpoint::open(kFixtures / "all_dtypes.safetensors");
  EXPECT_EQ(single.names().size(), expected("all_dtypes.safetensors")["tensors"].size());
  const auto lone = Checkpoint::open(kFixtures / "lone");
  expect_tensor(lone.find("only"), lone.data("only"), expected("lone")["tensors"]["only"]);
}

TEST(SafetensorsCheckpoint, MissingTensorIsNotFoundNamingIt) {
  const auto c = Checkpoint::open(kFixtures / "sharded");
  EXPECT_EQ(c.find("layers.9.w"), nullptr);
  expect_error([&] { c.view("layers.9.w"); }, MOE_STATUS_NOT_FOUND, {"no tensor 'layers.9.w'"});
  expect_error([&] { c.data("layers.9.w"); }, MOE_STATUS_NOT_FOUND, {"'layers.9.w'"});
}

// ---- checkpoints that do not hold together ----------------------------------------------------

constexpr char kOneF32[] = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(SafetensorsCheckpoint, IndexNamingAMissingShardIsNotFound) {
  TempDir dir;
  dir.write("a.safetensors", kOneF32, std::string(8, '\0'));
  dir.write_raw("model.safetensors.index.json",
                R"({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir.path()); }, MOE_STATUS_NOT_FOUND,
               {"tensor 'v' is in shard 'b.safetensors', which does not exist"});
}

TEST(SafetensorsCheckpoint, IndexListingATensorItsShardLacksIsAnError) {
  TempDir dir;
  dir.write("a.safetensors", kOneF32, std::string(8, '\0'));
  const auto index = dir.write_raw("index.json", R"({"weight_map": {"x": "a.safetensors"}})");
  expect_error([&] { Checkpoint::open(index); }, MOE_STATUS_NOT_FOUND,
               {"index.json", "tensor 'x' is listed in shard 'a.safetensors'", "does not hold it"});
}

TEST(SafetensorsCheckpoint, MalformedIndexIsRefused) {
  TempDir dir;
  expect_error([&] { Checkpoint::open(dir.write_raw("i.json", "{\"weight_map\": ")); },
               MOE_STATUS_IO_ERROR, {"i.json", "not valid JSON", "parse error"});
  expect_error([&] { Checkpoint::open(dir.write_raw("i.json", R"({"metadata": {}})")); },
               MOE_STATUS_INVALID_ARGUMENT, {"needs a 'weight_map' object"});
  expect_error([&] { Checkpoint::open(dir.write_raw("i.json", R"({"weight_map": {"w": 3}})")); },
               MOE_STATUS_INVALID_ARGUMENT, {"weight_map['w'] must be a file name"});
}

TEST(SafetensorsCheckpoint, DirectoryWithoutIndexOrWithSeveralFilesIsRefused) {
  TempDir dir;
  expect_error([&] { Checkpoint::open(dir.path()); }, MOE_STATUS_NOT_FOUND,
               {"holds 0 .safetensors files"});
  dir.write("a.safetensors", kOneF32, std::string(8, '\0'));
  dir.write("b.safetensors", kOneF32, std::string(8, '\0'));
  expect_error([&] { Checkpoint::open(dir.path()); }, MOE_STATUS_INVALID_ARGUMENT,
               {"holds 2 .safetensors files (a.safetensors, b.safetensors)",
                "model.safetensors.index.json"});
  expect_error([&] { Checkpoint::open(dir.path() / "none.safetensors"); }, MOE_STATUS_NOT_FOUND,
               {"none.safetensors", "does not exist"});
}

// ---- malformed files, byte by byte ------------------------------------------------------------

TEST(SafetensorsFile, ReadsAHeaderPaddedWithSpaces) {
  TempDir dir;
  const auto f = SafetensorsFile::open(dir.write("p.safetensors", std::string(kOneF32) + "      ",
                                                 std::string("\0\0\x80?\0\0\0@", 8)));
  EXPECT_EQ(element(f.data(*f.find("w")), MOE_DTYPE_F32, 0), 1.0);
  EXPECT_EQ(element(f.data(*f.find("w")), MOE_DTYPE_F32, 1), 2.0);
}

TEST(SafetensorsFile, MissingFileIsNotFound) {
  expect_error([] { SafetensorsFile::open("/nonexistent/x.safetensors"); }, MOE_STATUS_NOT_FOUND,
               {"'/nonexistent/x.safetensors' does not exist"});
}

TEST(SafetensorsFile, FileShorterThanTheLengthFieldIsAnIoError) {
  TempDir dir;
  expect_error([&] { SafetensorsFile::open(dir.write_raw("s.safetensors", "abc")); },
               MOE_STATUS_IO_ERROR, {"s.safetensors", "3 bytes is too short"});
}

TEST(SafetensorsFile, HeaderLengthBeyondTheFileIsAnIoError) {
  TempDir dir;
  expect_error([&] { SafetensorsFile::open(dir.write("h.safetensors", kOneF32, "", 1000)); },
               MOE_STATUS_IO_ERROR, {"h.safetensors", "header length 1000 exceeds the file size"});
  expect_error([&] { SafetensorsFile::open(dir.write("h.safetensors", "{}", "", ~0ull)); },
               MOE_STATUS_IO_ERROR, {"header length 18446744073709551615", "100000000-byte limit"});
}

TEST(SafetensorsFile, TruncatedDataSectionNamesTheTensor) {
  TempDir dir;
  expect_error([&] { SafetensorsFile::open(dir.write("t.safetensors", kOneF32, "1234")); },
               MOE_STATUS_IO_ERROR,
               {"t.safetensors: tensor 'w'", "[0, 8] lie outside the 4-byte data section",
                "truncated file?"});
}

TEST(SafetensorsFile, TooManyDimensionsForAViewIsRefusedAtView) {
  TempDir dir;
  const auto f = SafetensorsFile::open(
      dir.write("d.safetensors",
                R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})", "x"));
  expect_error([&] { f.view(*f.find("w")); }, MOE_STATUS_INVALID_ARGUMENT,
               {"tensor 'w' has 7 dimensions"});
}

TEST(SafetensorsHeader, EmptyHeaderHasNoTensors) {
  const auto h = parse_safetensors_header("{}", 0, "t");
  EXPECT_TRUE(h.entries.empty());
  EXPECT_TRUE(h.metadata.empty());
}

TEST(SafetensorsHeader, NotJsonOrNotAnObjectIsRefused) {
  expect_header_error("{\"w\": {", 0, MOE_STATUS_IO_ERROR,
                      {"t.safetensors: the safetensors header is not valid JSON", "parse error"});
  expect_header_error("[1, 2]", 0, MOE_STATUS_INVALID_ARGUMENT,
                      {"must be a JSON object, got array"});
  expect_header_error(R"({"w": "x"})", 0, MOE_STATUS_INVALID_ARGUMENT,
                      {"tensor 'w' must be an object", "got a JSON string"});
}

TEST(SafetensorsHeader, MissingFieldsAreNamed) {
  expect_header_error(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8, MOE_STATUS_INVALID_ARGUMENT,
                      {"tensor 'w' has no 'dtype'"});
  expect_header_error(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"tensor 'w' has no 'shape'"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2]}})", 8, MOE_STATUS_INVALID_ARGUMENT,
                      {"tensor 'w' has no 'data_offsets'"});
}

TEST(SafetensorsHeader, WrongJsonTypesAreNamed) {
  expect_header_error(R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"'w': dtype must be a string, got number"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"'w': shape must be a list, got string"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT,
                      {"'w': data_offsets must be a list [begin, end]"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":["0",8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"'w': data_offsets[0] is a JSON string"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"'w': data_offsets[1] is -8, must be >= 0"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"'w': data_offsets [8, 0] end before"});
}

TEST(SafetensorsHeader, NegativeOrFractionalDimensionsAreRefused) {
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"tensor 'w': shape[1] is -3, must be >= 0"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8,
                      MOE_STATUS_INVALID_ARGUMENT, {"tensor 'w': shape[0] is 2.5, not an integer"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})",
                      8, MOE_STATUS_INVALID_ARGUMENT,
                      {"shape[0]=9223372036854775808 is too large"});
}

TEST(SafetensorsHeader, ElementCountOverflowIsRefused) {
  expect_header_error(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0,
      MOE_STATUS_INVALID_ARGUMENT,
      {"tensor 'w'", "shape [4294967296, 4294967296] has more elements than 64 bits can count"});
  // numel fits, numel * 4 bytes does not.
  expect_header_error(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})",
                      0, MOE_STATUS_INVALID_ARGUMENT, {"more elements than 64 bits can count"});
  // A zero dimension makes the tensor empty whatever the others are.
  const auto h = parse_safetensors_header(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 0, "t");
  EXPECT_EQ(h.entries.at(0).shape.size(), 3u);
}

TEST(SafetensorsHeader, SizeMismatchSaysBothSizes) {
  expect_header_error(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16,
                      MOE_STATUS_INVALID_ARGUMENT,
                      {"tensor 'w'", "hold 12 bytes, but shape [2, 2] of F32 needs 16 bytes"});
}

TEST(SafetensorsHeader, OverlappingTensorsAreNamedBoth) {
  expect_header_error(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},
                          "b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]},
                          "c":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
                      16, MOE_STATUS_INVALID_ARGUMENT,
                      {"tensors 'a' (bytes [0, 8)) and 'c' (bytes [6, 8)) overlap"});
  // Empty tensors occupy no bytes, so sharing an offset is fine.
  const auto h = parse_safetensors_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},
                                              "e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                                          4, "t");
  EXPECT_EQ(h.entries.size(), 2u);
}

// A dtype no reader takes may sit in a checkpoint (a tensor of another layer): the header parses,
// its byte size checked, and only a read of it is refused. F8_E8M0 reads as ue8m0. A name that is
// no safetensors dtype is refused, listing the known ones.
TEST(SafetensorsHeader, DtypesNoReaderTakesParseAndOnlyUnknownNamesAreRefused) {
  for (const auto& [dtype, bytes] : {std::pair{"F8_E5M2", 1},
                                     {"BOOL", 1},
                                     {"I16", 2},
                                     {"U16", 2},
                                     {"U32", 4},
                                     {"U64", 8},
                                     {"C64", 8}}) {
    SCOPED_TRACE(dtype);
    const auto h = parse_safetensors_header(
        fmt::format(R"({{"w":{{"dtype":"{}","shape":[3],"data_offsets":[0,{}]}}}})", dtype,
                    3 * bytes),
        uint64_t(3 * bytes), "t.safetensors");
    ASSERT_EQ(h.entries.size(), 1u);
    EXPECT_EQ(h.entries[0].dtype, MOE_DTYPE_INVALID);
    EXPECT_EQ(h.entries[0].st_dtype, dtype);
    EXPECT_EQ(h.entries[0].bits, uint32_t(8 * bytes));
    expect_header_error(fmt::format(R"({{"w":{{"dtype":"{}","shape":[3],"data_offsets":[0,{}]}}}})",
                                    dtype, 3 * bytes + 1),
                        uint64_t(3 * bytes + 1), MOE_STATUS_INVALID_ARGUMENT,
                        {fmt::format("shape [3] of {} needs {} bytes", dtype, 3 * bytes)});
  }
  const auto e8 = parse_safetensors_header(
      R"({"s":{"dtype":"F8_E8M0","shape":[2],"data_offsets":[0,2]}})", 2, "t.safetensors");
  EXPECT_EQ(e8.entries[0].dtype, MOE_DTYPE_UE8M0);
  EXPECT_EQ(e8.entries[0].bits, 8u);
  for (const auto& [dtype, elements, bytes] :
       {std::tuple{"F4", 6, 3}, {"F6_E2M3", 4, 3}, {"F6_E3M2", 8, 6}}) {  // packed below a byte
    SCOPED_TRACE(dtype);
    const auto h = parse_safetensors_header(
        fmt::format(R"({{"w":{{"dtype":"{}","shape":[{}],"data_offsets":[0,{}]}}}})", dtype,
                    elements, bytes),
        uint64_t(bytes), "t.safetensors");
    EXPECT_EQ(h.entries[0].dtype, MOE_DTYPE_INVALID);
    EXPECT_EQ(h.entries[0].bits, uint32_t(8 * bytes / elements));
  }
  expect_header_error(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2,
                      MOE_STATUS_INVALID_ARGUMENT, {"shape [3] of F4 is 12 bits, not whole bytes"});
  for (const char* dtype : {"bf16", "F2", ""}) {
    SCOPED_TRACE(dtype);
    expect_header_error(
        fmt::format(R"({{"w":{{"dtype":"{}","shape":[],"data_offsets":[0,1]}}}})", dtype), 1,
        MOE_STATUS_UNSUPPORTED,
        {fmt::format("t.safetensors: tensor 'w' has dtype '{}', which is not a safetensors dtype "
                     "moe-registry knows (BF16, F16, F32, F64, F8_E4M3, F8_E8M0, U8, I8, I32, "
                     "I64, BOOL, F8_E5M2, I16, U16, U32, U64, C64, F4, F6_E2M3, F6_E3M2)",
                     dtype)});
  }
}

TEST(SafetensorsHeader, MetadataMustMapStringsToStrings) {
  expect_header_error(R"({"__metadata__": {"format": "pt", "n": 3}})", 0,
                      MOE_STATUS_INVALID_ARGUMENT, {"__metadata__ value of 'n' must be a string"});
  expect_header_error(R"({"__metadata__": ["pt"]})", 0, MOE_STATUS_INVALID_ARGUMENT,
                      {"__metadata__ must be an object of strings, got a JSON array"});
}

TEST(SafetensorsHeader, DuplicateKeysAreRefused) {
  expect_header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},
                          "w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                      2, MOE_STATUS_INVALID_ARGUMENT, {"duplicate key 'w'"});
  expect_header_error(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 2,
                      MOE_STATUS_INVALID_ARGUMENT, {"duplicate key 'dtype'"});
}

// A FIFO opens at once and is refused as not a regular file (it waited for a writer forever).
TEST(SafetensorsFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  const fs::path fifo = fs::temp_directory_path() / fmt::format("moe_fifo_{}", ::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { SafetensorsFile::open(fifo.string()); }, MOE_STATUS_IO_ERROR,
               {"is not a regular file"});
  fs::remove(fifo);
}

}  // namespace
}  // namespace moe
