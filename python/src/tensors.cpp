// DLPack and buffer-protocol arrays to moe_tensor views (tensors.hpp), with every check a plugin
// would otherwise make after the fact: the binding names the argument the Python caller wrote.
#include "tensors.hpp"

#include <fmt/ranges.h>

#include <array>
#include <cstring>
#include <optional>

#include "status.hpp"

namespace moe::py {
namespace {

namespace dl = nb::dlpack;

struct DtypeName {
  moe_dtype dtype;
  const char* name;
};
constexpr std::array<DtypeName, 11> kDtypeNames = {{
    {MOE_DTYPE_BF16, "bf16"},
    {MOE_DTYPE_F16, "f16"},
    {MOE_DTYPE_F32, "f32"},
    {MOE_DTYPE_F64, "f64"},
    {MOE_DTYPE_E4M3, "e4m3"},
    {MOE_DTYPE_E2M1X2, "e2m1x2"},
    {MOE_DTYPE_UE8M0, "ue8m0"},
    {MOE_DTYPE_I32, "i32"},
    {MOE_DTYPE_I64, "i64"},
    {MOE_DTYPE_U8, "u8"},
    {MOE_DTYPE_I8, "i8"},
}};

size_t dtype_bytes(moe_dtype d) {
  switch (d) {
    case MOE_DTYPE_BF16:
    case MOE_DTYPE_F16:
      return 2;
    case MOE_DTYPE_F32:
    case MOE_DTYPE_I32:
      return 4;
    case MOE_DTYPE_F64:
    case MOE_DTYPE_I64:
      return 8;
    default:
      return 1;
  }
}

// The ABI dtype of a DLPack one; nullopt where the ABI has none (complex, float8_e5m2, ...).
std::optional<moe_dtype> from_dlpack(dl::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<dl::dtype_code>(t.code);
  const auto is = [&](dl::dtype_code c, int bits) { return code == c && t.bits == bits; };
  if (is(dl::dtype_code::Bfloat, 16)) return MOE_DTYPE_BF16;
  if (is(dl::dtype_code::Float, 16)) return MOE_DTYPE_F16;
  if (is(dl::dtype_code::Float, 32)) return MOE_DTYPE_F32;
  if (is(dl::dtype_code::Float, 64)) return MOE_DTYPE_F64;
  if (is(dl::dtype_code::Float8_E4M3FN, 8)) return MOE_DTYPE_E4M3;
  if (is(dl::dtype_code::Float8_E8M0FNU, 8)) return MOE_DTYPE_UE8M0;
  if (is(dl::dtype_code::Int, 32)) return MOE_DTYPE_I32;
  if (is(dl::dtype_code::Int, 64)) return MOE_DTYPE_I64;
  if (is(dl::dtype_code::Int, 8)) return MOE_DTYPE_I8;
  if (is(dl::dtype_code::UInt, 8) || is(dl::dtype_code::Bool, 8)) return MOE_DTYPE_U8;
  return std::nullopt;
}

std::string dlpack_str(dl::dtype t) {
  static constexpr const char* kCodes[] = {"int",    "uint",    "float", "handle",
                                           "bfloat", "complex", "bool"};
  const char* code = t.code < std::size(kCodes) ? kCodes[t.code] : "float8/4/6 code ";
  return t.code < std::size(kCodes) ? fmt::format("{}{}", code, t.bits)
                                    : fmt::format("{}{} ({} bits)", code, t.code, t.bits);
}

std::optional<moe_dtype> parse_dtype(const std::string& name) {
  for (const auto& d : kDtypeNames)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

std::string device_str(int type, int id) {
  switch (type) {
    case nb::device::cpu::value:
      return "cpu";
    case nb::device::cuda::value:
      return fmt::format("cuda:{}", id);
    case nb::device::cuda_host::value:
      return "cuda_host (pinned host memory)";
    case nb::device::cuda_managed::value:
      return fmt::format("cuda_managed:{}", id);
    default:
      return fmt::format("DLPack device type {}:{}", type, id);
  }
}

// ml_dtypes' NumPy scalar types carry no DLPack code: their bits go as unsigned ints, tagged.
// str(obj) as Python writes it (torch.float8_e4m3fn, bfloat16, >f4, object), "?" if that fails.
std::string str_of(nb::handle obj) {
  const nb::object text = nb::steal(PyObject_Str(obj.ptr()));
  if (!text.is_valid()) {
    PyErr_Clear();
    return "?";
  }
  return nb::cast<std::string>(text);
}

// The integer view that carries an ml_dtypes array's bits, and the dtype they are. The view keeps
// the array's byte order: a byte-swapped bfloat16 becomes '>u2', which DLPack refuses (read as
// '<u2' its values would be wrong with no error).
std::optional<std::pair<std::string, moe_dtype>> ml_dtypes_view(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view")) return std::nullopt;
  const std::string module = nb::cast<std::string>(nb::handle(obj.type()).attr("__module__"));
  if (module != "numpy") return std::nullopt;
  const nb::object dtype = obj.attr("dtype");
  const std::string name = nb::cast<std::string>(dtype.attr("name"));
  const std::string order = nb::cast<std::string>(dtype.attr("byteorder"));  // '=', '<', '>', '|'
  if (name == "bfloat16") return std::pair{order + "u2", MOE_DTYPE_BF16};
  if (name == "float8_e4m3fn") return std::pair{std::string("u1"), MOE_DTYPE_E4M3};
  if (name == "float8_e8m0fnu") return std::pair{std::string("u1"), MOE_DTYPE_UE8M0};
  return std::nullopt;
}

void* empty_storage() {
  alignas(256) static unsigned char storage[256];
  return storage;
}

template <class Array>
void check_contiguous(const Array& a, const std::string& name) {
  int64_t expected = 1;
  std::vector<int64_t> shape, strides;
  bool ok = true;
  for (size_t i = 0; i < a.ndim(); ++i)
    if (a.shape(i) == 0) return;  // no elements: any strides will do
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) ok = false;
    expected *= int64_t(a.shape(i));
  }
  if (ok) return;
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape.push_back(int64_t(a.shape(i)));
    strides.push_back(a.stride(i));
  }
  fail(MOE_STATUS_INVALID_ARGUMENT,
       "{}: a non-contiguous view (shape ({}), strides ({}) in elements); pass a C-contiguous "
       "copy (numpy.ascontiguousarray(x), x.contiguous())",
       name, fmt::join(shape, ", "), fmt::join(strides, ", "));
}

