/* moe-registry host C API: the core as a shared library (libmoe_core.so) for programs in any
 * language (Python, Rust, Go, C). Beside the plugin ABI (moe/abi/moe_abi.h), whose types it
 * reuses: moe_status, moe_problem, moe_tensor, moe_weights, moe_option, moe_support,
 * moe_route_args and moe_run_args mean here what they mean there (docs/design.md §2, §10).
 *
 * Rules (those of the plugin ABI, docs/design.md §2 rules 2-5):
 *  - Versions: MOE_HOST_VERSION_MAJOR changes when something published changes; MINOR only
 *    appends (a struct field, a function, an enum value).
 *  - Every struct starts with `struct_size` (the caller's sizeof) and `ext` (NULL). A struct the
 *    caller fills is accepted from its MOE_HOST_<STRUCT>_MIN_SIZE up; an output struct is written
 *    only where it fits, and keeps the caller's struct_size.
 *  - Every function returns a moe_status and never lets an exception out; after a failure
 *    moe_host_last_error() gives the calling thread's message, which names the problem.
 *  - Handles are opaque and owned by the caller, who destroys each with its *_destroy function
 *    (NULL is accepted there). A layer or selection keeps what it needs alive: it may outlive the
 *    registry that made it. A registry may be used from several threads at once, but not while
 *    it is being destroyed; a layer's route and run follow the plugin's rules (one stream each).
 *  - Strings handed out are owned by the handle they came from (registry, selection, layer) and
 *    live as long as it; strings handed in are borrowed for the call.
 */
#ifndef MOE_HOST_H_
#define MOE_HOST_H_

#include <stddef.h>
#include <stdint.h>

#include "moe/abi/moe_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_HOST_VERSION_MAJOR 1
#define MOE_HOST_VERSION_MINOR                                            \
  9 /* 1.1: moe_host_problem_parse, moe_host_problem_format;              \
      1.2: moe_host_layer_prepare_checkpoint, the router fields of        \
      moe_host_layer_info;                                                \
      1.3: weights in device memory (moe_host_prepare_args.weights_*      \
      fields), expert parallelism over the caller's NCCL communicator     \
      (moe_host_ep_*);                                                    \
      1.4: the decode rule in moe_host_plugin_info (ABI 1.3);             \
      1.5: the device EP step (moe_host_ep_device_step_*);                \
      1.6: ragged device EP steps (moe_host_ep_device_step_args.ragged);  \
      1.7: chunked device EP steps (moe_host_ep_device_step_args.chunks); \
      1.8: the decode rule's limits by format (ABI 1.5);                  \
      1.9: run_features in moe_host_plugin_info (ABI 1.4, 1.6) */

#if defined(_WIN32)
#define MOE_HOST_EXPORT __declspec(dllexport)
#else
#define MOE_HOST_EXPORT __attribute__((visibility("default")))
#endif

/* Opaque handles. */
typedef struct moe_host_registry moe_host_registry;   /* plugins found; moe_host_registry_destroy */
typedef struct moe_host_selection moe_host_selection; /* a config's choice; ..._selection_destroy */
typedef struct moe_host_layer moe_host_layer;         /* a prepared layer; moe_host_layer_destroy */
typedef struct moe_host_ep_group moe_host_ep_group;   /* EP ranks (1.3); ..._ep_group_destroy */

/* ---------------------------------------------------------------------------------------------
 * Errors and versions.
 * ------------------------------------------------------------------------------------------- */

/* The calling thread's message of its last failed call ("" after a success). Owned by the
 * library; valid until this thread's next call. Never NULL. */
MOE_HOST_EXPORT const char* moe_host_last_error(void);

/* The status's name, e.g. "config_error". Static storage; never NULL. */
MOE_HOST_EXPORT const char* moe_host_status_name(moe_status status);

/* This library's host API version and the plugin ABI version it loads. */
MOE_HOST_EXPORT moe_status moe_host_version(uint32_t* host_major /* out */,
                                            uint32_t* host_minor /* out */,
                                            uint32_t* abi_major /* out */,
                                            uint32_t* abi_minor /* out */);

