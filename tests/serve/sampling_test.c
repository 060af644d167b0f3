// Sampling against probabilities computed here: greedy is the argmax;
// temperature, top-k and top-p draws stay inside the kept set and follow its
// renormalized softmax (checked over 40,000 draws with a 5-sigma bound per
// token); the same (seed, index) always gives the same token; masks and bad
// input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "accel/sampling.h"

enum { V = 10, DRAWS = 40000 };

static accel_sampling_params_t params(float t, uint32_t k, float p,
                                      uint64_t seed) {
  return (accel_sampling_params_t){.struct_size =
                                       sizeof(accel_sampling_params_t),
                                   .top_k = k,
                                   .temperature = t,
                                   .top_p = p,
                                   .seed = seed};
}

// The kept set and its probabilities, written out plainly: rank by logit
// (then index), keep top k, softmax over them, keep the most likely until
// their mass reaches p, renormalize.
static void expected(const float *l, float t, uint32_t k, float p,
                     double *prob) {
  int order[V];
  for (int i = 0; i < V; ++i) {
    order[i] = i;
  }
  for (int i = 0; i < V; ++i) {
    for (int j = i + 1; j < V; ++j) {
      if (l[order[j]] > l[order[i]] ||
          (l[order[j]] == l[order[i]] && order[j] < order[i])) {
        int x = order[i];
        order[i] = order[j];
        order[j] = x;
      }
    }
  }
  int live = 0;
  while (live < V && l[order[live]] != -INFINITY) {
    live++;
  }
  int kk = k != 0 && (int)k < live ? (int)k : live;
  double w[V] = {0}, z = 0;
  for (int i = 0; i < kk; ++i) {
    w[i] = exp(((double)l[order[i]] - (double)l[order[0]]) / t);
    z += w[i];
  }
  double mass = 0;
  int keep = 0;
  while (keep < kk && (keep == 0 || mass < p * z)) {
    mass += w[keep++];
  }
  memset(prob, 0, sizeof(double) * V);
  for (int i = 0; i < keep; ++i) {
    prob[order[i]] = w[i] / mass;
  }
}

static void check_distribution(const float *l, float t, uint32_t k, float p,
                               uint64_t seed) {
  double prob[V];
  expected(l, t, k, p, prob);
  int counts[V] = {0};
  accel_sampling_params_t ps = params(t, k, p, seed);
  for (uint64_t n = 0; n < DRAWS; ++n) {
    int32_t tok = -1;
    assert_accel_ok(accel_sample(l, V, &ps, n, &tok));
    assert_true(tok >= 0 && tok < V);
    counts[tok]++;
  }
  for (int i = 0; i < V; ++i) {
    double mean = prob[i] * DRAWS;
    double sigma = sqrt(DRAWS * prob[i] * (1 - prob[i]));
    if (prob[i] == 0 && counts[i] != 0) {
      fail_msg("t=%g k=%u p=%g: token %d drawn %d times outside the kept set",
               (double)t, k, (double)p, i, counts[i]);
    }
    if (fabs(counts[i] - mean) > 5 * sigma + 1) {
      fail_msg("t=%g k=%u p=%g: token %d drawn %d times, expected %.1f "
               "(sigma %.1f)",
               (double)t, k, (double)p, i, counts[i], mean, sigma);
    }
  }
}

static void test_draws_follow_the_kept_softmax(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 4; ++round) {
    float l[V];
    for (int i = 0; i < V; ++i) {
      l[i] = (float)test_rng_range(&rng, 0, 4000) / 1000.0f - 2.0f;
    }
    l[3] = l[5];  // a tie
    uint64_t seed = test_rng_next(&rng);
    check_distribution(l, 1.0f, 0, 1.0f, seed);
    check_distribution(l, 0.6f, 0, 1.0f, seed);
    check_distribution(l, 1.3f, 3, 1.0f, seed);
    check_distribution(l, 1.0f, 0, 0.5f, seed);
    check_distribution(l, 0.8f, 6, 0.7f, seed);
  }
}

static void test_greedy_is_argmax_lowest_index_first(void **state) {
  (void)state;
  float l[V] = {0, 3, 1, 3, -INFINITY, 2, 0, 0, 0, 0};
  accel_sampling_params_t p = params(0.0f, 2, 0.3f, 1);
  int32_t tok;
  for (uint64_t n = 0; n < 50; ++n) {
    assert_accel_ok(accel_sample(l, V, &p, n, &tok));
    assert_int_equal(tok, 1);
  }
  // Only one token unmasked: it, whatever the temperature.
  float one[V];
  for (int i = 0; i < V; ++i) {
    one[i] = -INFINITY;
  }
  one[7] = -50.0f;
  p = params(1.0f, 0, 1.0f, 9);
  assert_accel_ok(accel_sample(one, V, &p, 0, &tok));
  assert_int_equal(tok, 7);
}

// The draw depends on (seed, index) only: repeated calls agree, another
// seed gives another sequence, and masked tokens are never drawn.
static void test_seeded_draws_are_reproducible(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { BIG = 32000 };
  float *l = malloc(BIG * sizeof(float));
  for (int i = 0; i < BIG; ++i) {
    l[i] = (float)test_rng_range(&rng, 0, 1000) / 100.0f;
  }
  for (int i = 0; i < BIG; i += 2) {
    l[i] = -INFINITY;
  }
  int32_t a[64], b[64], c[64];
  for (int round = 0; round < 3; ++round) {
    accel_sampling_params_t p =
        params(0.9f, round == 0 ? 0 : 40, round == 2 ? 0.9f : 1.0f, 1234);
    accel_sampling_params_t q = p;
    q.seed = 4321;
    int same = 0;
    for (uint64_t n = 0; n < 64; ++n) {
      assert_accel_ok(accel_sample(l, BIG, &p, n, &a[n]));
      assert_accel_ok(accel_sample(l, BIG, &p, n, &b[n]));
      assert_accel_ok(accel_sample(l, BIG, &q, n, &c[n]));
      assert_int_equal(a[n], b[n]);
      assert_true(a[n] % 2 == 1 && c[n] % 2 == 1);  // masked never drawn
      same += a[n] == c[n];
    }
    assert_true(same < 32);
  }
  free(l);
}

static void test_bad_input_is_refused(void **state) {
  (void)state;
  float l[V] = {0};
  int32_t tok = 5;
  accel_sampling_params_t p = params(1.0f, 0, 1.0f, 0);
  assert_accel_status(accel_sample(NULL, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_sample(l, 0, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  p.temperature = -1.0f;
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "temperature -1"));
  p.temperature = NAN;
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  p = params(1.0f, 0, 0.0f, 0);
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  p.top_p = 1.5f;
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  p = params(1.0f, 0, 1.0f, 0);
  l[4] = NAN;
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "logit 4 is NaN"));
  for (int i = 0; i < V; ++i) {
    l[i] = -INFINITY;
  }
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "every one"));
  p.struct_size = 4;
  l[0] = 0;
  assert_accel_status(accel_sample(l, V, &p, 0, &tok),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(tok, 5);  // untouched on failure
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_draws_follow_the_kept_softmax),
      cmocka_unit_test(test_greedy_is_argmax_lowest_index_first),
      cmocka_unit_test(test_seeded_draws_are_reproducible),
      cmocka_unit_test(test_bad_input_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
