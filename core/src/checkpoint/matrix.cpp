#include "matrix.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "moe/checkpoint.hpp"
#include "moe/safetensors_writer.hpp"
#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::detail {
namespace {

// Bytes of one stored row of q (an unquantised matrix's q is F32, not the format's dtype).
size_t q_row_bytes(const Matrix& m) {
  const MatrixLayout l = matrix_layout(m.format, m.rows, m.cols);
  return size_t(l.stored_cols) * dtype_size(m.q.dtype());
}

// IEEE binary16 to float, exactly (every f16 value is a float).
float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  const float sub = std::ldexp(float(man), -24);  // subnormal: man * 2^-24, exact
  return sign ? -sub : sub;
}

// Copies rows [r0, r0 + n) and bytes [c0, c0 + nc) of each row from a row-major byte matrix.
void copy_block(const HostTensor& src, size_t src_row_bytes, int64_t r0, int64_t n, size_t c0,
                size_t nc, uint8_t* dst) {
  const auto* s = static_cast<const uint8_t*>(src.raw());
  for (int64_t r = 0; r < n; ++r) std::memcpy(dst + r * nc, s + (r0 + r) * src_row_bytes + c0, nc);
}

HostTensor sub_matrix(const HostTensor& src, int64_t rows, int64_t cols, int64_t r0, int64_t nr,
                      int64_t c0, int64_t nc) {
  const size_t es = dtype_size(src.dtype());
  HostTensor out(src.dtype(), {nr, nc});
  copy_block(src, size_t(cols) * es, r0, nr, size_t(c0) * es, size_t(nc) * es,
             static_cast<uint8_t*>(out.raw()));
  (void)rows;
  return out;
}

HostTensor concat_rows(const HostTensor& a, const HostTensor& b) {
  std::vector<int64_t> shape = a.shape();
  shape[0] += b.shape()[0];
  HostTensor out(a.dtype(), shape);
  std::memcpy(out.raw(), a.raw(), a.bytes());
  std::memcpy(static_cast<uint8_t*>(out.raw()) + a.bytes(), b.raw(), b.bytes());
  return out;
}

// Halves with one per-matrix scale each must share one: requantise `m` (e4m3 elements) from its
// scale to `to`.
void requantize_to(Matrix& m, float to, const std::string& what) {
  MOE_CHECK(m.q.dtype() == MOE_DTYPE_E4M3, MOE_STATUS_UNSUPPORTED,
            "{}: requantising {} elements to a common scale is not implemented", what,
            dtype_name(m.q.dtype()));
  const float from = m.scale.data<float>()[0];
  spdlog::warn("{}: gate and up fp8 scales differ; requantising a half from scale {} to {}", what,
               from, to);
  auto* q = m.q.data<uint8_t>();
  for (int64_t i = 0; i < m.q.numel(); ++i)
    q[i] = e4m3_from_double(e4m3_to_double(q[i]) * double(from) / double(to));
  m.scale.data<float>()[0] = to;
}

}  // namespace

bool converted_at_load(moe_dtype stored, moe_format format) {
  const bool dense = stored == MOE_DTYPE_F32 || stored == MOE_DTYPE_F16 || stored == MOE_DTYPE_BF16;
  return dense && !(stored == MOE_DTYPE_BF16 && format == MOE_FORMAT_BF16);
}

bool is_half_or_f32(moe_dtype d) {
  return d == MOE_DTYPE_F32 || d == MOE_DTYPE_BF16 || d == MOE_DTYPE_F16;
}

HostTensor to_f32(const HostTensor& t) {
  HostTensor out(MOE_DTYPE_F32, t.shape());
  float* dst = out.data<float>();
  switch (t.dtype()) {
    case MOE_DTYPE_F32:
      std::memcpy(dst, t.raw(), t.bytes());
      break;
    case MOE_DTYPE_BF16:
      for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf16_to_float(t.data<uint16_t>()[i]);
      break;
    case MOE_DTYPE_F16:
      for (int64_t i = 0; i < t.numel(); ++i) dst[i] = f16_to_float(t.data<uint16_t>()[i]);
      break;
    default:
      MOE_FAIL(MOE_STATUS_INTERNAL, "to_f32: {} is not a float dtype", dtype_name(t.dtype()));
  }
  return out;
}

