// Token sampling (include/accel/sampling.h, docs/serving.md "Sampling").
//
// The candidates are ordered by (logit descending, index ascending) in a
// binary max-heap built in O(vocab); top-k pops k of them and top-p pops
// until the kept mass reaches p, so neither sorts the whole vocabulary.
// The kept tokens are drawn from in index order with a uniform number that
// depends only on (seed, index of the generated token).
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "accel/sampling.h"
#include "core/error.h"

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, index), 53 bits.
static double uniform(uint64_t seed, uint64_t index) {
  uint64_t r = splitmix64(seed ^ splitmix64(index));
  return (double)(r >> 11) * 0x1.0p-53;
}

// True when token |a| ranks before token |b|.
static inline bool ranks_before(const float *logits, uint32_t a, uint32_t b) {
  return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
}

static void sift_down(uint32_t *heap, uint32_t n, uint32_t i,
                      const float *logits) {
  for (;;) {
    uint32_t best = i, l = 2 * i + 1, r = l + 1;
    if (l < n && ranks_before(logits, heap[l], heap[best])) {
      best = l;
    }
    if (r < n && ranks_before(logits, heap[r], heap[best])) {
      best = r;
    }
    if (best == i) {
      return;
    }
    uint32_t t = heap[i];
    heap[i] = heap[best];
    heap[best] = t;
    i = best;
  }
}

static uint32_t heap_pop(uint32_t *heap, uint32_t *n, const float *logits) {
  uint32_t top = heap[0];
  heap[0] = heap[--*n];
  sift_down(heap, *n, 0, logits);
  return top;
}

static int compare_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

// Checks |p| and the logits; the largest logit's token in |*out_best| and
// the number of tokens not masked in |*out_live|.
static accel_status_t check_inputs(const float *logits, uint32_t vocab,
                                   const accel_sampling_params_t *p,
                                   uint32_t *out_best, uint32_t *out_live) {
  ACCEL_CHECK_ARG(logits != NULL, "logits (NULL)");
  ACCEL_CHECK_ARG(p != NULL, "params (NULL)");
  if (vocab == 0 || p->struct_size < sizeof(*p)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "sampling: vocab %u, params struct_size %u", vocab,
                       p->struct_size);
  }
  if (!(p->temperature >= 0.0f) || isinf(p->temperature) ||
      !(p->top_p > 0.0f && p->top_p <= 1.0f)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "sampling: temperature %g (0 or positive) and top_p "
                       "%g (in (0, 1])",
                       (double)p->temperature, (double)p->top_p);
  }
  // One branch-free pass (it vectorizes: this runs once per sampled token
  // over the whole vocabulary), then the first index of the maximum.
  uint32_t bad = 0, dead = 0;
  float top = -INFINITY;
  for (uint32_t i = 0; i < vocab; ++i) {
    float v = logits[i];
    bad |= (v != v) | (v == INFINITY);
    dead += v == -INFINITY;
    top = v > top ? v : top;
  }
  if (bad) {
    for (uint32_t i = 0; i < vocab; ++i) {
      if (isnan(logits[i]) || logits[i] == INFINITY) {
        return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                           "sampling: logit %u is %s", i,
                           isnan(logits[i]) ? "NaN" : "+inf");
      }
    }
  }
  uint32_t best = 0, live = vocab - dead;
  while (live != 0 && logits[best] != top) {
    ++best;
  }
  if (live == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "sampling: every one of the %u logits is -inf", vocab);
  }
  *out_best = best;
  *out_live = live;
  return ACCEL_OK;
}

accel_status_t accel_sample(const float *logits, uint32_t vocab,
                            const accel_sampling_params_t *p, uint64_t index,
                            int32_t *out_token) {
  ACCEL_CHECK_ARG(out_token != NULL, "out_token (NULL)");
  uint32_t best = 0, live = 0;
  ACCEL_RETURN_IF_ERROR(check_inputs(logits, vocab, p, &best, &live));
  if (p->temperature == 0.0f || live == 1) {
    *out_token = (int32_t)best;
    return ACCEL_OK;
  }
  const double inv_t = 1.0 / (double)p->temperature;
  const double top = (double)logits[best];
  uint32_t k = p->top_k != 0 && p->top_k < live ? p->top_k : live;
  double u = uniform(p->seed, index);
  if (k == live && p->top_p >= 1.0f) {
    // Every token is kept: draw over the vocabulary in index order.
    double z = 0.0;
    for (uint32_t i = 0; i < vocab; ++i) {
      if (logits[i] != -INFINITY) {
        z += exp(((double)logits[i] - top) * inv_t);
      }
    }
    double target = u * z, acc = 0.0;
    uint32_t last = best;
    for (uint32_t i = 0; i < vocab; ++i) {
      if (logits[i] != -INFINITY) {
        acc += exp(((double)logits[i] - top) * inv_t);
        last = i;
        if (acc > target) {
          break;
        }
      }
    }
    *out_token = (int32_t)last;
    return ACCEL_OK;
  }
  uint32_t *heap = malloc((size_t)live * sizeof(uint32_t));
  if (heap == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "sampling: %u candidates", live);
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (logits[i] != -INFINITY) {
      heap[n++] = i;
    }
  }
  for (uint32_t i = n / 2; i-- > 0;) {
    sift_down(heap, n, i, logits);
  }
  // The mass the kept set must reach: top_p of the top-k candidates' mass
  // (of every candidate's when top-k is off).
  double z = 0.0;
  if (k == live) {
    for (uint32_t i = 0; i < n; ++i) {
      z += exp(((double)logits[heap[i]] - top) * inv_t);
    }
  }
  // With top-k, pop the k best in rank order into |kept| and add their
  // mass; without it, top-p pops below.
  uint32_t *kept = malloc((size_t)k * sizeof(uint32_t));
  if (kept == NULL) {
    free(heap);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "sampling: %u kept", k);
  }
  uint32_t m = 0;
  if (k < live) {
    for (; m < k; ++m) {
      kept[m] = heap_pop(heap, &n, logits);
      z += exp(((double)logits[kept[m]] - top) * inv_t);
    }
  }
  // Top-p: the most likely first, until their mass reaches p.
  double need = (double)p->top_p * z, mass = 0.0;
  uint32_t keep = 0;
  if (k < live) {
    while (keep < m && (keep == 0 || mass < need)) {
      mass += exp(((double)logits[kept[keep]] - top) * inv_t);
      keep++;
    }
  } else {
    while (n != 0 && (keep == 0 || mass < need)) {
      kept[keep] = heap_pop(heap, &n, logits);
      mass += exp(((double)logits[kept[keep]] - top) * inv_t);
      keep++;
    }
  }
  free(heap);
  qsort(kept, keep, sizeof(uint32_t), compare_u32);
  double target = u * mass, acc = 0.0;
  uint32_t token = kept[keep - 1];
  for (uint32_t i = 0; i < keep; ++i) {
    acc += exp(((double)logits[kept[i]] - top) * inv_t);
    if (acc > target) {
      token = kept[i];
      break;
    }
  }
  free(kept);
  *out_token = (int32_t)token;
  return ACCEL_OK;
}
