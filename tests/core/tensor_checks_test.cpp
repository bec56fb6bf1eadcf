// The SDK's run-argument checks with a workspace size function: the tensors and the token count
// are checked before the function is asked for a size (a size function may refuse, or overflow,
// for a batch past max_tokens, and would then name the wrong problem).
#include "moe/sdk/tensor_checks.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::sdk {
namespace {

struct RunArgs {
  moe_problem problem = default_problem();
  std::vector<char> buf = std::vector<char>(1 << 20);
  moe_run_args args{};

  explicit RunArgs(int64_t tokens) {
    problem.experts = 8;
    problem.top_k = 2;
    problem.hidden = 128;
    problem.intermediate = 64;
    problem.max_tokens = 16;
    normalize_problem(problem);
    args.struct_size = sizeof(args);
    args.hidden = make_view(buf.data(), MOE_DTYPE_BF16, {tokens, 128});
    args.topk_ids = make_view(buf.data() + 65536, MOE_DTYPE_I32, {tokens, 2});
    args.topk_weights = make_view(buf.data() + 131072, MOE_DTYPE_F32, {tokens, 2});
    args.output = make_view(buf.data() + 196608, MOE_DTYPE_BF16, {tokens, 128});
    args.workspace = buf.data() + 524288;
    args.workspace_size = 64;
  }
};

void expect_error(const std::function<void()>& fn, moe_status status, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_THAT(e.what(), ::testing::HasSubstr(part));
  }
}

TEST(SdkRunChecks, AskTheWorkspaceSizeOnlyForACheckedBatch) {
  std::vector<int64_t> asked;
  const auto size_for = [&](int64_t tokens) {
    asked.push_back(tokens);
    return size_t(8 * tokens);
  };
  RunArgs ok(4);
  EXPECT_EQ(check_run_tensors(ok.problem, ok.args, size_for), 4);
  EXPECT_EQ(asked, std::vector<int64_t>{4});

  RunArgs over(17);  // past max_tokens = 16: refused naming both, the size never asked
  expect_error([&] { check_run_tensors(over.problem, over.args, size_for); },
               MOE_STATUS_CAPACITY_EXCEEDED, "17 tokens exceed max_tokens=16");
  RunArgs negative(-1);
  expect_error([&] { check_run_tensors(negative.problem, negative.args, size_for); },
               MOE_STATUS_SHAPE_MISMATCH, "hidden");
  EXPECT_EQ(asked, std::vector<int64_t>{4});

  RunArgs short_workspace(9);  // 72 bytes needed, 64 given
  expect_error([&] { check_run_tensors(short_workspace.problem, short_workspace.args, size_for); },
               MOE_STATUS_CAPACITY_EXCEEDED,
               "workspace of 64 bytes is smaller than the 72 bytes needed for 9 tokens");
  short_workspace.args.workspace = nullptr;
  expect_error([&] { check_run_tensors(short_workspace.problem, short_workspace.args, size_for); },
               MOE_STATUS_INVALID_ARGUMENT,
               "workspace is NULL but 72 bytes are needed for 9 tokens");
}

}  // namespace
}  // namespace moe::sdk
