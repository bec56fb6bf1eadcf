#include "nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "device/cuda_driver.hpp"
#include "moe/sdk/error.hpp"

namespace moe::ep {
namespace {

void* open_library(const char* name, const char* hint) {
  dlerror();
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  MOE_CHECK(h != nullptr, MOE_STATUS_NOT_FOUND, "expert parallelism needs {} ({}): {}", name, hint,
            dlerror());
  return h;
}

template <class F>
void bind(void* lib, const char* symbol, F& out, const std::string& file) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  MOE_CHECK(out != nullptr, MOE_STATUS_NOT_FOUND, "{} has no symbol {}", file, symbol);
}

}  // namespace

const NcclApi& nccl() {
  static NcclApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("MOE_NCCL_LIBRARY");
    api.library = env && *env ? env : "libnccl.so.2";
    void* n = open_library(api.library.c_str(),
                           "set MOE_NCCL_LIBRARY to its path, e.g. PyTorch's nvidia/nccl/lib");
    bind(n, "ncclGetVersion", api.get_version, api.library);
    bind(n, "ncclGetUniqueId", api.get_unique_id, api.library);
    bind(n, "ncclCommInitRankConfig", api.comm_init_rank_config, api.library);
    bind(n, "ncclCommGetAsyncError", api.comm_get_async_error, api.library);
    bind(n, "ncclCommAbort", api.comm_abort, api.library);
    bind(n, "ncclCommDestroy", api.comm_destroy, api.library);
    bind(n, "ncclCommCount", api.comm_count, api.library);
    bind(n, "ncclCommUserRank", api.comm_user_rank, api.library);
    bind(n, "ncclCommCuDevice", api.comm_cu_device, api.library);
    bind(n, "ncclGroupStart", api.group_start, api.library);
    bind(n, "ncclGroupEnd", api.group_end, api.library);
    bind(n, "ncclSend", api.send, api.library);
    bind(n, "ncclRecv", api.recv, api.library);
    bind(n, "ncclAllGather", api.all_gather, api.library);
    bind(n, "ncclReduceScatter", api.reduce_scatter, api.library);
    bind(n, "ncclGetErrorString", api.error_string, api.library);
    api.stream_query = device::cuda_driver().stream_query;
    api.current_device = [] { return device::current_device(device::cuda_driver()); };
  });
  return api;
}

}  // namespace moe::ep
