// Row lists (RowRange::list): the activation and the 1x128 quantisation visit exactly the rows a
// list names, in any order, skipping negative entries, and write them bit for bit as a walk over
// every row does; rows not listed stay untouched. Rows wider than one block's chunk (the
// activation's column chunks) and a last chunk cut short are among the cases. The refusals of
// inconsistent lists run on any machine: they come before any CUDA call.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/quantize.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

class RowListTest : public test::CudaTest {
 protected:
  // A list of about half of `rows` rows, shuffled, with a few -1 entries among them.
  std::vector<int32_t> make_list(int64_t rows) {
    std::vector<int32_t> all(static_cast<size_t>(rows));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    std::vector<int32_t> list(all.begin(), all.begin() + rows / 2);
    for (int i = 0; i < 3; ++i) list.insert(list.begin() + randint(0, int64_t(list.size())), -1);
    return list;
  }
  static std::vector<bool> listed(const std::vector<int32_t>& list, int64_t rows) {
    std::vector<bool> on(static_cast<size_t>(rows), false);
    for (int32_t r : list)
      if (r >= 0) on[size_t(r)] = true;
    return on;
  }
};

// Two quantised outputs of `rows` rows (codes [rows, width], MN-major scales [blocks][rows]),
// poisoned: one for the full walk, one for the list.
struct QuantisedPair {
  int64_t rows, width, blocks;
  DeviceBuffer<uint8_t> codes_all, codes_some;
  DeviceBuffer<float> scales_all, scales_some;
  QuantisedPair(int64_t r, int64_t w)
      : rows(r),
        width(w),
        blocks(w / 128),
        codes_all(size_t(r * w)),
        codes_some(size_t(r * w)),
        scales_all(size_t(r * w / 128)),
        scales_some(size_t(r * w / 128)) {
    for (auto* b : {&codes_all, &codes_some}) b->poison(0xaa);
    for (auto* b : {&scales_all, &scales_some}) b->poison(0xff);
  }
  // Bytes of the list's output that differ from the full walk's on written rows, or that were
  // written (no longer poison) on the others.
  int64_t mismatches(const std::vector<bool>& written) const {
    const std::vector<uint8_t> all = codes_all.download(), some = codes_some.download();
    const std::vector<float> s_all = scales_all.download(), s_some = scales_some.download();
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const bool w = written[size_t(r)];
      for (int64_t c = 0; c < width; ++c) {
        const size_t i = size_t(r * width + c);
        wrong += some[i] != (w ? all[i] : uint8_t(0xaa));
      }
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t i = size_t(b * rows + r);
        wrong += w ? s_some[i] != s_all[i] : !std::isnan(s_some[i]);
      }
    }
    return wrong;
  }
};

// The bf16 activation, vector (I = 2304: three chunks, the last cut short) and scalar (I = 1100)
// paths, over more rows than the grid has row blocks at I = 2304 (264), so blocks stride over
// rows. The full walk must write every column of every row (its poison never survives).
TEST_F(RowListTest, TheActivationWritesTheListedRowsAsTheFullWalkDoes) {
  for (const int64_t inter : {int64_t(2304), int64_t(1100)}) {
    SCOPED_TRACE(testing::Message() << "I=" << inter);
    moe_problem p = default_problem();
    p.activation = MOE_ACTIVATION_SILU_MUL;
    const int64_t rows = 300, n1 = 2 * inter;
    DeviceBuffer<uint16_t> d_in(random_bf16(size_t(rows * n1), 2.0f));
    const std::vector<int32_t> list = make_list(rows);
    DeviceBuffer<int32_t> d_list(list);
    DeviceBuffer<uint16_t> d_all(size_t(rows * inter)), d_some(size_t(rows * inter));
    d_all.poison(0x7f);
    d_some.poison(0x7f);
    ActivationArgs a;
    a.gemm1 = d_in.get();
    a.intermediate = inter;
    a.out = d_all.get();
    a.rows = RowRange{rows};
    launch_activation(p, a, stream_);
    a.out = d_some.get();
    a.rows = RowRange{rows, nullptr, nullptr, d_list.get(), int64_t(list.size())};
    launch_activation(p, a, stream_);
    sync();
    const std::vector<uint16_t> all = d_all.download(), some = d_some.download();
    const std::vector<bool> on = listed(list, rows);
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < inter; ++c) {
        const size_t i = size_t(r * inter + c);
        if (all[i] == 0x7f7f && wrong++ < 5)
          ADD_FAILURE() << "row " << r << " col " << c << " was not written by the full walk";
        if (some[i] != (on[size_t(r)] ? all[i] : uint16_t(0x7f7f)) && wrong++ < 5)
          ADD_FAILURE() << "row " << r << (on[size_t(r)] ? " (listed)" : " (not listed)") << " col "
                        << c << ": " << some[i] << " want " << (on[size_t(r)] ? all[i] : 0x7f7f);
      }
    EXPECT_EQ(wrong, 0);
  }
}