/* A problem with every field at its documented default (moe_abi.h; ep_size 1, no EP, scales 1,
 * ...), written where it fits in the caller's struct (set struct_size first). Set the fields that
 * matter after it: a problem of zeros is not a valid one. */
MOE_HOST_EXPORT moe_status moe_host_default_problem(moe_problem* problem /* out */);

/* A problem from the text of a config's `problem:` mapping, YAML or JSON (JSON is YAML), e.g.
 * "{experts: 8, top_k: 2, hidden: 512, intermediate: 256, format: bf16}": keys are the moe_problem
 * field names and enum values their names, as in configs (README "Configs"), so a binding needs no
 * copy of the ABI's enum numbers. experts, top_k, hidden and intermediate are required, the
 * others default as in configs. The problem is finalised and validated as a config's (CONFIG_ERROR
 * "<problem>:LINE:COL: ..." naming the key) and written where it fits in the caller's struct (set
 * struct_size first). Its ep_map is NULL: the core makes the map from ep_placement, ep_size and
 * ep_rank wherever it reads a problem. Unlike a config, it reads keys the problem's routing or
 * activation never use (e.g. route_scale under grouped_topk) as written, whatever their value: it
 * is also the way back from moe_host_problem_format, which writes every field. Since 1.1. */
MOE_HOST_EXPORT moe_status moe_host_problem_parse(const char* text, moe_problem* problem /* out */);

/* The problem (normalised and validated first) as one line of JSON holding every key a config's
 * `problem:` takes, enums by name, which moe_host_problem_parse reads back to the same problem.
 * Writes at most `cap` bytes, NUL-terminated, into buf (NULL when cap is 0); *needed gets the full
 * length + 1. Since 1.1. */
MOE_HOST_EXPORT moe_status moe_host_problem_format(const moe_problem* problem, char* buf,
                                                   size_t cap, size_t* needed /* out */);

/* ---------------------------------------------------------------------------------------------
 * The registry: discovery (docs/design.md §2 rule 9), through the plugin scanner.
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_host_registry_options {
  size_t struct_size;
  const moe_extension* ext;
  const char* const* plugin_dirs; /* [num_plugin_dirs] borrowed; each must exist; searched first */
  int32_t num_plugin_dirs;
  const char* const* plugin_files; /* [num_plugin_files] borrowed; each must load */
  int32_t num_plugin_files;
  int32_t use_env;     /* 1 = also MOE_PLUGIN_PATH */
  int32_t use_default; /* 1 = also the core's plugin directory (the built-in plugins) */
  /* The core's plugin directory, where the built-in plugins (reference, gpu_oracle) may load from.
   * NULL: $MOE_CORE_PLUGIN_DIR, else the one beside this library (<libdir>/moe_registry/plugins
   * installed, <build>/plugins in the build tree). Given, it must be a directory (NOT_FOUND). */
  const char* core_plugin_dir;
  /* The plugin scanner executable. NULL: $MOE_PLUGIN_SCANNER, else the one beside this library
   * (<prefix>/libexec/moe_registry installed, <build>/bin in the build tree). */
  const char* scanner;
} moe_host_registry_options;

#define MOE_HOST_REGISTRY_OPTIONS_MIN_SIZE \
  (offsetof(moe_host_registry_options, scanner) + sizeof(const char*))

/* Discovers plugins. `options` NULL: no directories of the caller's, use_env = 1, use_default = 1.
 * A library that cannot be loaded is not an error: it is listed by moe_host_registry_skipped. */
MOE_HOST_EXPORT moe_status moe_host_registry_open(const moe_host_registry_options* options,
                                                  moe_host_registry** registry /* out */);
MOE_HOST_EXPORT moe_status moe_host_registry_destroy(moe_host_registry* registry /* NULL ok */);

