// The NCCL communicator: its own (rendezvous through a file, non-blocking init) or an engine's
// (borrowed, checked against the config, never destroyed), and exchanges polled against a
// deadline, so a rank that never joins or dies is an error and not a hang.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "moe/ep.hpp"
#include "moe/sdk/error.hpp"
#include "nccl.hpp"

namespace moe::ep {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void check_nccl(const NcclApi& nccl, ncclResult_t r, const char* what) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  MOE_FAIL(MOE_STATUS_DEVICE_ERROR, "NCCL {} failed: {}", what, nccl.error_string(r));
}

void check_nccl(ncclResult_t r, const char* what) {
  check_nccl(nccl(), r, what);
}

void check_not_null(void* comm) {
  MOE_CHECK(comm != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "nccl_comm is NULL: pass the engine's initialised ncclComm_t");
}

void check_device_plugin(const std::shared_ptr<const Plugin>& device) {
  MOE_CHECK(device && device->device_memory(), MOE_STATUS_UNSUPPORTED,
            "expert parallelism over several GPUs needs a backend with device memory{}",
            device ? fmt::format(" ('{}' keeps host memory)", device->name()) : "");
}

fs::path rendezvous_file(const Launch& l, const std::string& dir) {
  return fs::path(dir) /
         fmt::format("moe_ep_{}_{}.ncclid", l.run_id.empty() ? "run" : l.run_id, l.world);
}

// Rank 0's published id, removed when connect() ends: by then every rank joined the
// communicator with it (or the connection failed), and a later run of the same run id (torchrun
// without --standalone names every run "none") must not read it.
struct Unpublish {
  fs::path file;
  ~Unpublish() {
    std::error_code ec;
    if (!file.empty()) fs::remove(file, ec);
  }
};

