/* moe-registry C ABI: the one contract between the core and every backend plugin.
 *
 * Versioning (docs/design.md §2):
 *  - MAJOR changes when anything already published changes meaning, size below a struct's
 *    MIN size, order of the function table, or an enum value. The core refuses a plugin of
 *    another MAJOR.
 *  - MINOR changes when something is appended: a field at the end of a struct, an entry at the
 *    end of the function table, a new enum value. Old and new sides keep working together.
 *
 * Struct rules:
 *  - Every struct that crosses starts with `struct_size` and `ext`: a chain of typed extension
 *    structs (moe_extension, below), NULL if none.
 *  - A callee accepts any `struct_size >= MOE_<STRUCT>_MIN_SIZE` (the size at MAJOR.0) and reads a
 *    field only when `struct_size` covers it (MOE_STRUCT_HAS); fields beyond it keep their
 *    documented defaults. Larger structs from newer callers are accepted; their tail is ignored.
 *  - Output structs are caller-allocated: the callee writes only the fields that fit.
 *  - `moe_tensor` is a frozen value type (no struct_size): it is embedded in other structs, so it
 *    can only change with a MAJOR bump.
 *
 * Function-table rules:
 *  - Entries are only appended, each in a MINOR release; a caller reads an entry only when the
 *    table's struct_size covers it, and an optional entry may be NULL.
 *  - Every entry appended from ABI 1.2 on takes exactly one args struct (struct_size first, ext
 *    second) and returns moe_status, so it can grow by appending fields without a MAJOR bump.
 *    (The positional entries of 1.0 and 1.1 stay as they are.)
 *
 * Enum values: a plugin may be handed a value newer than the header it was built with. It must
 * refuse it, never treat it as a known one: supports() answers no with the matching reason
 * (format, input_format, activation, routing, ep), every other entry returns UNSUPPORTED.
 *
 * Errors: every entry returns moe_status. On failure the plugin keeps a message for the calling
 * thread, read with `last_error()`. No C++ exception ever crosses this boundary.
 */
#ifndef MOE_ABI_H_
#define MOE_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_ABI_VERSION_MAJOR 1
#define MOE_ABI_VERSION_MINOR 6
/* 1.1: benchmark() appended to the function table.
 * 1.2: typed extension chains (moe_extension), an ext chain and shutdown() appended to the function
 *      table, moe_support.routes, moe_build_info; the *_COUNT_ enumerators left the enums. Binary
 *      layouts are unchanged. Source notes: `ext` is now typed (const moe_extension*; C++ code
 *      that assigned a void* casts), and *_COUNT_ are macros, not enum values.
 * 1.3: moe_plugin_info.decode_max_tokens and decode_priority: a priority of its own for layers of
 *      small max_tokens under `backend: auto`.
 * 1.4: moe_run_args.accumulate (the layer's result added into the output) and
 *      moe_plugin_info.run_features, where a plugin declares that it honours it.
 * 1.5: moe_plugin_info.decode_max_tokens_by_format: the decode rule's limit per weight format.
 * 1.6: moe_run_args.router_logits, routing_bias and is_padding (routing in the run call) and
 *      MOE_RUN_FEATURE_ROUTES, where a plugin declares that it honours them. */

/* The one symbol a plugin exports (extern "C", default visibility). */
#define MOE_PLUGIN_ENTRY_SYMBOL "moe_plugin_get_api"

#if defined(_WIN32)
#define MOE_PLUGIN_EXPORT __declspec(dllexport)
#else
#define MOE_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* True when the struct at `ptr` (of C type `type`) is large enough to hold `field`. */
#define MOE_STRUCT_HAS(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* ---------------------------------------------------------------------------------------------
 * Enumerations. Values are fixed forever; new values are appended (MINOR).
 * ------------------------------------------------------------------------------------------- */