/* One plugin found. Strings and arrays are owned by the registry and live as long as it. */
typedef struct moe_host_plugin_info {
  size_t struct_size; /* in: caller's size; out fields written only where they fit */
  const moe_extension* ext;
  const char* name;           /* out */
  const char* version;        /* out */
  const char* description;    /* out */
  const char* path;           /* out: the library */
  const char* const* aliases; /* out: [num_aliases] */
  int32_t num_aliases;        /* out */
  int32_t priority;           /* out: higher wins under `backend: auto` */
  int32_t memory;             /* out: moe_memory of run-time tensors */
  uint32_t abi_major;         /* out: the plugin's ABI version */
  uint32_t abi_minor;         /* out */
  const char* const* formats; /* out: [num_formats] names of the formats it declares, "bf16"... */
  int32_t num_formats;        /* out */
  const char* const* activations; /* out: [num_activations] names, "silu_mul"... */
  int32_t num_activations;        /* out */
  const char* const* routings;    /* out: [num_routings] routing methods it routes itself */
  int32_t num_routings;           /* out */
  /* Since 1.4: the plugin's decode rule (moe_plugin_info, ABI 1.3). Under `backend: auto` a
   * problem whose max_tokens is <= decode_max_tokens ranks it by decode_priority instead of
   * priority; decode_max_tokens 0 = no rule (so for every plugin older than ABI 1.3). */
  int64_t decode_max_tokens; /* out (first: it starts past a 1.3 struct's tail padding) */
  int32_t decode_priority;   /* out */
  /* Since 1.8: the rule's limit by weight format (moe_plugin_info, ABI 1.5), indexed by
   * moe_format: where nonzero it replaces decode_max_tokens for problems in that format, -1 = no
   * rule there; all 0 for a plugin older than ABI 1.5. */
  int64_t decode_max_tokens_by_format[MOE_DECODE_FORMATS]; /* out */
  /* Since 1.9: what the plugin's run() takes besides a plain run (moe_plugin_info.run_features,
   * the bits its ABI minor defines): MOE_RUN_FEATURE_ACCUMULATE (ABI 1.4: adds into the
   * output), MOE_RUN_FEATURE_ROUTES (ABI 1.6: routes from router_logits in the same call, which
   * moe_host_layer_run passes on); 0 for an older plugin. */
  uint32_t run_features; /* out */
} moe_host_plugin_info;

#define MOE_HOST_PLUGIN_INFO_MIN_SIZE \
  (offsetof(moe_host_plugin_info, num_routings) + sizeof(int32_t))

/* A library that was found and not kept, and why. Strings owned by the registry. */
typedef struct moe_host_skipped_library {
  size_t struct_size;
  const moe_extension* ext;
  const char* path;   /* out */
  const char* reason; /* out */
} moe_host_skipped_library;

#define MOE_HOST_SKIPPED_LIBRARY_MIN_SIZE \
  (offsetof(moe_host_skipped_library, reason) + sizeof(const char*))

/* Plugins in discovery order: index 0 .. count-1. An index out of range is INVALID_ARGUMENT. */
MOE_HOST_EXPORT moe_status moe_host_registry_plugin_count(const moe_host_registry* registry,
                                                          int64_t* count /* out */);
MOE_HOST_EXPORT moe_status moe_host_registry_plugin_info(const moe_host_registry* registry,
                                                         int64_t index,
                                                         moe_host_plugin_info* info /* out */);
MOE_HOST_EXPORT moe_status moe_host_registry_skipped_count(const moe_host_registry* registry,
                                                           int64_t* count /* out */);
MOE_HOST_EXPORT moe_status moe_host_registry_skipped(const moe_host_registry* registry,
                                                     int64_t index,
                                                     moe_host_skipped_library* skipped /* out */);

/* Whether plugin `name` (or alias) supports `problem` (borrowed; normalised and validated
 * first). Loads the plugin. Unknown name: NOT_FOUND. A problem with a value no backend knows (an
 * unknown enum): UNSUPPORTED, with *answer saying so (supported 0, its reason and message). */
MOE_HOST_EXPORT moe_status moe_host_supports(const moe_host_registry* registry, const char* name,
                                             const moe_problem* problem,
                                             moe_support* answer /* out */);

/* `moe describe` as text: the plugin's info; with a problem (NULL = none) whether it supports it,
 * and its prepared layout. Writes at most `cap` bytes, NUL-terminated, into buf (NULL when cap is
 * 0); *needed gets the full length + 1. */