// Rank 0 publishes the id (written to a temporary name, then renamed: readers never see half a
// file); the others wait for it until the deadline.
ncclUniqueId rendezvous(const Launch& l, const std::string& dir, double timeout_s) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = rendezvous_file(l, dir);
  ncclUniqueId id{};
  if (l.rank == 0) {
    check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId");
    const fs::path tmp = file.string() + fmt::format(".tmp{}", ::getpid());
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof(id.internal));
    fs::rename(tmp, file, ec);
    MOE_CHECK(!ec, MOE_STATUS_IO_ERROR, "rank 0 cannot publish the NCCL id at {}: {}",
              file.string(), ec.message());
    return id;
  }
  const auto start = Clock::now();
  while (true) {
    std::ifstream in(file, std::ios::binary);
    if (in.read(id.internal, sizeof(id.internal)) && in.gcount() == sizeof(id.internal)) return id;
    MOE_CHECK(seconds_since(start) < timeout_s, MOE_STATUS_IO_ERROR,
              "rank {} of {}: rank 0 did not publish the NCCL id at {} within {:.0f} s (did it "
              "start, with the same rendezvous directory?)",
              l.rank, l.world, file.string(), timeout_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::unique_ptr<Group> Group::connect(const Launch& l, std::shared_ptr<const Plugin> device,
                                      const std::string& dir, double timeout_s, uint64_t digest) {
  check_device_plugin(device);
  std::unique_ptr<Group> g(new Group(nccl()));
  g->owned_ = true;
  g->rank_ = l.rank;
  g->world_ = l.world;
  g->timeout_s_ = timeout_s;
  g->device_ = std::move(device);
  const ncclUniqueId id = rendezvous(l, dir, timeout_s);
  const Unpublish unpublish{l.rank == 0 ? rendezvous_file(l, dir) : fs::path()};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and collectives return at once; wait() polls with a deadline
  ncclComm_t comm = nullptr;
  check_nccl(nccl().comm_init_rank_config(&comm, l.world, id, l.rank, &config),
             "ncclCommInitRankConfig");
  g->comm_ = comm;
  const auto start = Clock::now();
  while (true) {
    ncclResult_t state = ncclSuccess;
    check_nccl(nccl().comm_get_async_error(comm, &state), "ncclCommGetAsyncError");
    if (state == ncclSuccess) break;
    check_nccl(state, "communicator init");
    if (seconds_since(start) > timeout_s) {
      nccl().comm_abort(comm);
      g->comm_ = nullptr;
      MOE_FAIL(MOE_STATUS_DEVICE_ERROR,
               "rank {} of {}: the NCCL communicator was not complete after {:.0f} s: a rank "
               "never joined",
               l.rank, l.world, timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int comm_device = 0;  // the device NCCL bound (the current one at init)
  check_nccl(nccl().comm_cu_device(comm, &comm_device), "ncclCommCuDevice");
  g->cuda_device_ = comm_device;
  g->check_config(digest);
  spdlog::info("expert parallel: rank {} of {} connected ({})", l.rank, l.world, nccl().library);
  return g;
}

std::unique_ptr<Group> Group::borrow(void* comm, int32_t rank, int32_t world,
                                     std::shared_ptr<const Plugin> device, double timeout_s,
                                     uint64_t digest) {
  check_not_null(comm);  // before NCCL is loaded: neither check needs it
  check_device_plugin(device);
  return borrow(nccl(), comm, rank, world, std::move(device), timeout_s, digest);
}

std::unique_ptr<Group> Group::borrow(const NcclApi& api, void* comm, int32_t rank, int32_t world,
                                     std::shared_ptr<const Plugin> device, double timeout_s,
                                     uint64_t digest) {
  check_not_null(comm);
  check_device_plugin(device);
  const auto c = static_cast<ncclComm_t>(comm);
  int count = 0, user_rank = 0, comm_device = 0;
  check_nccl(api, api.comm_count(c, &count), "ncclCommCount");
  check_nccl(api, api.comm_user_rank(c, &user_rank), "ncclCommUserRank");
  MOE_CHECK(count == world && user_rank == rank, MOE_STATUS_CONFIG_ERROR,
            "the NCCL communicator is rank {} of {}, but the config says ep_rank={} of ep_size={}",
            user_rank, count, rank, world);
  check_nccl(api, api.comm_cu_device(c, &comm_device), "ncclCommCuDevice");
  const int32_t current = api.current_device();
  MOE_CHECK(comm_device == current, MOE_STATUS_INVALID_ARGUMENT,
            "the NCCL communicator is on cuda:{}, but this thread's current device, where the "
            "layer's buffers are made, is cuda:{}",
            comm_device, current);
  std::unique_ptr<Group> g(new Group(api));
  g->comm_ = comm;
  g->rank_ = rank;
  g->world_ = world;
  g->cuda_device_ = comm_device;
  g->timeout_s_ = timeout_s;
  g->device_ = std::move(device);
  g->check_config(digest);
  spdlog::info("expert parallel: rank {} of {} on the caller's NCCL communicator ({})", rank, world,
               api.library);
  return g;
}

// Every rank must run the same problem, backend and seed.
void Group::check_config(uint64_t digest) {
  const std::vector<uint64_t> all = all_gather(digest, "config check");
  for (int32_t r = 0; r < world_; ++r) {
    MOE_CHECK(all[size_t(r)] == all[0], MOE_STATUS_CONFIG_ERROR,
              "rank {} runs a different config than rank 0 (digest {:016x} vs {:016x}): every "
              "rank needs the same problem, backend and seed",
              r, all[size_t(r)], all[0]);
  }
}

Group::~Group() {
  if (comm_ && owned_) nccl_.comm_destroy(static_cast<ncclComm_t>(comm_));
}

// NOTES: on a timeout an owned communicator is aborted; a borrowed one is the engine's to abort
// (aborting it here would pull it from under the engine), so the group only stops using it.
void Group::wait(const char* what, bool until_done) {
  const auto start = Clock::now();
  auto comm = static_cast<ncclComm_t>(comm_);
  while (true) {
    ncclResult_t state = ncclSuccess;
    check_nccl(nccl_, nccl_.comm_get_async_error(comm, &state), "ncclCommGetAsyncError");
    check_nccl(nccl_, state, what);
    if (state == ncclSuccess) {
      if (!until_done) return;
      const int query = nccl_.stream_query(nullptr);  // 0 done, 600 not yet, else an error
      if (query == 0) return;
      MOE_CHECK(query == 600, MOE_STATUS_DEVICE_ERROR,
                "rank {} of {}: {} failed on the device (CUDA error {}): a kernel on the stream "
                "faulted; the CUDA context is unusable",
                rank_, world_, what, query);
    }
    if (seconds_since(start) > timeout_s_) {
      if (owned_) nccl_.comm_abort(comm);
      comm_ = nullptr;
      MOE_FAIL(MOE_STATUS_DEVICE_ERROR,
               "rank {} of {}: {} did not {} within {:.0f} s: a rank died or stopped "
               "answering{}",
               rank_, world_, what, until_done ? "finish" : "get enqueued", timeout_s_,
               owned_ ? ""
                      : "; the communicator is the caller's, with that step still in flight: "
                        "abort it (ncclCommAbort) rather than use it again");
    }
    std::this_thread::yield();
  }
}

void Group::check_current_device(const char* what) const {
  const int32_t current = nccl_.current_device();
  MOE_CHECK(current == cuda_device_, MOE_STATUS_INVALID_ARGUMENT,
            "rank {} of {}: {} runs with cuda:{} current, but the group's NCCL communicator and "
            "the layer's buffers are on cuda:{}: make cuda:{} current for every step",
            rank_, world_, what, current, cuda_device_, cuda_device_);
}

void Group::check_usable() const {
  MOE_CHECK(
      comm_ != nullptr, MOE_STATUS_DEVICE_ERROR, "rank {} of {}: the NCCL communicator {}", rank_,
      world_,
      owned_ ? "was aborted after a timeout" : "timed out earlier; the group no longer uses it");
}

void Group::exchange(const std::vector<std::pair<const void*, size_t>>& sends,
                     const std::vector<std::pair<void*, size_t>>& recvs, const char* what) {
  check_usable();
  auto comm = static_cast<ncclComm_t>(comm_);
  check_nccl(nccl_, nccl_.group_start(), "ncclGroupStart");
  for (int32_t r = 0; r < world_; ++r) {
    if (sends[size_t(r)].second)
      check_nccl(
          nccl_,
          nccl_.send(sends[size_t(r)].first, sends[size_t(r)].second, ncclUint8, r, comm, nullptr),
          "ncclSend");
    if (recvs[size_t(r)].second)
      check_nccl(
          nccl_,
          nccl_.recv(recvs[size_t(r)].first, recvs[size_t(r)].second, ncclUint8, r, comm, nullptr),
          "ncclRecv");
  }
  check_nccl(nccl_, nccl_.group_end(), "ncclGroupEnd");
  wait(what);
}

std::vector<uint64_t> Group::all_gather(uint64_t value, const char* what) {
  check_usable();
  Buffer mine(device_, sizeof(uint64_t)), all(device_, sizeof(uint64_t) * size_t(world_));
  mine.upload(&value, sizeof(value));
  check_nccl(nccl_,
             nccl_.all_gather(mine.data(), all.data(), sizeof(uint64_t), ncclUint8,
                              static_cast<ncclComm_t>(comm_), nullptr),
             "ncclAllGather");
  wait(what);
  std::vector<uint64_t> out(static_cast<size_t>(world_));
  all.download(out.data(), out.size() * sizeof(uint64_t));
  return out;
}

void Group::all_gather_on(const void* mine, void* all, size_t bytes, void* stream,
                          const char* what) {
  check_usable();
  check_nccl(nccl_,
             nccl_.all_gather(mine, all, bytes, ncclUint8, static_cast<ncclComm_t>(comm_),
                              static_cast<cudaStream_t>(stream)),
             what);
  wait(what, false);
}

void Group::reduce_scatter_bf16_on(const void* all, void* mine, size_t elems, void* stream,
                                   const char* what) {
  check_usable();
  MOE_CHECK(nccl_.reduce_scatter != nullptr, MOE_STATUS_UNSUPPORTED, "{} has no ncclReduceScatter",
            nccl_.library);
  check_nccl(
      nccl_,
      nccl_.reduce_scatter(all, mine, elems, ncclBfloat16, ncclSum, static_cast<ncclComm_t>(comm_),
                           static_cast<cudaStream_t>(stream)),
      what);
  wait(what, false);
}

}  // namespace moe::ep