typedef enum moe_status {
  MOE_STATUS_OK = 0,
  MOE_STATUS_INVALID_ARGUMENT = 1,  /* NULL pointer, bad enum, inconsistent fields */
  MOE_STATUS_UNSUPPORTED = 2,       /* valid, but this plugin cannot do it */
  MOE_STATUS_SHAPE_MISMATCH = 3,    /* a tensor's shape does not match the problem */
  MOE_STATUS_DTYPE_MISMATCH = 4,    /* a tensor's dtype does not match the problem */
  MOE_STATUS_CAPACITY_EXCEEDED = 5, /* more tokens than max_tokens, workspace too small */
  MOE_STATUS_ABI_MISMATCH = 6,      /* struct_size below minimum, ABI major differs */
  MOE_STATUS_OUT_OF_MEMORY = 7,
  MOE_STATUS_DEVICE_ERROR = 8, /* CUDA or driver error */
  MOE_STATUS_INTERNAL = 9,     /* a bug: an exception or invariant violation in the plugin */
  MOE_STATUS_NOT_FOUND = 10,   /* a file, symbol, plugin or tensor that does not exist */
  MOE_STATUS_IO_ERROR = 11,
  MOE_STATUS_CONFIG_ERROR = 12, /* a YAML or option error */
} moe_status;

typedef enum moe_dtype {
  MOE_DTYPE_INVALID = 0,
  MOE_DTYPE_BF16 = 1,
  MOE_DTYPE_F16 = 2,
  MOE_DTYPE_F32 = 3,
  MOE_DTYPE_F64 = 4,
  MOE_DTYPE_E4M3 = 5,   /* float8 e4m3fn: no inf, 0x7f/0xff NaN, max 448 */
  MOE_DTYPE_E2M1X2 = 6, /* two fp4 e2m1 per byte, low nibble = lower index; shape counts bytes */
  MOE_DTYPE_UE8M0 = 7,  /* 2^(x-127), 0xff NaN */
  MOE_DTYPE_I32 = 8,
  MOE_DTYPE_I64 = 9,
  MOE_DTYPE_U8 = 10,
  MOE_DTYPE_I8 = 11,
} moe_dtype;

/* Expert weight format (docs/design.md §3). */
typedef enum moe_format {
  MOE_FORMAT_BF16 = 0,
  MOE_FORMAT_FP8_TENSOR = 1, /* e4m3, fp32 scale per expert and matrix */
  MOE_FORMAT_FP8_BLOCK = 2,  /* e4m3, fp32 scale per 128x128 block */
  MOE_FORMAT_MXFP8 = 3,      /* e4m3, ue8m0 per 32 along K */
  MOE_FORMAT_MXFP4 = 4,      /* e2m1x2, ue8m0 per 32 along K */
  MOE_FORMAT_NVFP4 = 5,      /* e2m1x2, e4m3 per 16 along K, fp32 per-expert scale_2 */
} moe_format;

/* How activations (the hidden states into GEMM1 and the intermediate into GEMM2) are quantised
 * at run time. The reference quantises exactly this way, so a backend is checked against it. */
typedef enum moe_input_format {
  MOE_INPUT_DEFAULT = 0,            /* the format's natural choice (see moe_problem) */
  MOE_INPUT_BF16 = 1,               /* no quantisation */
  MOE_INPUT_FP8_TENSOR_DYNAMIC = 2, /* e4m3, one fp32 scale = amax/448 over the whole batch */
  MOE_INPUT_FP8_TENSOR_STATIC = 3,  /* e4m3, fp32 scales from the weights (a13_scale, a2_scale) */
  MOE_INPUT_FP8_1X128 = 4,          /* e4m3, fp32 scale per token per 128 channels */
  MOE_INPUT_MXFP8 = 5,              /* e4m3, ue8m0 scale per token per 32 channels */
} moe_input_format;

/* Gated activations read GEMM1's output as [gate | up] (docs/design.md §5). */
typedef enum moe_activation {
  MOE_ACTIVATION_SILU_MUL = 0,       /* silu(g) * u */
  MOE_ACTIVATION_SILU_MUL_CLAMP = 1, /* silu(min(g, L)) * clamp(u, -L, L) */
  MOE_ACTIVATION_SWIGLU_OAI = 2,     /* g=min(g,L), u=clamp(u,-L,L), (u+1)*g*sigmoid(alpha*g) */
  MOE_ACTIVATION_GELU_MUL = 3,       /* gelu(g) * u, erf form unless gelu_tanh */
  MOE_ACTIVATION_RELU2 = 4,          /* relu(x)^2, not gated: w13 is [E, I, H] */
} moe_activation;

