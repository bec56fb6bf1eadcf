#include "run_inputs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>
#include "moe/safetensors.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::tool {
namespace {

// hidden_states as stored (bf16 or f32): the experts take them rounded to bf16, the router GEMM
// in its own precision (router_logits), so an fp32 router sees the f32 values themselves.
HostTensor read_hidden(const SafetensorsFile& f, const moe_problem& p) {
  const SafetensorsEntry* e = f.find("hidden_states");
  MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "{}: no tensor 'hidden_states' [T, {}]", f.path(),
            p.hidden);
  MOE_CHECK(e->shape.size() == 2 && e->shape[1] == p.hidden, MOE_STATUS_SHAPE_MISMATCH,
            "{}: hidden_states has shape [{}], expected [T, {}]", f.path(),
            fmt::join(e->shape, ", "), p.hidden);
  MOE_CHECK(e->dtype == MOE_DTYPE_BF16 || e->dtype == MOE_DTYPE_F32, MOE_STATUS_DTYPE_MISMATCH,
            "{}: hidden_states is {}, expected BF16 (or F32, rounded to bf16)", f.path(),
            e->st_dtype);
  HostTensor h(e->dtype, e->shape);
  std::memcpy(h.raw(), f.data(*e), h.bytes());
  return h;
}

HostTensor to_bf16(const HostTensor& hidden) {
  if (hidden.dtype() == MOE_DTYPE_BF16) return hidden;
  HostTensor h(MOE_DTYPE_BF16, hidden.shape());
  for (int64_t i = 0; i < h.numel(); ++i)
    h.data<uint16_t>()[i] = float_to_bf16(hidden.data<float>()[i]);
  return h;
}

HostTensor read_logits(const SafetensorsFile& f, const moe_problem& p, int64_t tokens) {
  const SafetensorsEntry* e = f.find("router_logits");
  const int64_t g = p.experts + p.sink_experts;
  MOE_CHECK(e->dtype == MOE_DTYPE_F32 && e->shape == std::vector<int64_t>({tokens, g}),
            MOE_STATUS_SHAPE_MISMATCH, "{}: router_logits is {} [{}], expected F32 [{}, {}]",
            f.path(), e->st_dtype, fmt::join(e->shape, ", "), tokens, g);
  HostTensor t(MOE_DTYPE_F32, {tokens, g});
  std::memcpy(t.raw(), f.data(*e), t.bytes());
  return t;
}

float value_at(const HostTensor& t, int64_t i) {
  return t.dtype() == MOE_DTYPE_F32 ? t.data<float>()[i] : bf16_to_float(t.data<uint16_t>()[i]);
}

// Every hidden state finite, as the experts get it (F32 values rounded to bf16: 3.4e38 becomes
// inf): a NaN or inf one would come back as a "mismatch" against the reference (whose output is
// as non-finite), where it is the input that is wrong.
void check_hidden_finite(const HostTensor& h, const std::string& path) {
  const int64_t cols = h.shape()[1];
  for (int64_t i = 0; i < h.numel(); ++i) {
    const float v = value_at(h, i);
    MOE_CHECK(std::isfinite(v), MOE_STATUS_INVALID_ARGUMENT,
              "{}: hidden_states[{}, {}] is {}: the layer's inputs must be finite", path, i / cols,
              i % cols, v);
    MOE_CHECK(std::isfinite(bf16_to_float(float_to_bf16(v))), MOE_STATUS_INVALID_ARGUMENT,
              "{}: hidden_states[{}, {}] is {}, which rounds to inf in bf16 (the experts' input): "
              "the layer's inputs must be finite in bf16",
              path, i / cols, i % cols, v);
  }
}

// Router logits: no NaN or +inf (they would make the scores NaN), and each token at least one
// expert that is not -inf (-inf masks an expert; a token masking all of them has no route).
void check_logits(const HostTensor& logits, const std::string& what) {
  const int64_t tokens = logits.shape()[0], cols = logits.shape()[1];
  for (int64_t t = 0; t < tokens; ++t) {
    bool any = false;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = logits.data<float>()[t * cols + c];
      MOE_CHECK(!std::isnan(v) && v != INFINITY, MOE_STATUS_INVALID_ARGUMENT,
                "{}: router_logits[{}, {}] is {}: logits must be finite or -inf (a masked expert)",
                what, t, c, v);
      any |= std::isfinite(v);
    }
    MOE_CHECK(any, MOE_STATUS_INVALID_ARGUMENT,
              "{}: every router logit of token {} is -inf: the token has no expert to go to", what,
              t);
  }
}

}  // namespace