MOE_HOST_EXPORT moe_status moe_host_describe(const moe_host_registry* registry, const char* name,
                                             const moe_problem* problem, char* buf, size_t cap,
                                             size_t* needed /* out */);

/* ---------------------------------------------------------------------------------------------
 * Selection by config (docs/design.md §2 rule 6): the YAML of the files in configs/.
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_host_select_args {
  size_t struct_size;
  const moe_extension* ext;
  const char* config_path; /* borrowed: a YAML file; or NULL and config_text */
  const char* config_text; /* borrowed: the YAML itself; exactly one of the two is set */
  int32_t ask_every;       /* 1 = ask every plugin, to say why not the others (`moe select`);
                              0 = only until one fits, loading only those */
} moe_host_select_args;

#define MOE_HOST_SELECT_ARGS_MIN_SIZE (offsetof(moe_host_select_args, ask_every) + sizeof(int32_t))

/* Selects a backend among the registry's plugins for the config's problem, by its `backend:` and
 * `fallback:`. The config's plugin_dirs are not searched (the registry is open already: pass them
 * to moe_host_registry_open). A bad config is CONFIG_ERROR naming the file, line and column; an
 * unknown backend CONFIG_ERROR listing those available; no fit UNSUPPORTED with every reason. */
MOE_HOST_EXPORT moe_status moe_host_select(const moe_host_registry* registry,
                                           const moe_host_select_args* args,
                                           moe_host_selection** selection /* out */);
MOE_HOST_EXPORT moe_status moe_host_selection_destroy(moe_host_selection* selection /* NULL ok */);

/* What was chosen and why. Everything is owned by the selection and lives as long as it; the
 * problem and options are the config's, ready for moe_host_prepare_args. */
typedef struct moe_host_selection_info {
  size_t struct_size;
  const moe_extension* ext;
  const char* backend;        /* out: the chosen plugin's name */
  const char* rule;           /* out: why it, in words ("named in ...", "auto: ...", "fallback") */
  const char* explanation;    /* out: every plugin's answer, as `moe select` prints it */
  const moe_problem* problem; /* out: the config's problem, normalised */
  const moe_option* options;  /* out: [num_options] the config's `options:` */
  int64_t num_options;        /* out */
  int64_t tokens;             /* out: the config's `tokens:` */
  uint64_t seed;              /* out: the config's `seed:` */
} moe_host_selection_info;

#define MOE_HOST_SELECTION_INFO_MIN_SIZE \
  (offsetof(moe_host_selection_info, seed) + sizeof(uint64_t))

MOE_HOST_EXPORT moe_status moe_host_selection_info_get(const moe_host_selection* selection,
                                                       moe_host_selection_info* info /* out */);

/* ---------------------------------------------------------------------------------------------
 * Layers: prepare, workspace, route, run (the plugin ABI's call order, docs/design.md §2 rule 7).
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_host_prepare_args {
  size_t struct_size;
  const moe_extension* ext;
  const char* backend;        /* borrowed: a plugin name or alias; NULL or "auto" = the supporting
                                 plugin of highest priority; "" is INVALID_ARGUMENT */
  const moe_problem* problem; /* borrowed for the call; the layer keeps a normalised copy */
  const moe_weights* weights; /* borrowed for the call; canonical (§3), in weights_memory */
  const moe_option* options;  /* [num_options] borrowed for the call; NULL if none */
  int64_t num_options;
  void* stream; /* cudaStream_t for uploads (and for copies of device weights), NULL = default */
  /* Since 1.3 (a shorter struct means host weights). Where every tensor of `weights` lives:
   * MOE_MEMORY_HOST, or MOE_MEMORY_CUDA_DEVICE on CUDA device `weights_device` (an engine that
   * loaded its checkpoint onto the GPU). Device weights are copied to the host on `stream` (a
   * stream of that device), waited for, and prepared as host weights: every byte crosses to the
   * host and, for a GPU plugin, back, and the host holds the layer's weights until this returns
   * (docs/design.md §10). Each tensor must be contiguous device memory of weights_device inside
   * one allocation (checked with the driver: INVALID_ARGUMENT or SHAPE_MISMATCH naming it); a GPU
   * plugin prepares on the calling thread's current device, which must be weights_device. The
   * NVIDIA driver is loaded at run time: without one, device weights are NOT_FOUND. */
  int32_t weights_memory; /* moe_memory */
  int32_t weights_device; /* CUDA ordinal, for MOE_MEMORY_CUDA_DEVICE */
} moe_host_prepare_args;

