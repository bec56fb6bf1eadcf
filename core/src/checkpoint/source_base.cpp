#include "source_base.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::detail {
namespace {

std::string substitute(std::string pattern, const std::string& key, const std::string& value) {
  for (size_t at = pattern.find(key); at != std::string::npos; at = pattern.find(key, at))
    pattern.replace(at, key.size(), value);
  return pattern;
}

}  // namespace

std::vector<float> to_floats(const HostTensor& t) {
  const HostTensor f = to_f32(t);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

SourceBase::SourceBase(const Checkpoint& ck, const CheckpointSpec& spec, const moe_problem& p)
    : ctx_{ck,
           fmt::format("convention {}, prefix '{}', layer {}", spec.convention, spec.prefix,
                       spec.layer),
           &converted_},
      spec_(spec),
      p_(p),
      format_(static_cast<moe_format>(p.format)),
      gated_(is_gated(static_cast<moe_activation>(p.activation))),
      full_i_(p.intermediate * spec.tp_size),
      prefix_(substitute(spec.prefix, "{layer}", std::to_string(spec.layer))) {}

std::string SourceBase::first_tensor_named(const char* start) const {
  if (start == nullptr) return "";
  const std::vector<std::string> names = ctx_.checkpoint.names(name(start));
  return names.empty() ? "" : names.front();
}

std::optional<Expert> SourceBase::shared(int64_t full) const {
  if (full > 0) return shared_expert(full);
  const std::string stored = first_tensor_named(shared_names());
  MOE_CHECK(stored.empty(), MOE_STATUS_CONFIG_ERROR,
            "the checkpoint stores a shared expert ('{}'), but the problem has "
            "shared_intermediate: 0: set it to the shared expert's intermediate size (the layer "
            "would leave it out of every token) ({})",
            stored, ctx_.describe);
  return std::nullopt;
}

void SourceBase::check_no_sinks() const {
  const std::string stored = first_tensor_named(sink_names());
  MOE_CHECK(stored.empty(), MOE_STATUS_CONFIG_ERROR,
            "the checkpoint stores sink experts ('{}'), but the problem has sink_experts: 0: set "
            "sink_experts and sink_intermediate (the layer would leave them out of every token) "
            "({})",
            stored, ctx_.describe);
}

Expert SourceBase::shared_expert(int64_t) const {
  MOE_FAIL(MOE_STATUS_UNSUPPORTED, "convention {} has no shared experts", spec_.convention);
}

void SourceBase::router(LayerCheckpoint& out, int64_t real_experts) const {
  const RouterNames names = router_names();
  const std::string weight = name(names.weight);
  const int64_t rows = real_experts + p_.sink_experts;
  const bool has_weight = has_tensor(ctx_, weight);
  MOE_CHECK(has_weight || !names.weight_required, MOE_STATUS_NOT_FOUND,
            "checkpoint tensor '{}' is missing ({})", weight, ctx_.describe);
  if (has_weight) {
    // bf16 or f32 as stored; f16 (an fp16 checkpoint's) becomes f32, exactly.
    const auto* e = ctx_.checkpoint.find(weight);
    out.router_weight = read_tensor(
        ctx_, weight,
        e->dtype == MOE_DTYPE_BF16 || e->dtype == MOE_DTYPE_F16 ? e->dtype : MOE_DTYPE_F32,
        {rows, p_.hidden});
    if (e->dtype == MOE_DTYPE_F16) out.router_weight = to_f32(out.router_weight);
  }
  if (names.bias && has_tensor(ctx_, name(names.bias)))
    out.router_bias = f32_vector(name(names.bias), rows);
  const std::string sel = name(names.selection_bias);
  const bool has_sel = has_tensor(ctx_, sel);
  MOE_CHECK(!has_sel || p_.routing_bias, MOE_STATUS_INVALID_ARGUMENT,
            "checkpoint has a selection bias '{}': set routing_bias: true", sel);
  MOE_CHECK(has_sel || !p_.routing_bias, MOE_STATUS_NOT_FOUND,
            "problem has routing_bias: true, but checkpoint tensor '{}' is missing ({})", sel,
            ctx_.describe);
  if (has_sel) {
    const HostTensor b = f32_vector(sel, real_experts);
    for (int64_t i = 0; i < real_experts; ++i)  // a NaN or inf one would steer every token
      MOE_CHECK(std::isfinite(b.data<float>()[i]), MOE_STATUS_INVALID_ARGUMENT,
                "checkpoint tensor '{}' holds {} at index {}: a selection bias must be finite", sel,
                b.data<float>()[i], i);
    out.routing_bias = HostTensor(MOE_DTYPE_F32, {p_.experts});
    for (int64_t i = 0; i < p_.experts; ++i)
      out.routing_bias.data<float>()[i] =
          i < real_experts ? b.data<float>()[i] : -std::numeric_limits<float>::infinity();
  }
}

void SourceBase::sinks(LayerWeights&) const {
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "sink experts are read from the stacked and inkling conventions only ({})",
           ctx_.describe);
}

