#include <fmt/format.h>

#include <string>

#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {

MatrixLayout matrix_layout(moe_format format, int64_t rows, int64_t cols) {
  const FormatSpec& f = format_spec(format);
  MatrixLayout m{f.element, rows, f.packed_fp4 ? cols / 2 : cols, f.scale, 0, 0, f.scale_2};
  if (f.scale != MOE_DTYPE_INVALID && !per_matrix_scale(f)) {
    m.scale_rows = ceil_div(rows, f.scale_block_rows);
    m.scale_cols = ceil_div(cols, f.scale_block_k);
  }
  return m;
}

int64_t scale_count(const MatrixLayout& m) {
  if (m.scale_dtype == MOE_DTYPE_INVALID) return 0;
  return m.scale_rows == 0 ? 1 : m.scale_rows * m.scale_cols;
}

namespace {

using sdk::check_tensor;
using sdk::kAnyDim;

void check_absent(const moe_tensor& t, const char* name, const std::string& why) {
  MOE_CHECK(t.data == nullptr, MOE_STATUS_INVALID_ARGUMENT, "{}: given, but {}", name, why);
}

// A stack of `experts` matrices (experts = 0: a single matrix without the leading dimension).
void check_matrix(const moe_tensor& q, const moe_tensor& scale, const moe_tensor& scale_2,
                  const std::string& name, moe_format format, int64_t experts, int64_t rows,
                  int64_t cols) {
  const MatrixLayout m = matrix_layout(format, rows, cols);
  const std::string sname = name + "_scale", s2name = name + "_scale_2";
  const char* fname = format_name(format);
  if (experts > 0) {
    check_tensor(q, name.c_str(), m.dtype, {experts, m.rows, m.stored_cols});
  } else {
    check_tensor(q, name.c_str(), m.dtype, {m.rows, m.stored_cols});
  }
  if (m.scale_dtype == MOE_DTYPE_INVALID) {
    check_absent(scale, sname.c_str(), fmt::format("format {} has no scales", fname));
  } else if (m.scale_rows == 0) {
    if (experts > 0)
      check_tensor(scale, sname.c_str(), m.scale_dtype, {experts});
    else
      check_tensor(scale, sname.c_str(), m.scale_dtype, {1});
  } else if (experts > 0) {
    check_tensor(scale, sname.c_str(), m.scale_dtype, {experts, m.scale_rows, m.scale_cols});
  } else {
    check_tensor(scale, sname.c_str(), m.scale_dtype, {m.scale_rows, m.scale_cols});
  }
  if (m.has_scale_2) {
    check_tensor(scale_2, s2name.c_str(), MOE_DTYPE_F32, {experts > 0 ? experts : 1});
  } else {
    check_absent(scale_2, s2name.c_str(), fmt::format("format {} has no scale_2", fname));
  }
}

void check_bias(const moe_tensor& t, const char* name, int64_t experts, int64_t cols) {
  MOE_CHECK(t.data != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "{}: missing, but the problem has expert_bias: 1", name);
  const moe_dtype dt = t.dtype == MOE_DTYPE_F32 ? MOE_DTYPE_F32 : MOE_DTYPE_BF16;
  check_tensor(t, name, dt, {experts, cols});
}

}  // namespace

void check_weights(const moe_problem& p, const moe_weights& w) {
  sdk::check_struct(&w, MOE_WEIGHTS_MIN_SIZE, "moe_weights");
  const auto format = static_cast<moe_format>(p.format);
  const int64_t el = p.local_experts, r13 = w13_rows(p);
  check_matrix(w.w13, w.w13_scale, w.w13_scale_2, "w13", format, el, r13, p.hidden);
  check_matrix(w.w2, w.w2_scale, w.w2_scale_2, "w2", format, el, p.hidden, p.intermediate);

  if (p.expert_bias) {
    check_bias(w.b13, "b13", el, r13);
    check_bias(w.b2, "b2", el, p.hidden);
  } else {
    check_absent(w.b13, "b13", "the problem has expert_bias: 0");
    check_absent(w.b2, "b2", "the problem has expert_bias: 0");
  }

  if (p.input_format == MOE_INPUT_FP8_TENSOR_STATIC) {
    check_tensor(w.a13_scale, "a13_scale", MOE_DTYPE_F32, {1});
    check_tensor(w.a2_scale, "a2_scale", MOE_DTYPE_F32, {1});
  } else {
    check_absent(w.a13_scale, "a13_scale", "input_format is not fp8_tensor_static");
    check_absent(w.a2_scale, "a2_scale", "input_format is not fp8_tensor_static");
  }

  if (p.shared_intermediate > 0) {
    const int64_t is = p.shared_intermediate;
    const int64_t rs = is_gated(static_cast<moe_activation>(p.activation)) ? 2 * is : is;
    check_matrix(w.shared_w13, w.shared_w13_scale, w.shared_w13_scale_2, "shared_w13", format, 0,
                 rs, p.hidden);
    check_matrix(w.shared_w2, w.shared_w2_scale, w.shared_w2_scale_2, "shared_w2", format, 0,
                 p.hidden, is);
  } else {
    for (const moe_tensor* t : {&w.shared_w13, &w.shared_w13_scale, &w.shared_w13_scale_2,
                                &w.shared_w2, &w.shared_w2_scale, &w.shared_w2_scale_2})
      check_absent(*t, "shared expert weights", "the problem has shared_intermediate: 0");
  }

  if (p.sink_experts > 0) {
    const int64_t s = p.sink_experts, is = p.sink_intermediate;
    check_tensor(w.sink_w13, "sink_w13", MOE_DTYPE_BF16, {s, 2 * is, p.hidden});
    check_tensor(w.sink_w2, "sink_w2", MOE_DTYPE_BF16, {s, p.hidden, is});
  } else {
    check_absent(w.sink_w13, "sink_w13", "the problem has sink_experts: 0");
    check_absent(w.sink_w2, "sink_w2", "the problem has sink_experts: 0");
  }
}

}  // namespace moe