typedef enum moe_routing {
  MOE_ROUTING_SOFTMAX_TOPK = 0,
  MOE_ROUTING_SIGMOID_TOPK = 1,
  MOE_ROUTING_GROUPED_TOPK = 2,      /* DeepSeek-V3 noaux_tc */
  MOE_ROUTING_SIGMOID_BIAS_SINK = 3, /* Inkling: routed + sink experts, log-sigmoid weights */
} moe_routing;

typedef enum moe_score_function {
  MOE_SCORE_SIGMOID = 0,
  MOE_SCORE_SOFTMAX = 1,
} moe_score_function;

/* Expert-parallel placement: which global experts this rank holds. */
typedef enum moe_ep_placement {
  MOE_EP_NONE = 0,        /* every expert is local */
  MOE_EP_LINEAR = 1,      /* rank r holds the contiguous range [r*L, (r+1)*L) */
  MOE_EP_ROUND_ROBIN = 2, /* rank r holds experts e with e % ep_size == r */
} moe_ep_placement;

/* Where a plugin's run-time tensors live. */
typedef enum moe_memory {
  MOE_MEMORY_HOST = 0,
  MOE_MEMORY_CUDA_DEVICE = 1,
} moe_memory;

/* Closed set of reasons a plugin gives for not supporting a problem. */
typedef enum moe_reason {
  MOE_REASON_NONE = 0,
  MOE_REASON_FORMAT = 1,       /* weight format */
  MOE_REASON_INPUT_FORMAT = 2, /* activation quantisation */
  MOE_REASON_ACTIVATION = 3,
  MOE_REASON_ROUTING = 4,
  MOE_REASON_SHAPE = 5,  /* E, k, H, I not supported (alignment, limits) */
  MOE_REASON_ARCH = 6,   /* no suitable device */
  MOE_REASON_EP = 7,     /* expert-parallel placement or EPLB */
  MOE_REASON_BIAS = 8,   /* expert biases */
  MOE_REASON_SHARED = 9, /* shared or sink experts */
  MOE_REASON_MAX_TOKENS = 10,
  MOE_REASON_OTHER = 11,
} moe_reason;

typedef enum moe_log_level {
  MOE_LOG_TRACE = 0,
  MOE_LOG_DEBUG = 1,
  MOE_LOG_INFO = 2,
  MOE_LOG_WARN = 3,
  MOE_LOG_ERROR = 4,
} moe_log_level;

typedef enum moe_memcpy_kind {
  MOE_MEMCPY_HOST_TO_DEVICE = 0,
  MOE_MEMCPY_DEVICE_TO_HOST = 1,
  MOE_MEMCPY_DEVICE_TO_DEVICE = 2,
} moe_memcpy_kind;

/* Deprecated (1.2): how many values of an enum this header knows. Not a capability: a mask built
 * from it claims values the plugin has never seen. Declare capabilities as explicit lists. */
#define MOE_FORMAT_COUNT_ 6
#define MOE_INPUT_COUNT_ 6
#define MOE_ACTIVATION_COUNT_ 5
#define MOE_ROUTING_COUNT_ 4

/* ---------------------------------------------------------------------------------------------
 * Extensions (ABI 1.2). Every extension struct begins with a moe_extension header; the `ext`
 * field of a struct (and of the function table) points at the first of a chain of them. A reader
 * walks `next`, uses the types it knows and skips the others. A chain entry whose struct_size is
 * below sizeof(moe_extension), or a chain longer than MOE_EXTENSION_MAX_CHAIN, is refused with
 * INVALID_ARGUMENT. Extensions are owned by whoever owns the struct that points at them, and
 * live as long as it.
 * ------------------------------------------------------------------------------------------- */

typedef enum moe_extension_type {
  MOE_EXT_NONE = 0,
  MOE_EXT_BUILD_INFO = 1, /* moe_build_info, on the function table's chain */
} moe_extension_type;

#define MOE_EXTENSION_MAX_CHAIN 64