template <class Array>
void check_placement(const Array& a, const std::string& name, Placement& where) {
  const int type = a.device_type(), id = a.device_id();
  const bool host = type == nb::device::cpu::value || type == nb::device::cuda_host::value;
  const bool cuda = type == nb::device::cuda::value || type == nb::device::cuda_managed::value;
  if (where.memory == kEitherMemory) {
    if (!host && !cuda)
      fail(MOE_STATUS_INVALID_ARGUMENT, "{}: on {}, but this takes host or CUDA device memory",
           name, device_str(type, id));
    where.memory = host ? MOE_MEMORY_HOST : MOE_MEMORY_CUDA_DEVICE;
    where.first = name;
    where.first_place = device_str(type, id);
  }
  const bool elsewhere = where.memory == MOE_MEMORY_HOST
                             ? !host
                             : !cuda || (where.device_id >= 0 && where.device_id != id);
  if (elsewhere && !where.first.empty())
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "{}: on {}, but {} is on {}: pass them all in one place (host memory, or one CUDA "
         "device)",
         name, device_str(type, id), where.first, where.first_place);
  if (where.memory == MOE_MEMORY_HOST && !host)
    fail(MOE_STATUS_INVALID_ARGUMENT, "{}: on {}, but this takes host memory", name,
         device_str(type, id));
  if (where.memory == MOE_MEMORY_CUDA_DEVICE && !cuda)
    fail(MOE_STATUS_INVALID_ARGUMENT, "{}: on {}, but the layer's plugin takes CUDA device memory",
         name, device_str(type, id));
  if (!cuda) return;
  if (where.device_id >= 0 && where.device_id != id)
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "{}: on cuda:{}, but the layer and the other tensors are on "
         "cuda:{}",
         name, id, where.device_id);
  where.device_id = id;
}