InputsFile read_run_inputs_file(const Config& cfg, const std::string& inputs_path, bool one_batch) {
  const moe_problem p = cfg.problem.c();
  const SafetensorsFile f = SafetensorsFile::open(inputs_path);
  InputsFile in{inputs_path, read_hidden(f, p), HostTensor()};
  const int64_t t = in.hidden.shape()[0];
  MOE_CHECK(!one_batch || t <= p.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
            "{}: {} tokens, above max_tokens={} of {} (raise it there, or give fewer tokens)",
            inputs_path, t, p.max_tokens, cfg.source);
  check_hidden_finite(in.hidden, inputs_path);
  if (f.find("router_logits")) {
    in.logits = read_logits(f, p, t);
    check_logits(in.logits, inputs_path);
  }
  return in;
}

Batch make_run_batch(const Config& cfg, const LayerCheckpoint* checkpoint, int64_t tokens,
                     uint64_t seed, const InputsFile* file, std::string* from) {
  const moe_problem p = cfg.problem.c();
  Batch batch;
  if (file == nullptr) {
    batch = random_batch(p, tokens, seed, Scenario::kRandom);
    *from = fmt::format("random, {} tokens", tokens);
  } else {
    batch.hidden = to_bf16(file->hidden);
    batch.logits = file->logits;
    *from = fmt::format("{}, {} tokens", file->path, file->hidden.shape()[0]);
  }
  const std::string path = file != nullptr ? file->path : std::string();
  // A checkpoint's router makes the logits unless the file gives them (random batches too).
  const bool given_logits = file != nullptr && !file->logits.empty();
  if (checkpoint != nullptr && !given_logits) {
    MOE_CHECK(!checkpoint->router_weight.empty() || file == nullptr, MOE_STATUS_NOT_FOUND,
              "{} has no router_logits and the checkpoint has no router weight", path);
    if (!checkpoint->router_weight.empty()) {
      // The router GEMM on the hidden states as stored (f32 ones in its own precision).
      const RouterDtype dtype = cfg.checkpoint->router_dtype;
      batch.logits =
          router_logits(*checkpoint, p, file != nullptr ? file->hidden : batch.hidden, dtype);
      check_logits(batch.logits, "the checkpoint's router (its weight times the hidden states)");
      *from +=
          fmt::format("; logits from the checkpoint's router ({} GEMM)", router_dtype_name(dtype));
    }
  }
  MOE_CHECK(!batch.logits.empty(), MOE_STATUS_NOT_FOUND,
            "{}: give router_logits [T, {}] or a checkpoint with a router weight", path,
            p.experts + p.sink_experts);
  if (checkpoint != nullptr && p.routing_bias) batch.bias = checkpoint->routing_bias;
  return batch;
}

RunInputs make_run_inputs(const Config& cfg, int64_t tokens, uint64_t seed,
                          const std::string& inputs_path) {
  const moe_problem p = cfg.problem.c();
  // The file first: a wrong one fails before any weight is loaded or drawn.
  std::optional<InputsFile> file;
  if (!inputs_path.empty()) file = read_run_inputs_file(cfg, inputs_path, /*one_batch=*/true);
  RunInputs in;
  LayerCheckpoint layer;
  if (cfg.checkpoint) {
    layer = load_layer(Checkpoint::open(cfg.checkpoint->path), *cfg.checkpoint, p);
    in.weights = std::move(layer.weights);
    in.weights_from =
        fmt::format("checkpoint {} ({})", cfg.checkpoint->path, cfg.checkpoint->convention);
    if (!layer.conversions.empty())
      in.weights_from += "; converted at load: " + describe_conversions(layer.conversions);
  } else {
    in.weights = random_weights(p, seed);
    in.weights_from = fmt::format("random (seed {})", seed);
  }
  in.batch = make_run_batch(cfg, cfg.checkpoint ? &layer : nullptr, tokens, seed,
                            file ? &*file : nullptr, &in.batch_from);
  return in;
}

}  // namespace moe::tool