Matrix quantize_loaded(const Matrix& m, moe_format format) {
  if (!is_unquantised(m)) return m;
  const MatrixLayout l = matrix_layout(format, m.rows, m.cols);
  Matrix out{format, m.rows, m.cols, HostTensor(l.dtype, {m.rows, l.stored_cols}), {}, 1.0f};
  if (l.scale_dtype != MOE_DTYPE_INVALID)
    out.scale = l.scale_rows == 0 ? HostTensor(MOE_DTYPE_F32, {1})
                                  : HostTensor(l.scale_dtype, {l.scale_rows, l.scale_cols});
  quantize_matrix(format, m.q.data<float>(), m.rows, m.cols, out.q.raw(),
                  out.scale.empty() ? nullptr : out.scale.raw(), &out.scale_2);
  return out;
}

void record_conversion(const NameContext& ctx, const std::string& name, const std::string& to) {
  if (ctx.converted == nullptr) return;
  const SafetensorsEntry* e = ctx.checkpoint.find(name);
  (*ctx.converted)[name] = {e ? e->st_dtype : "?", to};
}

void check_weight_dtype(const NameContext& ctx, const std::string& name, moe_format format) {
  const SafetensorsEntry* e = ctx.checkpoint.find(name);
  if (e == nullptr) return;  // read_tensor names the missing tensor
  const FormatSpec& f = format_spec(format);
  // Packed fp4 is stored as bytes (U8, or I8 as some exporters write it).
  const bool native =
      f.packed_fp4 ? e->dtype == MOE_DTYPE_U8 || e->dtype == MOE_DTYPE_I8 : e->dtype == f.element;
  if (native || converted_at_load(e->dtype, format)) return;
  const std::string stored = f.packed_fp4 ? "packed e2m1 bytes (U8)" : safetensors_dtype(f.element);
  MOE_FAIL(MOE_STATUS_DTYPE_MISMATCH,
           "checkpoint tensor '{}' is {}, which cannot be converted to {}: expert weights are "
           "read as {}{}, or converted at load from F32, F16 or BF16 ({})",
           name, e->st_dtype, f.name, stored,
           f.scale == MOE_DTYPE_INVALID ? "" : " with the format's scales", ctx.describe);
}

bool has_tensor(const NameContext& ctx, const std::string& name) {
  return ctx.checkpoint.find(name) != nullptr;
}

HostTensor read_tensor(const NameContext& ctx, const std::string& name, moe_dtype dtype,
                       std::vector<int64_t> shape, moe_dtype alt_dtype) {
  const SafetensorsEntry* e = ctx.checkpoint.find(name);
  MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})", name,
            ctx.describe);
  MOE_CHECK(e->dtype == dtype || (alt_dtype != MOE_DTYPE_INVALID && e->dtype == alt_dtype),
            MOE_STATUS_DTYPE_MISMATCH, "checkpoint tensor '{}' is {}, expected {}", name,
            e->st_dtype, dtype_name(dtype));
  MOE_CHECK(e->shape == shape, MOE_STATUS_SHAPE_MISMATCH,
            "checkpoint tensor '{}' has shape [{}], expected [{}] ({})", name,
            fmt::join(e->shape, ", "), fmt::join(shape, ", "), ctx.describe);
  HostTensor t(e->dtype, shape);  // the stored dtype: `alt_dtype` may differ in size
  std::memcpy(t.raw(), ctx.checkpoint.data(name), t.bytes());
  return t;
}

