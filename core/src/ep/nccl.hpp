// NCCL and the CUDA driver, loaded at run time (dlopen) and only when expert parallelism runs:
// the moe tool and the core stay free of both, so they start on machines without them.
// NCCL: MOE_NCCL_LIBRARY, else libnccl.so.2 on the loader's path. The driver: libcuda.so.1
// (core/src/device/cuda_driver.hpp). A Group calls only through this table, so a test can hand
// it a fake NCCL (tests/core/ep_group_test.cpp).
#pragma once

#include <nccl.h>  // types only: the functions come from dlopen

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe::ep {

struct NcclApi {
  ncclResult_t (*get_version)(int*);
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank_config)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*comm_abort)(ncclComm_t);
  ncclResult_t (*comm_destroy)(ncclComm_t);
  ncclResult_t (*comm_count)(const ncclComm_t, int*);
  ncclResult_t (*comm_user_rank)(const ncclComm_t, int*);
  ncclResult_t (*comm_cu_device)(const ncclComm_t, int*);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  const char* (*error_string)(ncclResult_t);
  // CUDA driver: completion of the legacy default stream, on which every exchange runs, and the
  // calling thread's current device (device::current_device: its context's, else 0).
  int (*stream_query)(void* stream);  // cuStreamQuery: 0 done, 600 not ready
  int32_t (*current_device)();
  std::string library;  // the file loaded
};

// Loads both once per process; throws moe::Error(NOT_FOUND) naming what could not be found.
const NcclApi& nccl();

}  // namespace moe::ep
