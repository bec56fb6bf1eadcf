#include "moe/sdk/struct_io.hpp"

#include "moe/sdk/extensions.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::sdk {

void check_struct_size(const void* ptr, size_t struct_size, size_t min_size, const char* name) {
  if (ptr == nullptr) MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{} is NULL", name);
  if (struct_size < min_size) {
    MOE_FAIL(MOE_STATUS_ABI_MISMATCH,
             "{}.struct_size={} is smaller than the minimum {} of ABI {}.x: the caller was built "
             "against an incompatible moe_abi.h or forgot to set struct_size",
             name, struct_size, min_size, MOE_ABI_VERSION_MAJOR);
  }
}

bool run_accumulates(const moe_run_args& args) {
  if (!MOE_STRUCT_HAS(&args, moe_run_args, accumulate)) return false;
  MOE_CHECK(args.accumulate == 0 || args.accumulate == 1, MOE_STATUS_INVALID_ARGUMENT,
            "moe_run_args.accumulate={} must be 0 (write the output) or 1 (add into it)",
            args.accumulate);
  return args.accumulate == 1;
}

std::vector<moe_run_args> read_bench_runs(const moe_bench_args& args) {
  MOE_CHECK(args.runs != nullptr && args.num_runs >= 1, MOE_STATUS_INVALID_ARGUMENT,
            "moe_bench_args needs runs (num_runs={})", args.num_runs);
  const size_t stride = args.runs[0].struct_size;
  check_struct_size(args.runs, stride, MOE_RUN_ARGS_MIN_SIZE, "moe_bench_args.runs[0]");
  MOE_CHECK(stride % alignof(moe_run_args) == 0, MOE_STATUS_INVALID_ARGUMENT,
            "moe_bench_args.runs[0].struct_size={} is no multiple of {}: the runs lie that many "
            "bytes apart",
            stride, alignof(moe_run_args));
  std::vector<moe_run_args> runs(size_t(args.num_runs));
  const auto* base = reinterpret_cast<const unsigned char*>(args.runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto* run = reinterpret_cast<const moe_run_args*>(base + i * stride);
    MOE_CHECK(run->struct_size == stride, MOE_STATUS_INVALID_ARGUMENT,
              "moe_bench_args.runs[{}].struct_size={} differs from runs[0]'s {}: the runs lie "
              "runs[0].struct_size bytes apart",
              i, run->struct_size, stride);
    runs[i] = read_struct(run, moe_run_args{});
  }
  return runs;
}

bool run_routes(const moe_run_args& args) {
  return MOE_STRUCT_HAS(&args, moe_run_args, is_padding) && args.router_logits.data != nullptr;
}

void check_routing_fields_of_run(const moe_run_args& args) {
  if (!MOE_STRUCT_HAS(&args, moe_run_args, is_padding) || args.router_logits.data != nullptr)
    return;
  MOE_CHECK(args.routing_bias.data == nullptr && args.is_padding.data == nullptr,
            MOE_STATUS_INVALID_ARGUMENT,
            "moe_run_args.{} is set but router_logits is NULL: routing_bias and is_padding are "
            "read only when run() routes (router_logits given); a run from topk_ids would ignore "
            "them, so pass them to route() instead",
            args.routing_bias.data != nullptr ? "routing_bias" : "is_padding");
}

moe_route_args route_args_of_run(const moe_run_args& args, const moe_problem& problem) {
  moe_route_args r{};
  r.struct_size = sizeof(r);
  r.problem = &problem;
  r.logits = args.router_logits;
  r.bias = args.routing_bias;
  r.is_padding = args.is_padding;
  r.topk_ids = args.topk_ids;
  r.topk_weights = args.topk_weights;
  r.workspace = args.workspace;
  r.workspace_size = args.workspace_size;
  r.stream = args.stream;
  return r;
}

moe_problem read_problem(const moe_problem* problem) {
  check_struct(problem, MOE_PROBLEM_MIN_SIZE, "moe_problem");
  check_extension_chain(problem->ext, "moe_problem.ext");
  moe_problem p = read_struct(problem, default_problem());
  normalize_problem(p);
  validate_problem(p);
  return p;
}

void answer_support(moe_support* out, moe_reason reason, std::string_view message, int32_t routes) {
  check_struct(out, MOE_SUPPORT_MIN_SIZE, "moe_support");
  out->supported = reason == MOE_REASON_NONE ? 1 : 0;
  out->reason = reason;
  size_t n = std::min(message.size(), size_t(MOE_SUPPORT_MESSAGE_CAP - 1));
  // Cut before a UTF-8 character, never inside one (the host reads the message as text).
  while (n < message.size() && n > 0 && (uint8_t(message[n]) & 0xC0) == 0x80) --n;
  std::memcpy(out->message, message.data(), n);
  out->message[n] = '\0';
  if (routes >= 0 && MOE_STRUCT_HAS(out, moe_support, routes)) out->routes = routes;
}

}  // namespace moe::sdk