// The activation quantised per 1x128 from fp32 rows (deepgemm_style's step between the GEMMs),
// blocks striding over rows as above; the full walk writes every scale.
TEST_F(RowListTest, TheQuantisedActivationWritesTheListedRowsAsTheFullWalkDoes) {
  moe_problem p = default_problem();
  p.activation = MOE_ACTIVATION_SILU_MUL;
  const int64_t rows = 300, inter = 2304;
  std::vector<float> in(static_cast<size_t>(rows * 2 * inter));
  for (auto& v : in) v = normal(2.0f);
  DeviceBuffer<float> d_in(in);
  const std::vector<int32_t> list = make_list(rows);
  DeviceBuffer<int32_t> d_list(list);
  QuantisedPair out(rows, inter);
  ActivationArgs a;
  a.gemm1_f32 = d_in.get();
  a.intermediate = inter;
  a.out_fp8 = out.codes_all.get();
  a.out_scales = {out.scales_all.get(), 1, rows};
  a.rows = RowRange{rows};
  launch_activation(p, a, stream_);
  a.out_fp8 = out.codes_some.get();
  a.out_scales = {out.scales_some.get(), 1, rows};
  a.rows = RowRange{rows, nullptr, nullptr, d_list.get(), int64_t(list.size())};
  launch_activation(p, a, stream_);
  sync();
  EXPECT_EQ(out.mismatches(listed(list, rows)), 0)
      << "bytes that differ from the full walk (listed rows) or were written (rows not listed)";
  const std::vector<float> scales = out.scales_all.download();
  EXPECT_EQ(std::count_if(scales.begin(), scales.end(), [](float v) { return std::isnan(v); }), 0)
      << "scales the full walk left unwritten";
}

// The gather fused into the 1x128 quantisation: each listed row read from its source token.
TEST_F(RowListTest, TheGatherQuantiseWritesTheListedRowsAsTheFullWalkDoes) {
  const int64_t tokens = 9, rows = 45, hidden = 640;
  DeviceBuffer<uint16_t> d_x(random_bf16(size_t(tokens * hidden)));
  std::vector<int32_t> source(static_cast<size_t>(rows));
  for (auto& s : source) s = randint(0, 4) == 0 ? -1 : int32_t(randint(0, tokens - 1));
  DeviceBuffer<int32_t> d_source(source);
  const std::vector<int32_t> list = make_list(rows);
  DeviceBuffer<int32_t> d_list(list);
  QuantisedPair out(rows, hidden);
  launch_gather_quantize_fp8_1x128(d_x.get(), hidden, d_source.get(), RowRange{rows},
                                   out.codes_all.get(), {out.scales_all.get(), 1, rows}, stream_);
  launch_gather_quantize_fp8_1x128(
      d_x.get(), hidden, d_source.get(),
      RowRange{rows, nullptr, nullptr, d_list.get(), int64_t(list.size())}, out.codes_some.get(),
      {out.scales_some.get(), 1, rows}, stream_);
  sync();
  std::vector<bool> written = listed(list, rows);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += written[size_t(r)] = written[size_t(r)] && source[size_t(r)] >= 0;
  EXPECT_GT(count, 0);
  EXPECT_EQ(out.mismatches(written), 0);
}

// No device needed: each refusal comes before a CUDA call. `fn` must throw INVALID_ARGUMENT with
// `part` in its message.
template <class Fn>
void expect_refused(Fn&& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "taken; expected a refusal naming '" << part << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(RowListRefusals, AListWithoutItsArrayWithANegativeCountOrBesideARangeIsNamed) {
  moe_problem p = default_problem();
  p.activation = MOE_ACTIVATION_SILU_MUL;
  ActivationArgs a;
  a.gemm1 = reinterpret_cast<const uint16_t*>(uintptr_t(256));
  a.out = reinterpret_cast<uint16_t*>(uintptr_t(256));
  a.intermediate = 128;
  auto run = [&](const RowRange& rows) {
    a.rows = rows;
    launch_activation(p, a, nullptr);
  };
  const int32_t* some = reinterpret_cast<const int32_t*>(uintptr_t(256));
  static const int64_t end = 4;
  expect_refused(
      [&] {
        run(RowRange{8, nullptr, nullptr, nullptr, 4});
      },
      "a row list of 4 entries has no device array");
  expect_refused([&] { run(RowRange{8, nullptr, nullptr, some, -1}); }, "a count must be >= 0");
  expect_refused(
      [&] {
        run(RowRange{8, nullptr, &end, some, 2});
      },
      "replaces the range: begin and end must be null");
}

TEST(RowListRefusals, ThePerTensorQuantisersRefuseARowList) {
  const auto* x = reinterpret_cast<const uint16_t*>(uintptr_t(256));
  auto* codes = reinterpret_cast<uint8_t*>(uintptr_t(256));
  const auto* scale = reinterpret_cast<const float*>(uintptr_t(256));
  const int32_t* list = reinterpret_cast<const int32_t*>(uintptr_t(256));
  expect_refused(
      [&] {
        launch_quantize_fp8_tensor_static(x, 128, RowRange{8, nullptr, nullptr, list, 3}, scale,
                                          codes, nullptr);
      },
      "quantize_fp8_tensor_static: takes rows as a range only");
}

}  // namespace
}  // namespace moe::gpu