float read_scalar_f32(const NameContext& ctx, const std::string& name) {
  const SafetensorsEntry* e = ctx.checkpoint.find(name);
  MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})", name,
            ctx.describe);
  const bool scalar = e->shape.empty() || (e->shape.size() == 1 && e->shape[0] == 1);
  MOE_CHECK(scalar, MOE_STATUS_SHAPE_MISMATCH,
            "checkpoint tensor '{}' must be one value, got {} [{}]", name, e->st_dtype,
            fmt::join(e->shape, ", "));
  // F32, or BF16 / F16 as some exporters store scales: widened to f32 exactly.
  MOE_CHECK(is_half_or_f32(e->dtype), MOE_STATUS_DTYPE_MISMATCH,
            "checkpoint tensor '{}' must be an F32, BF16 or F16 value, got {}", name, e->st_dtype);
  HostTensor t(e->dtype, {1});
  std::memcpy(t.raw(), ctx.checkpoint.data(name), t.bytes());
  return to_f32(t).data<float>()[0];
}

Matrix read_projection(const NameContext& ctx, const std::string& base, moe_format format,
                       int64_t rows, int64_t cols) {
  const FormatSpec& f = format_spec(format);
  const MatrixLayout l = matrix_layout(format, rows, cols);
  const std::string weight = base + ".weight";
  if (const SafetensorsEntry* e = ctx.checkpoint.find(weight);
      e != nullptr && converted_at_load(e->dtype, format)) {
    record_conversion(ctx, weight, f.name);
    return {MOE_FORMAT_BF16,
            rows,
            cols,
            to_f32(read_tensor(ctx, weight, e->dtype, {rows, cols})),
            {},
            1.0f};
  }
  check_weight_dtype(ctx, weight, format);
  Matrix m{format, rows, cols, {}, {}, 1.0f};
  // Packed fp4 is stored as bytes (U8, or I8 as some exporters write it).
  m.q = read_tensor(ctx, base + ".weight", f.packed_fp4 ? MOE_DTYPE_U8 : l.dtype,
                    {rows, l.stored_cols}, f.packed_fp4 ? MOE_DTYPE_I8 : MOE_DTYPE_INVALID);
  if (f.packed_fp4) m.q.reinterpret(MOE_DTYPE_E2M1X2);
  if (f.scale == MOE_DTYPE_INVALID) return m;

  std::string name = base + "." + f.checkpoint_scale_names[0];
  if (f.checkpoint_scale_names[1] != nullptr && !has_tensor(ctx, name)) {
    const std::string other = base + "." + f.checkpoint_scale_names[1];
    MOE_CHECK(has_tensor(ctx, other), MOE_STATUS_NOT_FOUND,
              "checkpoint tensors '{}' and '{}' are both missing: {} weights need one of them ({})",
              name, other, f.name, ctx.describe);
    name = other;
  }
  if (per_matrix_scale(f)) {
    m.scale = HostTensor(MOE_DTYPE_F32, {1});
    m.scale.data<float>()[0] = read_scalar_f32(ctx, name);
  } else {
    // One-byte scale codes may also be stored as plain bytes; f32 scales as BF16 or F16 (Qwen3's
    // FP8 checkpoints store weight_scale_inv in BF16), widened to f32 exactly.
    const bool byte_codes = dtype_size(f.scale) == 1;
    const SafetensorsEntry* stored = ctx.checkpoint.find(name);
    if (f.scale == MOE_DTYPE_F32 && stored != nullptr && is_half_or_f32(stored->dtype)) {
      m.scale = to_f32(read_tensor(ctx, name, stored->dtype, {l.scale_rows, l.scale_cols}));
    } else {
      m.scale = read_tensor(
          ctx, name, f.checkpoint_scale_dtype, {l.scale_rows, l.scale_cols},
          byte_codes ? (f.checkpoint_scale_dtype == MOE_DTYPE_U8 ? f.scale : MOE_DTYPE_U8)
                     : MOE_DTYPE_INVALID);
      m.scale.reinterpret(f.scale);
    }
  }
  if (f.scale_2) {
    m.scale_2 = read_scalar_f32(ctx, base + "." + f.checkpoint_scale_2_name);
    MOE_CHECK(m.scale_2 > 0 && std::isfinite(m.scale_2), MOE_STATUS_INVALID_ARGUMENT,
              "checkpoint tensor '{}.{}' is {}: a global scale must be finite and > 0 (a missing "
              "or misrouted tensor?)",
              base, f.checkpoint_scale_2_name, m.scale_2);
  }
  if (f.scale == MOE_DTYPE_UE8M0 || f.scale == MOE_DTYPE_E4M3)  // block scale codes
    sdk::check_scale_values(m.scale.raw(), f.scale, m.scale.numel(),
                            fmt::format("checkpoint tensor '{}'", name));
  if (f.scale == MOE_DTYPE_F32) {
    for (int64_t i = 0; i < m.scale.numel(); ++i) {
      const float s = m.scale.data<float>()[i];
      MOE_CHECK(s > 0 && std::isfinite(s), MOE_STATUS_INVALID_ARGUMENT,
                "checkpoint scale of '{}' holds {} at index {}: scales must be finite and > 0 "
                "(a missing or misrouted tensor?)",
                base, s, i);
    }
  }
  return m;
}

