// What one launch of a cutlass_mega-like persistent kernel costs, by launch API (bench/NOTES.md,
// sessions 38-40: Qwen3-30B-A3B bf16 at T = 1 times 32.7 us, of which ~3 us are outside the
// kernel). The kernel has the fused layer's shape: one CTA of 288 threads per SM, ~200 KB of
// dynamic shared memory, a ~700-byte parameter block, one grid-wide barrier, and `work_ns` of
// spinning per CTA (0: launch cost alone; 20000: a decode layer's length). Each API launches it
// back to back, timed with events over many launches, eagerly and as a replayed CUDA graph:
//   coop       cudaLaunchCooperativeKernel (the plugin's launch today)
//   coop_ex    cudaLaunchKernelEx with cudaLaunchAttributeCooperative
//   coop_pdl   the same plus programmatic stream serialization (each launch may begin as the last
//              one's CTAs finish; the kernel waits on griddepcontrol before its barrier)
//   plain      <<<>>> without the co-residency guarantee, and so without the grid barrier
// Usage: moe_launch_cost [work_ns]   (default: 0, then 20000)
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

struct Params {  // the fused kernel's parameter block is ~700 bytes (two tensor maps, pointers)
  unsigned char maps[256];
  const void* pointers[40];
  int ints[64];
  long long work_ns;
  int grid_sync;  // 0 for the plain launch: a grid barrier needs a cooperative one
};
constexpr int kThreads = 288;
constexpr size_t kSmem = 200 * 1024;

__global__ void __launch_bounds__(kThreads, 1) persistent(const __grid_constant__ Params p) {
  extern __shared__ unsigned char smem[];
  asm volatile("griddepcontrol.wait;" ::: "memory");  // no-op unless launched as a dependent
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while ((long long)(t - t0) < p.work_ns);
  if (threadIdx.x == 0) smem[0] = 1;
  if (p.grid_sync) cooperative_groups::this_grid().sync();
  asm volatile("griddepcontrol.launch_dependents;");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

enum Api { kCoop, kCoopEx, kCoopPdl, kPlain };
const char* kNames[] = {"coop", "coop_ex", "coop_pdl", "plain"};

cudaError_t launch(Api api, const Params& p, int ctas, cudaStream_t s) {
  if (api == kPlain) {
    Params q = p;
    q.grid_sync = 0;
    persistent<<<ctas, kThreads, kSmem, s>>>(q);
    return cudaGetLastError();
  }
  if (api == kCoop) {
    void* args[] = {const_cast<Params*>(&p)};
    return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(persistent), dim3(ctas),
                                       dim3(kThreads), args, kSmem, s);
  }
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeCooperative;
  attrs[0].val.cooperative = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = s;
  cfg.attrs = attrs;
  cfg.numAttrs = api == kCoopPdl ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, persistent, p);
}

// Microseconds a launch, back to back: eagerly (and the host's own time to enqueue one), then as
// a graph of `kInGraph` launches replayed.
void time_api(Api api, const Params& p, int ctas, cudaStream_t s) {
  constexpr int kLaunches = 400, kInGraph = 20;
  for (int i = 0; i < 50; ++i)
    if (cudaError_t e = launch(api, p, ctas, s); e != cudaSuccess) {
      std::printf("%-9s refused: %s\n", kNames[api], cudaGetErrorString(e));
      cudaGetLastError();
      return;
    }
  check(cudaStreamSynchronize(s), "warm-up");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const auto h0 = std::chrono::steady_clock::now();
  cudaEventRecord(a, s);
  for (int i = 0; i < kLaunches; ++i) check(launch(api, p, ctas, s), "launch");
  cudaEventRecord(b, s);
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() /
      kLaunches;
  check(cudaEventSynchronize(b), "eager");
  float eager_ms = 0;
  cudaEventElapsedTime(&eager_ms, a, b);
  double graph_us = -1;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    bool ok = true;
    for (int i = 0; i < kInGraph && ok; ++i) ok = launch(api, p, ctas, s) == cudaSuccess;
    if (cudaStreamEndCapture(s, &g) == cudaSuccess && ok &&
        cudaGraphInstantiate(&ge, g, 0) == cudaSuccess) {
      for (int i = 0; i < 5; ++i) check(cudaGraphLaunch(ge, s), "graph warm-up");
      check(cudaStreamSynchronize(s), "graph warm-up");
      constexpr int kReplays = 20;
      cudaEventRecord(a, s);
      for (int i = 0; i < kReplays; ++i) check(cudaGraphLaunch(ge, s), "replay");
      cudaEventRecord(b, s);
      check(cudaEventSynchronize(b), "replays");
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      graph_us = ms * 1e3 / (kReplays * kInGraph);
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    }
    cudaGetLastError();
  }
  std::printf("%-9s eager %7.2f us a launch (host enqueue %5.2f us)  graph %7.2f us a launch\n",
              kNames[api], eager_ms * 1e3 / kLaunches, host_us, graph_us);
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SMs");
  check(cudaFuncSetAttribute(persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)),
        "smem");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  Params p{};
  p.grid_sync = 1;
  for (long long work : argc > 1 ? std::initializer_list<long long>{std::atoll(argv[1])}
                                 : std::initializer_list<long long>{0, 20000}) {
    p.work_ns = work;
    std::printf(
        "%d CTAs x %d threads, %zu KB shared memory, %zu-byte parameters, %lld ns of work\n", sms,
        kThreads, kSmem / 1024, sizeof(Params), work);
    for (Api api : {kCoop, kCoopEx, kCoopPdl, kPlain}) time_api(api, p, sms, s);
  }
  return 0;
}