#define MOE_HOST_PREPARE_ARGS_MIN_SIZE (offsetof(moe_host_prepare_args, stream) + sizeof(void*))

/* Selects the backend for the problem (a named one that does not support it is UNSUPPORTED with
 * its reason) and prepares the weights with it. The layer keeps its plugin loaded. */
MOE_HOST_EXPORT moe_status moe_host_layer_prepare(const moe_host_registry* registry,
                                                  const moe_host_prepare_args* args,
                                                  moe_host_layer** layer /* out */);
MOE_HOST_EXPORT moe_status moe_host_layer_destroy(moe_host_layer* layer /* NULL ok */);

typedef struct moe_host_checkpoint_args {
  size_t struct_size;
  const moe_extension* ext;
  const moe_host_selection* selection; /* borrowed for the call: a config with a `checkpoint:` */
  const char* backend; /* borrowed: NULL = the selection's backend; else a plugin name or alias, or
                          "auto", in place of the config's (an engine's --moe-backend); "" is
                          INVALID_ARGUMENT */
  void* stream;        /* cudaStream_t for uploads, NULL = default */
} moe_host_checkpoint_args;

#define MOE_HOST_CHECKPOINT_ARGS_MIN_SIZE \
  (offsetof(moe_host_checkpoint_args, stream) + sizeof(void*))

/* Loads one layer of the selection's `checkpoint:` (path relative to the current directory, as
 * `moe run` reads it) through the checkpoint adapters into canonical host weights, and prepares
 * it with the backend, under the config's problem and options. The checkpoint's router comes with
 * the layer (moe_host_layer_info). A config without `checkpoint:` is CONFIG_ERROR; a tensor
 * missing or of the wrong shape is the adapter's error naming it. Since 1.2. */
MOE_HOST_EXPORT moe_status moe_host_layer_prepare_checkpoint(const moe_host_registry* registry,
                                                             const moe_host_checkpoint_args* args,
                                                             moe_host_layer** layer /* out */);

typedef struct moe_host_layer_info {
  size_t struct_size;
  const moe_extension* ext;
  const char* backend;        /* out: the plugin that prepared it; owned by the layer */
  const char* router;         /* out: the plugin moe_host_layer_route uses, "" if none can */
  const moe_problem* problem; /* out: the layer's problem, owned by the layer */
  int32_t memory;             /* out: moe_memory of the tensors route and run take */
  /* Since 1.2. A layer prepared from a checkpoint (moe_host_layer_prepare_checkpoint) keeps the
   * checkpoint's router, for the caller's router GEMM (docs/design.md §3.4): host memory owned by
   * the layer, data NULL where the checkpoint has none (and for a layer prepared from weights). */
  moe_tensor router_weight; /* out: [E_real + S, H] bf16 or f32; sinks after the real experts */
  moe_tensor router_bias;   /* out: [E_real + S] f32, added to the GEMM's sums (gpt-oss) */
  moe_tensor routing_bias;  /* out: [E] f32 selection bias for route (padding experts -inf) */
  int64_t real_experts;     /* out: the checkpoint's experts (problem.experts may pad for EP);
                               0 = not from a checkpoint */
  const char* router_dtype; /* out: "bf16" or "fp32", the GEMM's precision; "" = not from one */
  const char* weights_from; /* out: "checkpoint PATH (CONVENTION)[; converted at load: ...]",
                               or "weights" */
} moe_host_layer_info;

#define MOE_HOST_LAYER_INFO_MIN_SIZE (offsetof(moe_host_layer_info, memory) + sizeof(int32_t))