Matrix zero_matrix(moe_format format, int64_t rows, int64_t cols) {
  const MatrixLayout l = matrix_layout(format, rows, cols);
  Matrix m{format, rows, cols, HostTensor(l.dtype, {rows, l.stored_cols}), {}, 1.0f};
  m.q.fill_bytes(0);
  if (l.scale_dtype == MOE_DTYPE_INVALID) return m;
  m.scale = l.scale_rows == 0 ? HostTensor(l.scale_dtype, {1})
                              : HostTensor(l.scale_dtype, {l.scale_rows, l.scale_cols});
  for (int64_t i = 0; i < m.scale.numel(); ++i) {
    if (l.scale_dtype == MOE_DTYPE_F32)
      m.scale.data<float>()[i] = 1.0f;
    else
      m.scale.data<uint8_t>()[i] = l.scale_dtype == MOE_DTYPE_UE8M0 ? 127 : 0x38;  // 1.0
  }
  return m;
}

Matrix slice_rows(const Matrix& m, int64_t begin, int64_t count, const std::string& what) {
  const MatrixLayout l = matrix_layout(m.format, m.rows, m.cols);
  Matrix out{m.format, count, m.cols, {}, m.scale, m.scale_2};
  out.q = sub_matrix(m.q, m.rows, l.stored_cols, begin, count, 0, l.stored_cols);
  const FormatSpec& f = format_spec(m.format);
  if (l.scale_rows > 0) {
    const int64_t block = f.scale_block_rows;
    MOE_CHECK(begin % block == 0 && (count % block == 0 || begin + count == m.rows),
              MOE_STATUS_INVALID_ARGUMENT,
              "{}: rows [{}, {}) cut through a {}x{} {} scale block; the slice must be a multiple "
              "of {} rows",
              what, begin, begin + count, block, f.scale_block_k, f.name, block);
    const int64_t b0 = begin / block, nb = ceil_div(count, block);
    out.scale = sub_matrix(m.scale, l.scale_rows, l.scale_cols, b0, nb, 0, l.scale_cols);
  }
  return out;
}

Matrix slice_cols(const Matrix& m, int64_t begin, int64_t count, const std::string& what) {
  const MatrixLayout l = matrix_layout(m.format, m.rows, m.cols);
  const FormatSpec& f = format_spec(m.format);
  const int64_t block = k_granularity(f);
  MOE_CHECK(begin % block == 0 && (count % block == 0 || begin + count == m.cols),
            MOE_STATUS_INVALID_ARGUMENT,
            "{}: columns [{}, {}) cut through a {}-wide {} scale block; the slice must be a "
            "multiple of {} columns",
            what, begin, begin + count, block, f.name, block);
  const bool packed = f.packed_fp4;
  Matrix out{m.format, m.rows, count, {}, m.scale, m.scale_2};
  out.q = packed ? sub_matrix(m.q, m.rows, l.stored_cols, 0, m.rows, begin / 2, count / 2)
                 : sub_matrix(m.q, m.rows, l.stored_cols, 0, m.rows, begin, count);
  if (l.scale_rows > 0) {
    const int64_t c0 = begin / block, nc = ceil_div(count, block);
    out.scale = sub_matrix(m.scale, l.scale_rows, l.scale_cols, 0, l.scale_rows, c0, nc);
  }
  return out;
}