// A CUDA array (DLPack device kDLCUDA or kDLCUDAManaged) exported by the call itself with the
// call's stream, as DLPack asks of a consumer: nanobind calls __dlpack__() without one, which the
// protocol reads as the legacy default stream (some torch and CuPy releases make it wait on the
// producer's stream then, and inside a graph capture that wait invalidates the capture). DLPack
// numbers the legacy default stream 1 (0 is not allowed), and -1 says no synchronisation is
// needed (Placement::stream_is_current). No capsule (an invalid object) for host arrays, calls
// without a stream and exporters that refuse (torch refuses the per-thread default stream, 2):
// the plain import then gives its own answer.
nb::object cuda_capsule(nb::handle array, const Placement& where, Access access) {
  if (!where.stream || !nb::hasattr(array, "__dlpack__") ||
      !nb::hasattr(array, "__dlpack_device__"))
    return {};
  constexpr int kDLCUDA = 2, kDLCUDAManaged = 13;
  try {
    const nb::tuple device = nb::cast<nb::tuple>(array.attr("__dlpack_device__")());
    const int type = device.size() == 2 ? nb::cast<int>(device[0]) : 0;
    if (type != kDLCUDA && type != kDLCUDAManaged) return {};
    const nb::object stream = where.stream_is_current
                                  ? nb::cast(int64_t(-1))
                                  : nb::cast(uint64_t(*where.stream == 0 ? 1 : *where.stream));
#if NB_VERSION_MAJOR > 2 || (NB_VERSION_MAJOR == 2 && NB_VERSION_MINOR >= 10)
    // DLPack 1.0 carries the read-only bit a write needs (nanobind reads its versioned capsules
    // from 2.10 on; an older one takes the legacy capsule only).
    if (access == Access::kWrite) {
      try {
        return array.attr("__dlpack__")(nb::arg("stream") = stream,
                                        nb::arg("max_version") = nb::make_tuple(1, 0));
      } catch (nb::python_error& e) {
        if (!e.matches(PyExc_TypeError)) throw;  // an exporter older than max_version: retry
      }
    }
#else
    (void)access;
#endif
    return array.attr("__dlpack__")(nb::arg("stream") = stream);
  } catch (nb::python_error&) {
    return {};
  } catch (nb::cast_error&) {
    return {};
  }
}

}  // namespace

const char* dtype_name(int32_t dtype) {
  for (const auto& d : kDtypeNames)
    if (d.dtype == dtype) return d.name;
  return "invalid";
}

template <class Array>
moe_tensor view_of(Array& a, const std::string& name, std::optional<moe_dtype> tag,
                   Placement& where) {
  if (a.ndim() > MOE_TENSOR_MAX_DIMS)
    fail(MOE_STATUS_SHAPE_MISMATCH, "{}: {} dimensions, more than the ABI's {}", name, a.ndim(),
         MOE_TENSOR_MAX_DIMS);
  const auto code = static_cast<dl::dtype_code>(a.dtype().code);
  if (tag && code != dl::dtype_code::UInt && code != dl::dtype_code::Int)
    fail(MOE_STATUS_DTYPE_MISMATCH,
         "{}: a dtype tag reads the bits of an integer array (uint16 as bf16, uint8 as e4m3, ...), "
         "not of {} values",
         name, dlpack_str(a.dtype()));
  if (tag && (a.dtype().lanes != 1 || dtype_bytes(*tag) * 8 != a.dtype().bits))
    fail(MOE_STATUS_DTYPE_MISMATCH, "{}: cannot read {} bits as {}", name, dlpack_str(a.dtype()),
         dtype_name(*tag));
  const auto dtype = tag ? tag : from_dlpack(a.dtype());
  if (!dtype)
    fail(MOE_STATUS_DTYPE_MISMATCH, "{}: dtype {} has no moe_dtype", name, dlpack_str(a.dtype()));
  check_contiguous(a, name);
  check_placement(a, name, where);
  moe_tensor t;
  std::memset(&t, 0, sizeof t);
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  // An empty array may come without storage (torch's and CuPy's zero-size device arrays have a
  // NULL pointer), but a NULL router_logits means "not given" in the ABI: point it somewhere that
  // is never read (the core skips empty tensors' placement checks).
  if (t.data == nullptr && a.size() == 0) t.data = empty_storage();
  t.dtype = *dtype;
  t.ndim = int32_t(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) t.shape[i] = int64_t(a.shape(i));  // strides 0: contiguous
  return t;
}