MOE_HOST_EXPORT moe_status moe_host_layer_info_get(const moe_host_layer* layer,
                                                   moe_host_layer_info* info /* out */);

/* Workspace bytes moe_host_layer_run needs for `tokens` (<= the problem's max_tokens, else
 * CAPACITY_EXCEEDED). */
MOE_HOST_EXPORT moe_status moe_host_layer_workspace_size(const moe_host_layer* layer,
                                                         int64_t tokens, size_t* bytes /* out */);
/* Workspace bytes moe_host_layer_route needs for `tokens`. */
MOE_HOST_EXPORT moe_status moe_host_layer_route_workspace_size(const moe_host_layer* layer,
                                                               int64_t tokens,
                                                               size_t* bytes /* out */);

/* route, run and alloc of a GPU layer need the device current at prepare current on the calling
 * thread (INVALID_ARGUMENT naming both devices otherwise, before any work). */

/* Routes one batch as moe_route_args says (tensors in the layer's memory), with the layer's plugin
 * when it routes the problem, else (host-memory layers) with the reference; a device layer whose
 * plugin does not route it is UNSUPPORTED. args->problem: NULL = the layer's; another routing
 * given there must keep the layer's experts, top_k and sink_experts (INVALID_ARGUMENT otherwise). */
MOE_HOST_EXPORT moe_status moe_host_layer_route(const moe_host_layer* layer,
                                                const moe_route_args* args);

/* Runs the layer as moe_run_args says; args->layer is ignored (the handle's layer is used). More
 * tokens than max_tokens is CAPACITY_EXCEEDED. Tensors live in the layer's memory. With
 * router_logits (ABI 1.6) the plugin routes the batch itself into topk_ids and topk_weights
 * first: UNSUPPORTED where it does not route the problem in run() (route with
 * moe_host_layer_route, then run). */
MOE_HOST_EXPORT moe_status moe_host_layer_run(const moe_host_layer* layer,
                                              const moe_run_args* args);

/* Memory of the layer's kind (device memory for a CUDA plugin, plain host memory otherwise),
 * through its plugin: for the tensors and workspaces of route and run. Copies run on the default
 * stream; sync waits for `stream` (NULL = the default stream). */
MOE_HOST_EXPORT moe_status moe_host_layer_alloc(const moe_host_layer* layer, size_t bytes,
                                                void** ptr /* out, moe_host_layer_free */);
MOE_HOST_EXPORT moe_status moe_host_layer_free(const moe_host_layer* layer, void* ptr);
MOE_HOST_EXPORT moe_status moe_host_layer_copy(const moe_host_layer* layer, void* dst,
                                               const void* src, size_t bytes,
                                               int32_t kind /* moe_memcpy_kind */);
MOE_HOST_EXPORT moe_status moe_host_layer_sync(const moe_host_layer* layer, void* stream);

/* ---------------------------------------------------------------------------------------------
 * Expert parallelism (docs/design.md §4, README "Expert parallelism") over an NCCL communicator
 * the caller made and owns: an engine's (vLLM's PyNcclCommunicator.comm, ...). Since 1.3.
 * NCCL is loaded at run time: $MOE_NCCL_LIBRARY, else libnccl.so.2, which must be the library
 * that made the communicator (a process that loaded one already gets that one by its soname).
 * A libmoe_core built without the CUDA toolkit's headers answers UNSUPPORTED here.
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_host_ep_group_args {
  size_t struct_size;
  const moe_extension* ext;
  void* nccl_comm; /* borrowed: an initialised ncclComm_t, owned by the caller, who destroys it
                      after the group; the group never destroys nor aborts it */
  const moe_host_layer* layer; /* borrowed for the call: a layer of this rank's EP problem, from a
                                  device-memory plugin; the communicator's rank and size must be
                                  its ep_rank and ep_size */
  double timeout_s;            /* each exchange's deadline; <= 0: 120 */
} moe_host_ep_group_args;

#define MOE_HOST_EP_GROUP_ARGS_MIN_SIZE \
  (offsetof(moe_host_ep_group_args, timeout_s) + sizeof(double))