typedef struct moe_extension {
  size_t struct_size;               /* of the whole extension struct that begins with this header */
  int32_t type;                     /* moe_extension_type */
  const struct moe_extension* next; /* NULL ends the chain */
} moe_extension;

/* ---------------------------------------------------------------------------------------------
 * Value types.
 * ------------------------------------------------------------------------------------------- */

#define MOE_TENSOR_MAX_DIMS 6

/* A view of memory owned by the caller. Frozen layout (no struct_size); see the header note. */
typedef struct moe_tensor {
  void* data;    /* borrowed; NULL = tensor absent */
  int32_t dtype; /* moe_dtype */
  int32_t ndim;  /* 0..MOE_TENSOR_MAX_DIMS */
  int64_t shape[MOE_TENSOR_MAX_DIMS];
  int64_t strides[MOE_TENSOR_MAX_DIMS]; /* in elements; all 0 = contiguous row-major */
} moe_tensor;

typedef struct moe_option {
  const char* key;   /* borrowed, NUL-terminated */
  const char* value; /* borrowed, NUL-terminated */
} moe_option;

/* ---------------------------------------------------------------------------------------------
 * The problem: everything a plugin needs to decide support and size its workspace. YAML keys in
 * config files equal these field names.
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_problem {
  size_t struct_size;       /* = sizeof(moe_problem) of the caller */
  const moe_extension* ext; /* extension chain, NULL if none */

  int64_t experts;      /* E: routed experts, global count (EP padding included) */
  int64_t top_k;        /* k routed experts per token */
  int64_t hidden;       /* H */
  int64_t intermediate; /* I, per routed expert */

  int32_t format;       /* moe_format of w13 and w2 */
  int32_t input_format; /* moe_input_format; DEFAULT = the format's natural choice */

  int32_t activation;     /* moe_activation */
  int32_t gelu_tanh;      /* gelu_mul: 0 = erf form, 1 = tanh form */
  float activation_alpha; /* swiglu_oai alpha (1.702) */
  float activation_limit; /* L of silu_mul_clamp and swiglu_oai (7.0 for gpt-oss) */

  int32_t routing;             /* moe_routing */
  int32_t renormalize;         /* divide the top-k weights by their sum */
  int32_t score_function;      /* grouped_topk: moe_score_function */
  int32_t routing_bias;        /* 1 = a per-expert fp32 selection bias [E] is given */
  int64_t num_groups;          /* grouped_topk: expert groups (n_group) */
  int64_t topk_group;          /* grouped_topk: groups kept */
  float routed_scaling_factor; /* grouped_topk: multiplies the weights (1.0 = none) */
  float route_scale;           /* sigmoid_bias_sink: weight multiplier */
  float global_scale;          /* sigmoid_bias_sink: weight multiplier */

  int32_t expert_bias; /* 1 = b13 [E, 2I] and b2 [E, H] are given */

  /* Shared and sink experts run for every token given to run(). Under EP each rank computes
   * them for the tokens it is given, so an EP layer must give each token's shared/sink work to
   * one rank only. */
  int64_t shared_intermediate; /* weight-1 shared expert MLP (layer format); 0 = none */
  int64_t sink_experts;        /* S sink experts (bf16, silu_mul), ids E..E+S-1; 0 = none */
  int64_t sink_intermediate;   /* intermediate size of each sink expert */

  int32_t ep_placement;        /* moe_ep_placement */
  int32_t ep_size;             /* ranks; 1 without EP */
  int32_t ep_rank;             /* this rank */
  int32_t redundant_experts;   /* EPLB replicas; > 0 is refused until a backend implements it */
  int64_t local_experts;       /* experts on this rank (E / ep_size with EP, else E) */
  int64_t local_expert_offset; /* linear placement: first global expert on this rank */
  const int32_t* ep_map; /* [E] global -> local id or -1; borrowed for the call; NULL = no EP */

  int64_t max_tokens; /* most tokens one run may take; sizes fused kernels and workspace */
} moe_problem;

#define MOE_PROBLEM_MIN_SIZE (offsetof(moe_problem, max_tokens) + sizeof(int64_t))

