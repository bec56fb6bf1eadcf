/* The inputs both sides of the host C API test draw (capi_test.c through the C API,
 * cpp_expected.cpp through the C++ API): the same problem, weights, hidden states and router
 * logits, from one deterministic generator, so the two outputs must be equal bit for bit. */
#ifndef MOE_TESTS_CAPI_INPUTS_H_
#define MOE_TESTS_CAPI_INPUTS_H_

#include <stdint.h>
#include <string.h>

#include "moe/abi/moe_abi.h"

enum {
  CAPI_EXPERTS = 4,
  CAPI_TOP_K = 2,
  CAPI_HIDDEN = 64,
  CAPI_INTERMEDIATE = 32,
  CAPI_MAX_TOKENS = 16,
  CAPI_TOKENS = 8
};

/* Element counts of each tensor. */
#define CAPI_W13_COUNT ((size_t)CAPI_EXPERTS * 2 * CAPI_INTERMEDIATE * CAPI_HIDDEN)
#define CAPI_W2_COUNT ((size_t)CAPI_EXPERTS * CAPI_HIDDEN * CAPI_INTERMEDIATE)
#define CAPI_HIDDEN_COUNT ((size_t)CAPI_TOKENS * CAPI_HIDDEN)
#define CAPI_LOGITS_COUNT ((size_t)CAPI_TOKENS * CAPI_EXPERTS)
#define CAPI_TOPK_COUNT ((size_t)CAPI_TOKENS * CAPI_TOP_K)

/* E=4 k=2 H=64 I=32 bf16 silu_mul softmax_topk renormalised, over a defaulted problem. */
static inline void capi_set_problem(moe_problem* p) {
  p->experts = CAPI_EXPERTS;
  p->top_k = CAPI_TOP_K;
  p->hidden = CAPI_HIDDEN;
  p->intermediate = CAPI_INTERMEDIATE;
  p->format = MOE_FORMAT_BF16;
  p->activation = MOE_ACTIVATION_SILU_MUL;
  p->routing = MOE_ROUTING_SOFTMAX_TOPK;
  p->renormalize = 1;
  p->max_tokens = CAPI_MAX_TOKENS;
}

/* splitmix64, then a uniform float in [-scale, scale). */
static inline float capi_uniform(uint64_t* state, float scale) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return scale * (2.0f * (float)((double)(z >> 40) / 16777216.0) - 1.0f);
}

/* Round to nearest even (the values are finite). */
static inline uint16_t capi_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline void capi_fill_bf16(uint16_t* out, size_t n, float scale, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) out[i] = capi_bf16(capi_uniform(&seed, scale));
}

static inline void capi_fill_f32(float* out, size_t n, float scale, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) out[i] = capi_uniform(&seed, scale);
}

/* A contiguous view of host memory. */
static inline moe_tensor capi_tensor(void* data, moe_dtype dtype, int32_t ndim, int64_t d0,
                                     int64_t d1, int64_t d2) {
  moe_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape[0] = d0;
  t.shape[1] = d1;
  t.shape[2] = d2;
  return t;
}

/* The canonical inputs, owned by the caller (host memory). */
typedef struct capi_inputs {
  uint16_t w13[CAPI_W13_COUNT];       /* [E, 2I, H] bf16 */
  uint16_t w2[CAPI_W2_COUNT];         /* [E, H, I] bf16 */
  uint16_t hidden[CAPI_HIDDEN_COUNT]; /* [T, H] bf16 */
  float logits[CAPI_LOGITS_COUNT];    /* [T, E] f32 */
} capi_inputs;

static inline void capi_make_inputs(capi_inputs* in) {
  capi_fill_bf16(in->w13, CAPI_W13_COUNT, 0.125f, 1);
  capi_fill_bf16(in->w2, CAPI_W2_COUNT, 0.18f, 2);
  capi_fill_bf16(in->hidden, CAPI_HIDDEN_COUNT, 1.0f, 3);
  capi_fill_f32(in->logits, CAPI_LOGITS_COUNT, 2.0f, 4);
}

static inline moe_weights capi_weights(capi_inputs* in) {
  moe_weights w;
  memset(&w, 0, sizeof w);
  w.struct_size = sizeof w;
  w.w13 = capi_tensor(in->w13, MOE_DTYPE_BF16, 3, CAPI_EXPERTS, 2 * CAPI_INTERMEDIATE, CAPI_HIDDEN);
  w.w2 = capi_tensor(in->w2, MOE_DTYPE_BF16, 3, CAPI_EXPERTS, CAPI_HIDDEN, CAPI_INTERMEDIATE);
  return w;
}

/* What cpp_expected writes and capi_test reads: topk ids, topk weights, then the output. */
typedef struct capi_results {
  int32_t topk_ids[CAPI_TOPK_COUNT];   /* [T, k] */
  float topk_weights[CAPI_TOPK_COUNT]; /* [T, k] */
  uint16_t output[CAPI_HIDDEN_COUNT];  /* [T, H] bf16 */
} capi_results;

#endif /* MOE_TESTS_CAPI_INPUTS_H_ */