/* Takes the caller's communicator for expert-parallel steps. nccl_comm NULL: INVALID_ARGUMENT; its
 * rank or size other than the layer's ep_rank and ep_size: CONFIG_ERROR naming both; on another
 * device than the calling thread's current one: INVALID_ARGUMENT. Then every rank checks that all
 * run the same problem and backend (CONFIG_ERROR otherwise): a collective, so every rank of the
 * communicator calls this at the same point. */
MOE_HOST_EXPORT moe_status moe_host_ep_group_create(const moe_host_ep_group_args* args,
                                                    moe_host_ep_group** group /* out */);
/* Destroys the group, never its communicator. */
MOE_HOST_EXPORT moe_status moe_host_ep_group_destroy(moe_host_ep_group* group /* NULL ok */);

/* This rank's place in the group (from the communicator). */
MOE_HOST_EXPORT moe_status moe_host_ep_group_rank(const moe_host_ep_group* group,
                                                  int32_t* rank /* out */,
                                                  int32_t* world /* out */);

typedef struct moe_host_ep_step_args {
  size_t struct_size;
  const moe_extension* ext;
  const moe_host_layer* layer; /* borrowed: this rank's experts (its problem's ep_rank and ep_size
                                  are the group's) */
  moe_tensor hidden;           /* [T, H] bf16, host memory: this rank's tokens (T may be 0) */
  moe_tensor topk_ids;         /* [T, k + S] int32, host: global expert ids, -1 = skip */
  moe_tensor topk_weights;     /* [T, k + S] f32, host */
  moe_tensor output;           /* out: [T, H] bf16, host */
} moe_host_ep_step_args;

#define MOE_HOST_EP_STEP_ARGS_MIN_SIZE \
  (offsetof(moe_host_ep_step_args, output) + sizeof(moe_tensor))

/* One expert-parallel layer step: each token goes to the ranks that own its experts, they run
 * them with their layers, and the results come back and are summed in rank order (sink experts on
 * the token's home rank). Tensors are host memory; the exchanges run through the layer's device
 * memory on the legacy default stream, and the call returns when the output is written. A
 * collective: every rank of the group calls it for its layer of the same problem, in the same
 * order. group NULL: a single rank (ep_size 1), without NCCL, for any plugin. */
MOE_HOST_EXPORT moe_status moe_host_ep_step(moe_host_ep_group* group /* NULL: one rank */,
                                            const moe_host_ep_step_args* args);

/* Since 1.5: the EP step that stays on the device (docs/design.md §4, "Two EP steps"): every
 * rank's tokens, ids and weights all-gathered, the rank's layer on all of them, a bf16
 * reduce-scatter back, all enqueued on the caller's stream with no host work in between and no
 * allocation per step (a stream may capture it in a CUDA graph). A shared expert split off at
 * prepare then runs on the rank's own tokens and is added into the output, and so do sink
 * experts (a home pass with the routed ids cleared on the device), for a plugin that declares
 * MOE_RUN_FEATURE_ACCUMULATE (ABI 1.4; others: UNSUPPORTED). Every rank runs the same batch size
 * (pad with ids -1), unless the step is ragged (since 1.6). */
typedef struct moe_host_ep_device_step moe_host_ep_device_step;

typedef struct moe_host_ep_device_step_args {
  size_t struct_size;
  const moe_extension* ext;
  const moe_host_layer* layer; /* borrowed for the step's life: this rank's experts */
  int64_t max_tokens;          /* the most tokens a rank steps; buffers are made for it (>= 1) */
  /* Since 1.6 (0 where the caller's struct ends before it): 1 = the ranks may step different
   * batch sizes, 0 included; the step pads each rank's rows to max_tokens on the device, so the
   * exchanges move max_tokens rows a rank. Every rank of the group makes its step alike. */
  int32_t ragged;
  /* Since 1.7 (0 where the caller's struct ends before it; 0 and 1: one chunk): the rows a rank
   * sends cut into this many chunks (at most max_tokens and 64), each gathered, run and
   * reduce-scattered on its own, the collectives on a stream of the step's own so that they
   * overlap the other chunks' layer runs. Every rank of the group takes the same. */
  int64_t chunks;
} moe_host_ep_device_step_args;