moe_tensor tensor_arg(nb::handle obj, const std::string& name, Placement& where, Keep& keep,
                      Access access) {
  nb::object array = nb::borrow(obj);
  std::optional<moe_dtype> tag;
  if (nb::isinstance<nb::tuple>(obj)) {
    const auto pair = nb::borrow<nb::tuple>(obj);
    if (pair.size() != 2 || !nb::isinstance<nb::str>(pair[1]))
      fail(MOE_STATUS_INVALID_ARGUMENT,
           "{}: a tuple must be (array, dtype name), e.g. (x, \"bf16\")", name);
    const std::string tag_name = nb::cast<std::string>(pair[1]);
    tag = parse_dtype(tag_name);
    if (!tag)
      fail(MOE_STATUS_INVALID_ARGUMENT,
           "{}: '{}' is not a dtype name; one of bf16, f16, f32, f64, "
           "e4m3, e2m1x2, ue8m0, i32, i64, u8, i8",
           name, tag_name);
    array = pair[0];
    if (const auto view = ml_dtypes_view(array)) {  // already typed by ml_dtypes: read its bits
      // A tag naming another dtype of the same size would read the values as something else
      // (bf16 bits as f16): refused, as a wrong dtype is everywhere else.
      if (*tag != view->second)
        fail(MOE_STATUS_DTYPE_MISMATCH,
             "{}: tagged \"{}\", but the array's dtype is {} ({} values): drop the tag, or "
             "view the bits as plain integers first",
             name, tag_name, str_of(array.attr("dtype")), dtype_name(view->second));
      array = array.attr("view")(view->first.c_str());
    }
  } else if (const auto view = ml_dtypes_view(obj)) {
    array = obj.attr("view")(view->first.c_str());
    tag = view->second;
  }
  const auto not_an_array = [&] {
    const std::string type =
        nb::cast<std::string>(nb::str(nb::handle(array.type()).attr("__name__")));
    if (nb::hasattr(array, "dtype"))  // an array DLPack cannot carry: its dtype, byte order, ...
      fail(MOE_STATUS_DTYPE_MISMATCH,
           "{}: a {} of dtype {} cannot be read through DLPack (object, structured or byte-swapped "
           "values, a dtype its exporter refuses such as torch's float8 types: pass "
           "(t.view(torch.uint8), \"e4m3\"), or a torch tensor that requires grad: detach it)",
           name, type, str_of(array.attr("dtype")));
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "{}: expected an array (NumPy, torch, CuPy: anything with __dlpack__), got {}", name,
         type);
  };
  const nb::object capsule = cuda_capsule(array, where, access);
  const nb::handle source = capsule.is_valid() ? nb::handle(capsule) : nb::handle(array);
  if (access == Access::kWrite) {
    nb::ndarray<> w;
    if (!nb::try_cast(source, w, /*convert=*/false)) {
      nb::ndarray<nb::ro> r;
      if (nb::try_cast(array, r, /*convert=*/false))
        fail(MOE_STATUS_INVALID_ARGUMENT, "{}: a read-only array; the layer writes it", name);
      not_an_array();
    }
    const moe_tensor t = view_of(w, name, tag, where);
    keep.written.push_back(std::move(w));
    return t;
  }
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(source, a, /*convert=*/false)) not_an_array();
  const moe_tensor t = view_of(a, name, tag, where);
  keep.read.push_back(std::move(a));
  return t;
}

moe_tensor tensor_arg(nb::handle obj, const std::string& name, moe_dtype dtype,
                      const std::vector<int64_t>& shape, Placement& where, Keep& keep,
                      Access access) {
  const moe_tensor t = tensor_arg(obj, name, where, keep, access);
  if (t.dtype != dtype)
    fail(MOE_STATUS_DTYPE_MISMATCH, "{}: expected {}, got {}", name, dtype_name(dtype),
         dtype_name(t.dtype));
  bool same = t.ndim == int32_t(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i)
    same = shape[i] == kAnyDim || t.shape[i] == shape[i];
  if (!same) {
    std::vector<std::string> want;
    for (int64_t d : shape) want.push_back(d == kAnyDim ? "*" : std::to_string(d));
    fail(MOE_STATUS_SHAPE_MISMATCH, "{}: expected shape ({}), got ({})", name,
         fmt::join(want, ", "), fmt::join(t.shape, t.shape + t.ndim, ", "));
  }
  return t;
}

}  // namespace moe::py
