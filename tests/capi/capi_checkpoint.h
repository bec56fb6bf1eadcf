/* A checkpoint of the capi_inputs layer in the `stacked` convention (moe/checkpoint.hpp), written
 * by hand as safetensors (8-byte header length, JSON header, data), so that the C test can load
 * it through moe_host_layer_prepare_checkpoint without any tool: layers.0.moe.w13 [E, 2I, H],
 * .w2 [E, H, I] and .router.weight [E, H], all BF16. */
#ifndef MOE_TESTS_CAPI_CHECKPOINT_H_
#define MOE_TESTS_CAPI_CHECKPOINT_H_

#include <stdio.h>

#include "capi_inputs.h"

#define CAPI_ROUTER_COUNT ((size_t)CAPI_EXPERTS * CAPI_HIDDEN)

/* The router weight the checkpoint holds: a pattern the test reads back through layer info. */
static inline uint16_t capi_router_value(size_t i) {
  return capi_bf16((float)((int)(i % 17) - 8) / 64.0f);
}

/* Writes the checkpoint to `path`; 0 on success. */
static inline int capi_write_checkpoint(const char* path, const capi_inputs* in) {
  const size_t w13 = CAPI_W13_COUNT * 2, w2 = CAPI_W2_COUNT * 2, router = CAPI_ROUTER_COUNT * 2;
  char header[1024];
  int n = snprintf(header, sizeof header,
                   "{\"layers.0.moe.w13\":{\"dtype\":\"BF16\",\"shape\":[%d,%d,%d],"
                   "\"data_offsets\":[0,%zu]},"
                   "\"layers.0.moe.w2\":{\"dtype\":\"BF16\",\"shape\":[%d,%d,%d],"
                   "\"data_offsets\":[%zu,%zu]},"
                   "\"layers.0.moe.router.weight\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],"
                   "\"data_offsets\":[%zu,%zu]}}",
                   CAPI_EXPERTS, 2 * CAPI_INTERMEDIATE, CAPI_HIDDEN, w13, CAPI_EXPERTS, CAPI_HIDDEN,
                   CAPI_INTERMEDIATE, w13, w13 + w2, CAPI_EXPERTS, CAPI_HIDDEN, w13 + w2,
                   w13 + w2 + router);
  while (n % 8 != 0) header[n++] = ' '; /* the data starts 8-byte aligned */
  uint16_t router_weight[CAPI_ROUTER_COUNT];
  for (size_t i = 0; i < CAPI_ROUTER_COUNT; ++i) router_weight[i] = capi_router_value(i);
  FILE* f = fopen(path, "wb");
  if (f == NULL) return 1;
  unsigned char length[8];
  for (int b = 0; b < 8; ++b) length[b] = (unsigned char)(((uint64_t)n >> (8 * b)) & 0xFF);
  int ok = fwrite(length, 1, 8, f) == 8 && fwrite(header, 1, (size_t)n, f) == (size_t)n &&
           fwrite(in->w13, 1, w13, f) == w13 && fwrite(in->w2, 1, w2, f) == w2 &&
           fwrite(router_weight, 1, router, f) == router;
  return (fclose(f) != 0 || !ok) ? 1 : 0;
}

#endif /* MOE_TESTS_CAPI_CHECKPOINT_H_ */