Matrix stack_rows(const Matrix& top, Matrix bottom, const std::string& what) {
  MOE_CHECK(top.format == bottom.format && top.cols == bottom.cols, MOE_STATUS_INTERNAL,
            "{}: halves of different formats or widths", what);
  Matrix out{top.format, top.rows + bottom.rows, top.cols, concat_rows(top.q, bottom.q), {},
             top.scale_2};
  const FormatSpec& f = format_spec(top.format);
  if (f.scale == MOE_DTYPE_INVALID) return out;
  if (per_matrix_scale(f)) {
    // One scale for both halves: requantise the half with the smaller one to the larger.
    Matrix t = top;
    const float st = t.scale.data<float>()[0], sb = bottom.scale.data<float>()[0];
    if (st < sb) requantize_to(t, sb, what);
    if (sb < st) requantize_to(bottom, st, what);
    out.q = concat_rows(t.q, bottom.q);
    out.scale = t.scale;
    return out;
  }
  MOE_CHECK(top.rows % f.scale_block_rows == 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: gate has {} rows, not a multiple of {}, so its {} scales cannot be stacked with "
            "up's",
            what, top.rows, f.scale_block_rows, f.name);
  if (f.scale_2 && top.scale_2 != bottom.scale_2) {
    // One scale_2 for both halves: fold up's into its block scales (exactly, or refuse).
    MOE_CHECK(f.scale == MOE_DTYPE_E4M3, MOE_STATUS_UNSUPPORTED,
              "{}: {} gate and up have different scale_2 and its block scales are not e4m3", what,
              f.name);
    fold_nvfp4_up_scales(bottom.scale.data<uint8_t>(), bottom.scale.numel(), top.scale_2,
                         bottom.scale_2, what);
  }
  out.scale = concat_rows(top.scale, bottom.scale);
  return out;
}

std::pair<Matrix, Matrix> deinterleave_rows(const Matrix& m, const std::string& what) {
  MOE_CHECK(m.rows % 2 == 0, MOE_STATUS_SHAPE_MISMATCH,
            "{}: {} interleaved gate/up rows is not an even count", what, m.rows);
  const FormatSpec& f = format_spec(m.format);
  MOE_CHECK(f.scale_block_rows <= 1, MOE_STATUS_UNSUPPORTED,
            "{}: interleaved gate/up rows share {}-row {} scale blocks and cannot be separated "
            "exactly",
            what, f.scale_block_rows, f.name);
  const MatrixLayout l = matrix_layout(m.format, m.rows, m.cols);
  auto half = [&](int64_t parity) {
    Matrix h{m.format, m.rows / 2, m.cols, {}, m.scale, m.scale_2};
    const size_t qb = q_row_bytes(m);
    h.q = HostTensor(m.q.dtype(), {h.rows, l.stored_cols});
    for (int64_t r = 0; r < h.rows; ++r)
      copy_block(m.q, qb, 2 * r + parity, 1, 0, qb, static_cast<uint8_t*>(h.q.raw()) + r * qb);
    if (l.scale_rows > 0) {
      const size_t sb = size_t(l.scale_cols) * dtype_size(l.scale_dtype);
      h.scale = HostTensor(m.scale.dtype(), {h.rows, l.scale_cols});
      for (int64_t r = 0; r < h.rows; ++r)
        copy_block(m.scale, sb, 2 * r + parity, 1, 0, sb,
                   static_cast<uint8_t*>(h.scale.raw()) + r * sb);
    }
    return h;
  };
  return {half(0), half(1)};
}

