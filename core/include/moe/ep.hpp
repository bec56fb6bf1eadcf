// Expert parallelism across GPUs (one process per GPU, NCCL underneath): how a process finds
// its rank, the communicator of the ranks, and one layer step that sends tokens to the ranks
// that own their experts and sums the results that come back.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "moe/ep_plan.hpp"
#include "moe/inputs.hpp"
#include "moe/plugin.hpp"
#include "moe/runner.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::ep {

// Rank, world size and local rank, from the launcher's environment: torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK), mpirun (OMPI_COMM_WORLD_*), srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID);
// none of these: a single process (rank 0 of 1). `run_id` names the job for the rendezvous.
struct Launch {
  int32_t rank = 0, world = 1, local_rank = 0;
  std::string launcher = "single";
  std::string run_id;
};
Launch launch_from_env();

// Narrows CUDA_VISIBLE_DEVICES to this process's GPU (LOCAL_RANK) unless it already names one,
// so every plugin's device 0 is that GPU. Call before anything touches CUDA.
void pin_local_device(const Launch& launch);

struct NcclApi;  // core/src/ep/nccl.hpp: NCCL's functions, loaded at run time

// The NCCL communicator of all ranks: the group's own (connect) or an engine's (borrow). Every
// exchange times out after `timeout_s` with an error that names the rank and the step (a rank
// that died or stopped answering), and at the start every rank checks that all ranks run the same
// config (`digest`, an all-gather: every rank makes its group at the same point).
class Group {
 public:
  // A communicator of its own: rank 0 writes the NCCL unique id to a file in `rendezvous_dir`
  // named for the run; the others wait for it. Init times out too (a rank that never joined).
  static std::unique_ptr<Group> connect(const Launch& launch, std::shared_ptr<const Plugin> device,
                                        const std::string& rendezvous_dir, double timeout_s,
                                        uint64_t digest);
  // An NCCL communicator (ncclComm_t) the caller made and owns, as an engine does (vLLM's
  // PyNcclCommunicator.comm, a torch.distributed backend's), borrowed for the group's life: never
  // destroyed nor aborted here. `rank` and `world` are what the config says (its ep_rank and
  // ep_size); the communicator must agree (CONFIG_ERROR naming both), and live on the calling
  // thread's current device, where `device`'s buffers are made. NULL: INVALID_ARGUMENT. NCCL
  // must be the library that made the communicator ($MOE_NCCL_LIBRARY, else libnccl.so.2).
  static std::unique_ptr<Group> borrow(void* nccl_comm, int32_t rank, int32_t world,
                                       std::shared_ptr<const Plugin> device, double timeout_s,
                                       uint64_t digest);
  // borrow() through `nccl` in place of the NCCL loaded at run time (tests: a fake NCCL).
  static std::unique_ptr<Group> borrow(const NcclApi& nccl, void* nccl_comm, int32_t rank,
                                       int32_t world, std::shared_ptr<const Plugin> device,
                                       double timeout_s, uint64_t digest);
  ~Group();  // destroys the communicator only if it made it
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  int32_t rank() const { return rank_; }
  int32_t world() const { return world_; }
  bool owns_communicator() const { return owned_; }
  // The CUDA device of the communicator, where the layer's buffers are made.
  int32_t cuda_device() const { return cuda_device_; }
  // Refuses (INVALID_ARGUMENT, naming both devices) a step begun with another device current on
  // the calling thread: its copies and the layer's launches would go to that device while the
  // collectives run on the communicator's. Called before a step moves anything, so a refused
  // rank's collectives never start.
  void check_current_device(const char* what) const;

  // One grouped send/recv: bytes sends[r] to rank r and recvs[r] from rank r (device memory).
  void exchange(const std::vector<std::pair<const void*, size_t>>& sends,
                const std::vector<std::pair<void*, size_t>>& recvs, const char* what);
  std::vector<uint64_t> all_gather(uint64_t value, const char* what);
  // Collectives enqueued on `stream` (a cudaStream_t; null: the legacy default stream) and not
  // waited for, as DeviceStep needs: every rank's `bytes` of `mine` into `all`, rank-major; each
  // rank's block of `elems` bf16 elements of `all`, summed over the ranks, into its `mine`.
  void all_gather_on(const void* mine, void* all, size_t bytes, void* stream, const char* what);
  void reduce_scatter_bf16_on(const void* all, void* mine, size_t elems, void* stream,
                              const char* what);