HostTensor SourceBase::bf16_weights(const std::string& q, std::vector<int64_t> shape) const {
  const moe_dtype stored = dtype_of(q);
  if (!converted_at_load(stored, MOE_FORMAT_BF16))
    return read_tensor(ctx_, name(q), MOE_DTYPE_BF16, std::move(shape));
  record_conversion(ctx_, name(q), "bf16");
  const HostTensor f = to_f32(read_tensor(ctx_, name(q), stored, shape));
  HostTensor out(MOE_DTYPE_BF16, std::move(shape));
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data<uint16_t>()[i] = float_to_bf16(f.data<float>()[i]);
  return out;
}

void SourceBase::deinterleave_sinks(HostTensor& stack, int64_t count, int64_t half_rows,
                                    int64_t cols, const std::string& q) const {
  for (int64_t e = 0; e < count; ++e) {
    const Matrix fused{
        MOE_FORMAT_BF16, 2 * half_rows, cols, slot(stack, e, {2 * half_rows, cols}), {}, 1.0f};
    const auto halves_pair = deinterleave_rows(fused, name(q));
    const Matrix halves = stack_rows(halves_pair.first, halves_pair.second, name(q));
    std::memcpy(static_cast<uint8_t*>(stack.raw()) + e * halves.q.bytes(), halves.q.raw(),
                halves.q.bytes());
  }
}

int64_t SourceBase::leading_dim(const std::string& suffix) const {
  const auto* e = ctx_.checkpoint.find(name(suffix));
  MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})",
            name(suffix), ctx_.describe);
  MOE_CHECK(!e->shape.empty(), MOE_STATUS_SHAPE_MISMATCH, "'{}' has no expert dimension",
            name(suffix));
  return e->shape[0];
}

const std::vector<int64_t>& SourceBase::shape_of(const std::string& suffix, size_t dims) const {
  const auto* e = ctx_.checkpoint.find(name(suffix));
  MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})",
            name(suffix), ctx_.describe);
  MOE_CHECK(e->shape.size() == dims, MOE_STATUS_SHAPE_MISMATCH,
            "checkpoint tensor '{}' has {} dimensions, expected {} ({})", name(suffix),
            e->shape.size(), dims, ctx_.describe);
  return e->shape;
}

HostTensor SourceBase::f32_vector(const std::string& n, int64_t count) const {
  return to_f32(cached_values(n, {count}));
}

const HostTensor& SourceBase::cached_values(const std::string& n,
                                            std::vector<int64_t> shape) const {
  const auto* e = ctx_.checkpoint.find(n);
  const bool half = e && (e->dtype == MOE_DTYPE_BF16 || e->dtype == MOE_DTYPE_F16);
  return cached(n, half ? e->dtype : MOE_DTYPE_F32, std::move(shape));
}

const HostTensor& SourceBase::cached(const std::string& n, moe_dtype dtype,
                                     std::vector<int64_t> shape, moe_dtype alt) const {
  auto it = cache_.find(n);
  if (it == cache_.end()) it = cache_.emplace(n, read_tensor(ctx_, n, dtype, shape, alt)).first;
  return it->second;
}

const HostTensor& SourceBase::scale_stack(const std::string& n, moe_dtype raw, moe_dtype alt,
                                          int64_t experts, const MatrixLayout& l) const {
  const auto* entry = ctx_.checkpoint.find(n);
  if (experts > 0 && entry && entry->shape.size() == 2) {
    const int64_t flat = entry->shape[0];
    MOE_CHECK(flat % experts == 0, MOE_STATUS_SHAPE_MISMATCH,
              "checkpoint tensor '{}' stores scales flat as [{}, {}]: {} rows are not divisible "
              "by the {} experts",
              n, flat, entry->shape[1], flat, experts);
    MOE_CHECK(flat / experts == l.scale_rows, MOE_STATUS_SHAPE_MISMATCH,
              "checkpoint tensor '{}' [{}, {}] holds {} rows per expert, expected {}", n, flat,
              entry->shape[1], flat / experts, l.scale_rows);
    return cached(n, raw, {flat, l.scale_cols}, alt);
  }
  std::vector<int64_t> d = {l.scale_rows, l.scale_cols};
  if (experts > 0) d.insert(d.begin(), experts);
  return cached(n, raw, d, alt);
}

HostTensor SourceBase::slot(const HostTensor& stack, int64_t e, std::vector<int64_t> shape) {
  HostTensor out(stack.dtype(), shape);
  std::memcpy(out.raw(), static_cast<const uint8_t*>(stack.raw()) + e * out.bytes(), out.bytes());
  return out;
}

}  // namespace moe::detail