/* Width of topk_ids / topk_weights: k routed columns, then one column per sink expert. */
#define MOE_TOPK_WIDTH(problem) ((problem)->top_k + (problem)->sink_experts)

/* ---------------------------------------------------------------------------------------------
 * Canonical weights (docs/design.md §3), always host memory, borrowed for the prepare call only.
 * With EP the routed-expert tensors hold this rank's `local_experts` experts in local order.
 * Gated: w13 [E, 2I, H] rows [gate; up]; relu2: w13 [E, I, H]. w2 [E, H, I]. K contiguous.
 * ------------------------------------------------------------------------------------------- */

typedef struct moe_weights {
  size_t struct_size;
  const moe_extension* ext;

  moe_tensor w13;         /* bf16 | e4m3 | e2m1x2 ([E, 2I, H/2] bytes) */
  moe_tensor w13_scale;   /* fp8_tensor [E] f32; fp8_block [E, 2I/128, H/128] f32;
                             mxfp8/mxfp4 [E, 2I, H/32] ue8m0; nvfp4 [E, 2I, H/16] e4m3 */
  moe_tensor w13_scale_2; /* nvfp4 [E] f32, else absent */
  moe_tensor w2;          /* [E, H, I] like w13 */
  moe_tensor w2_scale;
  moe_tensor w2_scale_2;
  moe_tensor b13;       /* [E, 2I] bf16|f32, present iff problem.expert_bias */
  moe_tensor b2;        /* [E, H] bf16|f32 */
  moe_tensor a13_scale; /* fp8_tensor_static: [1] f32 scale of the hidden states */
  moe_tensor a2_scale;  /* fp8_tensor_static: [1] f32 scale of the intermediate */

  moe_tensor shared_w13; /* [2Is, H] in the layer format, present iff shared_intermediate */
  moe_tensor shared_w13_scale;
  moe_tensor shared_w13_scale_2;
  moe_tensor shared_w2; /* [H, Is] */
  moe_tensor shared_w2_scale;
  moe_tensor shared_w2_scale_2;

  moe_tensor sink_w13; /* [S, 2Is, H] bf16, present iff sink_experts */
  moe_tensor sink_w2;  /* [S, H, Is] bf16 */
} moe_weights;

#define MOE_WEIGHTS_MIN_SIZE (offsetof(moe_weights, sink_w2) + sizeof(moe_tensor))

/* ---------------------------------------------------------------------------------------------
 * Calls.
 * ------------------------------------------------------------------------------------------- */

/* Host services the core hands to a plugin at init. Lives until the process exits. */
typedef void (*moe_log_fn)(void* user, int32_t level, const char* plugin, const char* message);

typedef struct moe_host_api {
  size_t struct_size;
  const moe_extension* ext;
  uint32_t core_abi_major;
  uint32_t core_abi_minor;
  moe_log_fn log;    /* may be NULL; thread-safe; message borrowed for the call */
  void* log_user;    /* passed back to log */
  int32_t log_level; /* moe_log_level: messages below it are not wanted */
} moe_host_api;

#define MOE_HOST_API_MIN_SIZE (offsetof(moe_host_api, log_level) + sizeof(int32_t))

/* moe_plugin_info.decode_max_tokens_by_format's entries (ABI 1.5): one per bit of format_mask. */
#define MOE_DECODE_FORMATS 32