Matrix interleave_rows(const Matrix& a, const Matrix& b, const std::string& what) {
  MOE_CHECK(a.format == b.format && a.rows == b.rows && a.cols == b.cols, MOE_STATUS_INTERNAL,
            "{}: halves differ", what);
  const FormatSpec& f = format_spec(a.format);
  MOE_CHECK(f.scale_block_rows <= 1, MOE_STATUS_UNSUPPORTED,
            "{}: {} scales cannot follow interleaved rows", what, f.name);
  const MatrixLayout l = matrix_layout(a.format, a.rows, a.cols);
  Matrix out{a.format, 2 * a.rows, a.cols, HostTensor(a.q.dtype(), {2 * a.rows, l.stored_cols}),
             a.scale,  a.scale_2};
  const size_t qb = q_row_bytes(a);
  for (int64_t r = 0; r < a.rows; ++r) {
    copy_block(a.q, qb, r, 1, 0, qb, static_cast<uint8_t*>(out.q.raw()) + 2 * r * qb);
    copy_block(b.q, qb, r, 1, 0, qb, static_cast<uint8_t*>(out.q.raw()) + (2 * r + 1) * qb);
  }
  if (l.scale_rows > 0) {
    const size_t sb = size_t(l.scale_cols) * dtype_size(l.scale_dtype);
    out.scale = HostTensor(a.scale.dtype(), {2 * a.rows, l.scale_cols});
    for (int64_t r = 0; r < a.rows; ++r) {
      copy_block(a.scale, sb, r, 1, 0, sb, static_cast<uint8_t*>(out.scale.raw()) + 2 * r * sb);
      copy_block(b.scale, sb, r, 1, 0, sb,
                 static_cast<uint8_t*>(out.scale.raw()) + (2 * r + 1) * sb);
    }
  }
  return out;
}

Matrix matrix_at(moe_format format, int64_t rows, int64_t cols, const HostTensor& q,
                 const HostTensor& scale, const HostTensor& scale_2, int64_t index) {
  const MatrixLayout l = matrix_layout(format, rows, cols);
  const size_t at = index >= 0 ? size_t(index) : 0;
  Matrix m{format, rows, cols, HostTensor(l.dtype, {rows, l.stored_cols}), {}, 1.0f};
  std::memcpy(m.q.raw(), static_cast<const uint8_t*>(q.raw()) + at * m.q.bytes(), m.q.bytes());
  if (l.scale_dtype != MOE_DTYPE_INVALID) {
    m.scale = l.scale_rows == 0 ? HostTensor(l.scale_dtype, {1})
                                : HostTensor(l.scale_dtype, {l.scale_rows, l.scale_cols});
    std::memcpy(m.scale.raw(), static_cast<const uint8_t*>(scale.raw()) + at * m.scale.bytes(),
                m.scale.bytes());
  }
  if (l.has_scale_2) m.scale_2 = scale_2.data<float>()[at];
  return m;
}

void store(const Matrix& m, int64_t index, int64_t count, HostTensor& q, HostTensor& scale,
           HostTensor& scale_2) {
  const MatrixLayout l = matrix_layout(m.format, m.rows, m.cols);
  auto dims = [&](std::vector<int64_t> d) {
    if (index >= 0) d.insert(d.begin(), count);
    return d;
  };
  if (q.empty()) {
    q = HostTensor(l.dtype, dims({m.rows, l.stored_cols}));
    if (l.scale_dtype != MOE_DTYPE_INVALID)
      scale = l.scale_rows == 0 ? HostTensor(l.scale_dtype, {index >= 0 ? count : 1})
                                : HostTensor(l.scale_dtype, dims({l.scale_rows, l.scale_cols}));
    if (l.has_scale_2) scale_2 = HostTensor(MOE_DTYPE_F32, {index >= 0 ? count : 1});
  }
  const size_t slot = index >= 0 ? size_t(index) : 0;
  std::memcpy(static_cast<uint8_t*>(q.raw()) + slot * m.q.bytes(), m.q.raw(), m.q.bytes());
  if (!scale.empty())
    std::memcpy(static_cast<uint8_t*>(scale.raw()) + slot * m.scale.bytes(), m.scale.raw(),
                m.scale.bytes());
  if (!scale_2.empty()) scale_2.data<float>()[slot] = m.scale_2;
}

}  // namespace moe::detail