 private:
  explicit Group(const NcclApi& nccl) : nccl_(nccl) {}
  // Polls until the last call is through, with the group's deadline: `until_done`, until the
  // stream (the legacy default one) has run it; else only until a non-blocking communicator has
  // enqueued it (no longer ncclInProgress), so later work on its stream, or a capture's end,
  // comes after it (no stream query: a capturing stream must not be queried).
  void wait(const char* what, bool until_done = true);
  void check_config(uint64_t digest);
  void check_usable() const;

  const NcclApi& nccl_;
  void* comm_ = nullptr;  // null once aborted (owned) or given up after a timeout (borrowed)
  bool owned_ = false;
  int32_t rank_ = 0, world_ = 1;
  int32_t cuda_device_ = 0;
  double timeout_s_ = 60;
  std::shared_ptr<const Plugin> device_;
};

struct StepStats {
  int64_t tokens_sent = 0, tokens_received = 0;
  double ms = 0;                                  // the whole step, wall clock
  double dispatch_ms = 0, combine_ms = 0;         // the token and result exchanges, wall clock
  double compute_ms = 0;                          // the local layer
  int64_t dispatch_bytes = 0, combine_bytes = 0;  // sent + received by this rank
};

// A weight-1 shared expert under EP. Every backend adds it to each row it runs, so a token sent
// to two ranks would get it twice: it is split off instead, the routed experts (and any sinks)
// as one layer and the shared expert as a layer of one expert (its weights as expert 0, the
// layer's format, activation and activation scales), which the step runs on the home rank's
// tokens with id 0 and weight 1. `weights` are the rank's (routed experts local); the split's
// weights are views of the same memory (the routed ones without the shared tensors, the shared
// ones with a leading expert dimension of 1), valid while `weights`' memory is.
struct SharedSplit {
  Problem routed, shared;
  moe_weights routed_weights{}, shared_weights{};
};
SharedSplit split_shared_expert(const moe_problem& ep_problem, const moe_weights& weights);

// The shared expert's layer for run_step: prepared from SharedSplit's `shared` (layer null: the
// problem has none).
struct SharedExpert {
  const Layer* layer = nullptr;
  moe_problem problem{};
};

// One expert-parallel layer step for this rank's tokens: plan, send tokens (with the ids and
// weights the receiver computes), run `layer` (this rank's experts) on what arrived, send the
// results back and sum them in rank order; sink experts and the shared expert run on the home
// rank. `group` null: a single rank, no NCCL (works with host plugins too). The problem's
// ep_size and ep_rank must be the group's; a problem with a shared expert is refused (split it
// and pass `shared`). The ranks swap their ep_maps first (a caller's map decides where an expert
// lives; an expert held by no rank or by two is refused on every rank), and a rank runs what
// arrives (up to ep_size x T rows) in slices of at most the layer's max_tokens. Output [T, H]
// bf16 on the host.
HostTensor run_step(Group* group, const Layer& layer, const moe_problem& ep_problem,
                    const HostTensor& hidden, const Routing& routing, StepStats* stats = nullptr,
                    const SharedExpert& shared = {});