/* Static description of a plugin. Strings are owned by the plugin and live while it is loaded. */
typedef struct moe_plugin_info {
  size_t struct_size; /* in: caller's size; out fields written only where they fit */
  const moe_extension* ext;
  const char* name;           /* out: unique, [a-z0-9_]+ */
  const char* version;        /* out: free form */
  const char* description;    /* out: one line */
  const char* const* aliases; /* out: other names it answers to (e.g. vLLM moe_backend names) */
  int32_t num_aliases;        /* out */
  int32_t priority;           /* out: higher wins under `backend: auto` (see decode_priority) */
  int32_t memory;             /* out: moe_memory of run-time tensors */
  uint32_t format_mask;       /* out: bit (1 << moe_format) per format it may support */
  uint32_t activation_mask;   /* out: bit per moe_activation */
  uint32_t routing_mask;      /* out: bit per moe_routing it can route itself (0 = none) */
  /* ---- ABI 1.3 ---- */
  /* out: a decode rule for `backend: auto`. A problem whose max_tokens (the layer's batch
   * capacity, fixed at prepare) is <= decode_max_tokens ranks this plugin by decode_priority
   * instead of priority. decode_max_tokens 0 = no rule (decode_priority unused); negative is
   * refused by the core. Callers preset both to 0: an older plugin leaves them, meaning no rule. */
  int64_t decode_max_tokens;
  int32_t decode_priority;
  /* ---- ABI 1.4 ---- */
  /* out: MOE_RUN_FEATURE_* bits, what run() honours beyond the 1.0 arguments. It sits in what
   * was a 1.3 struct's tail padding, so a caller reads it only from a plugin whose function table
   * says ABI >= 1.4, and asks any other plugin for none of the features (an older plugin never
   * reads the fields that ask). */
  uint32_t run_features;
  /* ---- ABI 1.5 ---- */
  /* out: the decode rule's limit per weight format, indexed by moe_format (format_mask's bits): a
   * problem in format f compares its max_tokens with decode_max_tokens_by_format[f] where that is
   * nonzero, with decode_max_tokens where it is 0; -1 = no decode rule in format f. So a kernel
   * that wins up to larger batches in one format than in another says so (decode_priority is
   * shared). Below -1 is refused by the core. Callers preset every entry to 0: an older plugin
   * leaves them, meaning decode_max_tokens in every format. */
  int64_t decode_max_tokens_by_format[MOE_DECODE_FORMATS];
} moe_plugin_info;

/* run() honours moe_run_args.accumulate. */
#define MOE_RUN_FEATURE_ACCUMULATE (1u << 0)
/* run() honours moe_run_args.router_logits (ABI 1.6): it routes the batch itself. */
#define MOE_RUN_FEATURE_ROUTES (1u << 1)

#define MOE_PLUGIN_INFO_MIN_SIZE (offsetof(moe_plugin_info, routing_mask) + sizeof(uint32_t))

/* Answer of supports(). */
#define MOE_SUPPORT_MESSAGE_CAP 256
typedef struct moe_support {
  size_t struct_size;
  const moe_extension* ext;
  int32_t supported;                     /* out: 1 yes, 0 no */
  int32_t reason;                        /* out: moe_reason, NONE when supported */
  char message[MOE_SUPPORT_MESSAGE_CAP]; /* out: one sentence, NUL-terminated */
  /* ---- ABI 1.2 ---- */
  int32_t routes; /* out: 1 = route() takes this very problem, 0 = it does not (the host routes
                     elsewhere). Callers preset -1: a 1.1 plugin leaves it, and routing_mask
                     answers instead. */
} moe_support;

#define MOE_SUPPORT_MIN_SIZE (offsetof(moe_support, message) + MOE_SUPPORT_MESSAGE_CAP)

/* Opaque objects, created and destroyed by the plugin that made them. */
typedef struct moe_layer moe_layer;

typedef struct moe_prepare_args {
  size_t struct_size;
  const moe_extension* ext;
  const moe_problem* problem; /* borrowed for the call; the layer keeps its own copy */
  const moe_weights* weights; /* borrowed for the call; host memory */
  const moe_option* options;  /* borrowed for the call; YAML `options:` */
  int64_t num_options;
  void* stream; /* cudaStream_t for uploads, NULL = default */
} moe_prepare_args;

#define MOE_PREPARE_ARGS_MIN_SIZE (offsetof(moe_prepare_args, stream) + sizeof(void*))

/* Routes one batch: logits in, ids and weights out, on `stream`. */
typedef struct moe_route_args {
  size_t struct_size;
  const moe_extension* ext;
  const moe_problem* problem; /* borrowed for the call */
  moe_tensor logits;          /* [T, E + S] f32 */
  moe_tensor bias;            /* [E] f32 selection bias, iff problem.routing_bias */
  moe_tensor is_padding;      /* [T] u8, optional: 1 = padding token, all its ids -1 */
  moe_tensor topk_ids;        /* out: [T, k + S] i32, -1 = no expert */
  moe_tensor topk_weights;    /* out: [T, k + S] f32 */
  void* workspace;            /* >= route_workspace_size bytes, caller-owned; NULL if 0 */
  size_t workspace_size;
  void* stream; /* cudaStream_t, NULL = default stream */
} moe_route_args;