#define MOE_HOST_EP_DEVICE_STEP_ARGS_MIN_SIZE \
  (offsetof(moe_host_ep_device_step_args, max_tokens) + sizeof(int64_t))

/* Makes the step's buffers in the layer's device memory. group NULL: one rank (ep_size 1); else
 * borrowed for the step's life. */
MOE_HOST_EXPORT moe_status moe_host_ep_device_step_create(
    moe_host_ep_group* group /* NULL: one rank */, const moe_host_ep_device_step_args* args,
    moe_host_ep_device_step** step /* out */);
MOE_HOST_EXPORT moe_status moe_host_ep_device_step_destroy(moe_host_ep_device_step* step
                                                           /* NULL ok */);

typedef struct moe_host_ep_device_run_args {
  size_t struct_size;
  const moe_extension* ext;
  moe_tensor hidden;       /* [T, H] bf16, the layer's device memory: this rank's tokens */
  moe_tensor topk_ids;     /* [T, k] int32, device: global expert ids, -1 = skip */
  moe_tensor topk_weights; /* [T, k] f32, device */
  moe_tensor output;       /* out: [T, H] bf16, device */
  void* stream;            /* cudaStream_t the step is enqueued on; NULL: the default stream */
} moe_host_ep_device_run_args;

#define MOE_HOST_EP_DEVICE_RUN_ARGS_MIN_SIZE \
  (offsetof(moe_host_ep_device_run_args, stream) + sizeof(void*))

/* Enqueues one step and returns: the output is ready when `stream` is (moe_host_layer_sync). A
 * collective: every rank runs its step in the same order, with the same T unless the step is
 * ragged; T past max_tokens is CAPACITY_EXCEEDED naming both. */
MOE_HOST_EXPORT moe_status moe_host_ep_device_step_run(const moe_host_ep_device_step* step,
                                                       const moe_host_ep_device_run_args* args);

/* ---------------------------------------------------------------------------------------------
 * Conformance (docs/design.md §7): one plugin library against the reference.
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_host_conformance_args {
  size_t struct_size;
  const moe_extension* ext;
  const char* plugin_path;  /* borrowed: the library to test (added to a copy of the registry) */
  const char* problems_dir; /* borrowed: problem files (*.yaml; none there: NOT_FOUND); NULL =
                               the installed set beside this library, or the source tree's
                               configs/problems for the build's */
  const char* report_path;  /* borrowed: write the JSON report here; NULL = none */
  uint64_t seed;            /* of the random inputs; 0 = a fresh one (summary.seed says which) */
  int32_t gpu_sized;        /* 1 = also the gpu_sized problems, against gpu_oracle */
} moe_host_conformance_args;

#define MOE_HOST_CONFORMANCE_ARGS_MIN_SIZE \
  (offsetof(moe_host_conformance_args, gpu_sized) + sizeof(int32_t))

/* Counts as `moe conformance` prints them: pass counts real passes only. */
typedef struct moe_host_conformance_summary {
  size_t struct_size;
  const moe_extension* ext;
  int32_t pass;  /* out */
  int32_t fail;  /* out: compared and wrong */
  int32_t error; /* out: the plugin or the oracle raised an error */
  int32_t skip;  /* out */
  int32_t empty; /* out: T = 0, nothing compared */
  int32_t self;  /* out: the plugin is its own oracle */
  uint64_t seed; /* out: the seed used */
} moe_host_conformance_summary;

#define MOE_HOST_CONFORMANCE_SUMMARY_MIN_SIZE \
  (offsetof(moe_host_conformance_summary, seed) + sizeof(uint64_t))

/* Runs the suite; failing cases are counted, not an error (the status is OK). */
MOE_HOST_EXPORT moe_status moe_host_conformance(const moe_host_registry* registry,
                                                const moe_host_conformance_args* args,
                                                moe_host_conformance_summary* summary /* out */);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MOE_HOST_H_ */