// One expert-parallel layer step on device tensors: no host work but launches, and nothing
// allocated per step, so a stream can capture it in a CUDA graph. Every rank's tokens, ids and
// weights are all-gathered (rank-major, `tokens` rows from each rank: every rank steps the same
// batch size, padding tokens with ids -1 where it has fewer; or, `ragged`, each rank its own T and
// the step pads every rank's rows to `max_tokens` on the device, so the exchanges move
// max_tokens rows a rank whatever T is), the rank's layer runs its experts on
// all of them (ids are global: other ranks' experts are skipped, and a token with none here gets
// a zero row), and a bf16 reduce-scatter sums each token's rows over the ranks back on the rank
// it came from (for two ranks one rounding of the f32 sum, as run_step's). Buffers for
// `max_tokens` tokens a rank are made at construction. Sink experts and a split-off shared expert
// run once per token at home after the exchange, adding into the output (one more bf16 rounding
// each than run_step's single f32 sum). `group` null: one rank, where the step is the layer's run
// (and the shared expert's). `chunks` > 1: the rows a rank sends are cut into that many chunks
// (fewer when it has fewer rows), each gathered, run and reduce-scattered on its own, the
// collectives on a stream of the step's own so that chunk c + 1's all-gather and chunk c - 1's
// reduce-scatter overlap chunk c's layer (events order them; the caller's stream waits for the
// last; a CUDA graph captures both streams). The same bits as one chunk where the layer's rows do
// not depend on the batch they run in (the reference's do; a GPU plugin's tile choice may
// follow the batch size).
class DeviceStep {
 public:
  // `shared`: the problem's shared expert, split off (split_shared_expert) and prepared by the
  // same plugin, which must honour moe_run_args.accumulate (MOE_RUN_FEATURE_ACCUMULATE): after
  // the reduce-scatter it runs on this rank's tokens and adds into the output. `ep_problem` is
  // then the routed one. Sink experts (replicated on every rank) leave the gathered run and run
  // in a home pass on this rank's tokens that adds into the output, so with more than one rank
  // the layer's plugin must honour accumulate too.
  // `ragged`: the ranks may step different batch sizes (0 too), each padded to max_tokens rows on
  // the device for the exchanges; every rank of the group must make its step the same way.
  // `chunks`: 1 to kMaxChunks and at most max_tokens; every rank must take the same.
  static constexpr int32_t kMaxChunks = 64;
  DeviceStep(Group* group, const Layer& layer, const moe_problem& ep_problem, int64_t max_tokens,
             const SharedExpert& shared = {}, bool ragged = false, int32_t chunks = 1);
  // hidden [T, H] bf16, topk_ids [T, w] i32, topk_weights [T, w] f32, output [T, H] bf16, all in
  // the layer plugin's device memory; T <= max_tokens, the same T on every rank unless ragged.
  void run(const moe_tensor& hidden, const moe_tensor& topk_ids, const moe_tensor& topk_weights,
           const moe_tensor& output, void* stream) const;
  int64_t max_tokens() const { return max_tokens_; }
  bool ragged() const { return ragged_; }
  int32_t chunks() const { return chunks_; }

 private:
  struct Overlap;  // the collectives' stream and the events between it and the caller's
  friend class ForkJoin;
  // The constructor's checks and buffers, then (with a group) every rank's agreement: how each
  // cuts and pads its rows, or that it failed (`failed`), so that all throw together.
  void make(const Layer& layer, const moe_problem& p, int64_t max_tokens,
            const SharedExpert& shared, bool ragged, int32_t chunks);
  void agree(std::exception_ptr failed, int64_t max_tokens, bool ragged, int32_t chunks) const;
  void add_shared(const moe_tensor& hidden, const moe_tensor& output, void* stream) const;

  Group* group_;
  const Layer& layer_;
  SharedExpert shared_;
  moe_problem problem_;
  int64_t max_tokens_, width_;
  int32_t world_;
  Buffer hidden_, ids_, weights_, out_, workspace_;  // every rank's tokens, and the layers'
  Buffer shared_ids_, shared_weights_;               // [max_tokens, 1]: expert 0, weight 1
  Buffer home_ids_;  // [max_tokens, w]: the sink experts' home pass (routed columns cleared)
  // Ragged: this rank's rows padded to max_tokens (ids -1 past T) for the all-gathers, and its
  // max_tokens rows of the reduce-scatter, of which the first T are the output.
  Buffer send_hidden_, send_ids_, send_weights_, recv_;
  bool ragged_ = false;
  bool on_device_ = false;  // the step's buffers' memory (the plugin's): the driver edits them
  int32_t chunks_ = 1;
  std::shared_ptr<Overlap> overlap_;  // chunks > 1 on a device: made at construction
};

// A DeviceStep captured once into a CUDA graph on a stream of its own and replayed: the tensors
// (device memory of the layer's plugin) are fixed at capture, so each launch steps whatever they
// then hold. Every rank captures its step the same way and launches it in the same order. The
// graph's stream is ordered with no other (non-blocking): sync() before other streams, or direct
// runs of the same DeviceStep, touch its tensors or buffers. Needs the NVIDIA driver (libcuda,
// loaded at run time), a device-memory plugin, and the layer's device current on the calling
// thread (the plugin's own calls, prepare and run, make it so).
class StepGraph {
 public:
  StepGraph(const DeviceStep& step, const moe_tensor& hidden, const moe_tensor& topk_ids,
            const moe_tensor& topk_weights, const moe_tensor& output);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  void launch() const;  // enqueues one step on the graph's stream
  void sync() const;    // waits for the launched steps

 private:
  void* stream_ = nullptr;  // CUstream
  void* graph_ = nullptr;   // CUgraph
  void* exec_ = nullptr;    // CUgraphExec
};

}  // namespace moe::ep
