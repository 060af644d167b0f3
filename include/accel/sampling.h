// Token sampling for the serving stack (docs/serving.md, "Sampling"):
// greedy, temperature, top-k and top-p over one row of logits, seeded per
// request. The random draw for a request's n-th generated token depends
// only on (seed, n), never on what else is in the batch or on earlier
// draws, so the same request with the same seed gives the same tokens
// whatever it is batched with.
#ifndef ACCEL_SAMPLING_H_
#define ACCEL_SAMPLING_H_

#include <stdint.h>

#include "accel/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_sampling_params {
  uint32_t struct_size;  // sizeof(accel_sampling_params_t)
  uint32_t top_k;        // keep the k most likely tokens; 0: all
  float temperature;     // 0: greedy (argmax); otherwise > 0
  float top_p;           // keep the smallest set with this much mass; (0, 1]
  uint64_t seed;         // the request's seed
} accel_sampling_params_t;

// Samples a token from |logits| (|vocab| floats; -INFINITY masks a token)
// for the request's generated token number |index| (0 for its first).
// Greedy picks the largest logit (the lowest index among equals). Otherwise
// the candidates are the top_k largest logits (ties broken by lower index),
// their probabilities softmax(logit / temperature) computed in double, then
// the most likely candidates whose mass first reaches top_p (ties by lower
// index) are kept and one is drawn with a uniform number from
// (seed, index). Writes the token to |*out_token|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, vocab 0, short struct_size,
// temperature negative or not finite, top_p outside (0, 1], a NaN or +inf
// logit (named by its index), or every logit -inf.
// Thread-safe (no state).
ACCEL_API accel_status_t accel_sample(const float *logits, uint32_t vocab,
                                      const accel_sampling_params_t *params,
                                      uint64_t index, int32_t *out_token);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_SAMPLING_H_
