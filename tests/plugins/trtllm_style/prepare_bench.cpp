// moe_trtllm_prepare_bench FORMAT E H I [--tile M] [--block-major] [--relu2]: times prepare() of
// one layer from borrowed canonical weights (moe_weights, as DeviceLayer calls it) and reports the
// host memory it needed: the peak RSS above the RSS before the call, in copies of the prepared
// weights. Not a test (a layer worth measuring needs gigabytes): run it by hand.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "moe/sdk/formats.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"
#include "prepare.hpp"

namespace {

using namespace moe;
using namespace moe::trtllm;

// A field of /proc/self/status in bytes (VmRSS, VmHWM).
int64_t proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key) + 1)) * 1024;
  return -1;
}

// Restarts VmHWM at the current RSS, so the peak read after prepare() is prepare()'s own.
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

moe_tensor view(LayoutTensor& t, bool scalar) {
  if (!t.present()) return {};
  const MatrixStack& m = t.shape;
  if (scalar) return make_view(t.bytes.data(), t.dtype, {m.batch});
  return make_view(t.bytes.data(), t.dtype, {m.batch, m.rows, m.cols});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s FORMAT E H I [--tile M] [--block-major] [--relu2]\n", argv[0]);
    return 2;
  }
  const auto format = parse_format(argv[1]);
  if (!format) {
    std::fprintf(stderr, "unknown format %s\n", argv[1]);
    return 2;
  }
  LayerShape shape{*format, true, std::stoll(argv[2]), std::stoll(argv[3]), std::stoll(argv[4])};
  PrepareOptions o;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tile" && i + 1 < argc)
      o.epilogue_tile_m = std::stoll(argv[++i]);
    else if (a == "--block-major")
      o.block_major_k = true;
    else if (a == "--relu2")
      shape.gated = false;
  }
  // The canonical layer, every page touched (a non-zero pattern, as real weights).
  LayerTensors t = canonical_geometry(shape, shape.intermediate);
  int64_t in_bytes = 0;
  for (LayoutTensor* x : {&t.w13, &t.w13_scale, &t.w2, &t.w2_scale}) {
    if (!x->present()) continue;
    std::memset(x->bytes.data(), 0x3c, x->bytes.size());
    in_bytes += int64_t(x->bytes.size());
  }
  const bool scalar = shape.format == MOE_FORMAT_FP8_TENSOR;
  moe_weights w{};
  w.struct_size = sizeof(moe_weights);
  w.w13 = view(t.w13, false);
  w.w13_scale = view(t.w13_scale, scalar);
  w.w2 = view(t.w2, false);
  w.w2_scale = view(t.w2_scale, scalar);

  reset_peak_rss();
  const int64_t rss_before = proc_status_bytes("VmRSS:");
  const auto start = std::chrono::steady_clock::now();
  const PreparedLayer p = prepare(shape, w, o);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const int64_t peak = proc_status_bytes("VmHWM:");
  int64_t out_bytes = 0;
  for (const LayoutTensor* x :
       {&p.tensors.w13, &p.tensors.w13_scale, &p.tensors.w2, &p.tensors.w2_scale})
    out_bytes += int64_t(x->bytes.size());
  const double gb = 1e-9;
  fmt::print(
      "{} E={} H={} I={} (P={}) tile={}{}: canonical {:.3f} GB, prepared {:.3f} GB\n"
      "prepare {:.1f} ms ({:.2f} GB/s of prepared bytes); RSS before {:.3f} GB, peak {:.3f} GB, "
      "peak above before {:.3f} GB = {:.2f} x prepared\n",
      argv[1], shape.experts, shape.hidden, shape.intermediate, p.tag.padded_intermediate,
      o.epilogue_tile_m, o.block_major_k ? " BlockMajorK" : "", in_bytes * gb, out_bytes * gb, ms,
      out_bytes * gb / (ms * 1e-3), rss_before * gb, peak * gb, (peak - rss_before) * gb,
      double(peak - rss_before) / double(out_bytes));
  return 0;
}