#define MOE_ROUTE_ARGS_MIN_SIZE (offsetof(moe_route_args, stream) + sizeof(void*))

/* Runs one MoE layer on `stream`. Tensors are owned by the caller, live in the plugin's
 * memory (moe_plugin_info.memory), and must stay valid until the stream reaches this point. */
typedef struct moe_run_args {
  size_t struct_size;
  const moe_extension* ext;
  moe_layer* layer;        /* borrowed */
  moe_tensor hidden;       /* [T, H] bf16 */
  moe_tensor topk_ids;     /* [T, k + S] i32, global expert ids, -1 = skip */
  moe_tensor topk_weights; /* [T, k + S] f32 */
  moe_tensor output;       /* out: [T, H] bf16 */
  void* workspace;         /* >= layer_workspace_size(layer, T) bytes, caller-owned */
  size_t workspace_size;
  void* stream; /* cudaStream_t, NULL = default stream */
  /* ---- ABI 1.4 ---- */
  /* 0: output = the layer's result. 1: output = output + the layer's result, the old bf16 value
   * and the result summed in at least fp32 and rounded to bf16 once (an expert-parallel step adds
   * its shared expert this way). Only for a plugin whose run_features has
   * MOE_RUN_FEATURE_ACCUMULATE; other values are refused. */
  int32_t accumulate;
  /* ---- ABI 1.6 ---- */
  /* Routing in the call. router_logits.data NULL (as every older caller leaves it): topk_ids and
   * topk_weights are inputs. Else run() first routes the batch exactly as route() would for the
   * layer's problem (routing_bias and is_padding as moe_route_args.bias and is_padding), writing
   * topk_ids and topk_weights, which are then outputs, and runs the layer from them, on `stream`
   * (in one launch where the plugin fuses the two). The workspace is the run's: workspace_size()
   * covers the routing too. Only for a plugin whose run_features has MOE_RUN_FEATURE_ROUTES and
   * that routes the layer's problem (moe_support.routes); the core refuses it otherwise. */
  moe_tensor router_logits; /* [T, E + S] f32, T = hidden's rows */
  moe_tensor routing_bias;  /* [E] f32 selection bias, iff problem.routing_bias */
  moe_tensor is_padding;    /* [T] u8, optional: 1 = padding token, all its ids -1 */
} moe_run_args;

#define MOE_RUN_ARGS_MIN_SIZE (offsetof(moe_run_args, stream) + sizeof(void*))

/* Times run() on the device for `moe bench` (ABI 1.1). The plugin warms up, then times each
 * iteration with device events (a CUDA graph replay per run set when use_graph), cycling through
 * the run sets so that inputs rotate beyond the L2 cache. */
typedef struct moe_bench_args {
  size_t struct_size;
  const moe_extension* ext;
  /* [num_runs] borrowed; the same layer, different inputs. Since ABI 1.6 the structs lie
   * runs[0].struct_size bytes apart (every run's struct_size the same); a 1.1-1.5 plugin steps
   * by its own sizeof(moe_run_args) (496 bytes in 1.1-1.3, 504 in 1.4-1.5), so a newer caller
   * lays them out so for it. */
  const moe_run_args* runs;
  int32_t num_runs;
  int32_t warmup;     /* untimed iterations first */
  int32_t iterations; /* timed iterations */
  int32_t use_graph;  /* 1 = capture each run set in a CUDA graph and time its replays */
  double* times_ms;   /* out: [iterations], caller-owned */
} moe_bench_args;

#define MOE_BENCH_ARGS_MIN_SIZE (offsetof(moe_bench_args, times_ms) + sizeof(double*))

/* Extension MOE_EXT_BUILD_INFO on the function table's chain: how the plugin was built, for
 * `moe list` and bug reports. Strings are owned by the plugin and live while it is loaded. */
typedef struct moe_build_info {
  moe_extension header;     /* type = MOE_EXT_BUILD_INFO */
  const char* sdk_version;  /* moe-registry SDK it was built with, or "none" */
  const char* compiler;     /* e.g. "g++ 12.2.0" */
  const char* cuda_runtime; /* CUDA runtime it links, e.g. "13.0"; "none" without CUDA */
  const char* targets;      /* what its kernels were compiled for, e.g. "sm_90a"; "host" */
} moe_build_info;

/* Arguments of shutdown() (ABI 1.2). */
typedef struct moe_shutdown_args {
  size_t struct_size;
  const moe_extension* ext;
} moe_shutdown_args;

#define MOE_SHUTDOWN_ARGS_MIN_SIZE (offsetof(moe_shutdown_args, ext) + sizeof(void*))

/* The function table. Append-only: new entries go at the end (MINOR). The core reads an entry
 * only when struct_size covers it. Entries marked optional may be NULL. */
typedef struct moe_plugin_api {
  size_t struct_size;
  uint32_t abi_major; /* MOE_ABI_VERSION_MAJOR the plugin was built with */
  uint32_t abi_minor;

  /* Called once after loading, before anything else. `host` lives until exit. */
  moe_status (*init)(const moe_host_api* host);

  /* Message of the last failed call on this thread. Owned by the plugin; valid until the next
   * call on this thread. Never NULL. */
  const char* (*last_error)(void);

  moe_status (*get_info)(moe_plugin_info* info /* out */);

  /* Pure: no allocation that outlives the call, no device work beyond queries. */
  moe_status (*supports)(const moe_problem* problem, moe_support* answer /* out */);

  /* Prepares canonical weights into the plugin's layout. *layer is owned by the caller and
   * released with destroy_layer. */
  moe_status (*prepare)(const moe_prepare_args* args, moe_layer** layer /* out */);
  moe_status (*destroy_layer)(moe_layer* layer /* owned, NULL ok */);

  /* Workspace bytes run() needs for `num_tokens` tokens (<= max_tokens). */
  moe_status (*workspace_size)(const moe_layer* layer, int64_t num_tokens, size_t* bytes /* out */);
  moe_status (*run)(const moe_run_args* args);

  /* optional: routing on the plugin's memory. NULL = the plugin does not route. */
  moe_status (*route_workspace_size)(const moe_problem* problem, int64_t num_tokens,
                                     size_t* bytes /* out */);
  moe_status (*route)(const moe_route_args* args);

  /* optional: describe the prepared layout for `problem` as text into buf[cap]; *needed gets
   * the full length + 1. NULL = nothing to describe. */
  moe_status (*describe_layout)(const moe_problem* problem, char* buf, size_t cap,
                                size_t* needed /* out */);

  /* Memory services, required when info.memory is CUDA_DEVICE (the core has no CUDA). */
  moe_status (*mem_alloc)(size_t bytes, void** ptr /* out, free with mem_free */);
  moe_status (*mem_free)(void* ptr);
  moe_status (*mem_copy)(void* dst, const void* src, size_t bytes,
                         int32_t kind /* moe_memcpy_kind */, void* stream);
  moe_status (*stream_sync)(void* stream);

  /* ---- ABI 1.1 ---- */
  /* optional: device timing for `moe bench`. NULL = the core times run() with a host clock. */
  moe_status (*benchmark)(const moe_bench_args* args);

  /* ---- ABI 1.2 ---- */
  const moe_extension* ext; /* extension chain (e.g. moe_build_info), NULL if none */
  /* optional: the host drops its last handle on this table (no layer of it is alive). The plugin
   * releases what init() and later calls set up; a later use of the table calls init() again. */
  moe_status (*shutdown)(const moe_shutdown_args* args);
} moe_plugin_api;

#define MOE_PLUGIN_API_MIN_SIZE (offsetof(moe_plugin_api, stream_sync) + sizeof(void*))

/* The entry point: returns a table with static storage duration, never NULL. */
typedef const moe_plugin_api* (*moe_plugin_get_api_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MOE_ABI_H_ */
