// examples/decoder.c end to end: runs example-decoder on a small
// configuration, then checks the logits of every step (the prefill's last
// position and each decode step) against a plain float64 implementation of
// the same model written here, reading the weights from the model .axe the
// decoder packed (through the public API).
//
// Tolerance: the decoder computes in f32 (int8 weights dequantized exactly
// in both); over two layers the logits (of order 1) differ from float64 by
// rounding only (measured: about 2e-6), and each must lie within 5e-5 *
// max(1, |logit|) of the float64 value. Each generated token must be the argmax of the decoder's
// own logits, and the float64 argmax too unless the two best float64 logits
// are closer than the tolerance.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "decoder_model.h"
#include "test_support.h"

#define TOLERANCE 5e-5

typedef struct ref_model {
  decoder_config_t c;
  accel_executable_t *exe;
} ref_model_t;

static const void *weight(ref_model_t *m, const char *name) {
  accel_weight_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_executable_weight(m->exe, name, &info));
  assert_non_null(info.host_data);
  return info.host_data;
}

static const void *layer_weight(ref_model_t *m, uint32_t l, const char *part) {
  char n[96];
  decoder_weight_name(n, sizeof(n), l, part);
  return weight(m, n);
}

// y[out] = x[in] W^T for int8 W [out, in] with per-row scales.
static void ref_project(ref_model_t *m, const char *name, const double *x,
                        double *y, uint32_t out, uint32_t in) {
  const int8_t *q = weight(m, name);
  char sn[112];
  snprintf(sn, sizeof(sn), "%s.scale", name);
  const float *scale = weight(m, sn);
  for (uint32_t j = 0; j < out; ++j) {
    double acc = 0;
    for (uint32_t i = 0; i < in; ++i) {
      acc += x[i] * (double)q[(uint64_t)j * in + i];
    }
    y[j] = acc * scale[j];
  }
}

static void ref_rmsnorm(const double *x, const float *gamma, double *y,
                        uint32_t n) {
  double ss = 0;
  for (uint32_t i = 0; i < n; ++i) {
    ss += x[i] * x[i];
  }
  double inv = 1.0 / sqrt(ss / n + (double)DECODER_NORM_EPS);
  for (uint32_t i = 0; i < n; ++i) {
    y[i] = x[i] * inv * gamma[i];
  }
}

// Rotary embedding, half-split pairs (i, i + head_dim / 2).
static void ref_rope(double *x, uint32_t heads, uint32_t hd, uint32_t pos) {
  for (uint32_t h = 0; h < heads; ++h) {
    double *v = x + (uint64_t)h * hd;
    for (uint32_t p = 0; p < hd / 2; ++p) {
      double theta = pos * pow((double)DECODER_ROPE_BASE, -2.0 * p / hd);
      double a = v[p], b = v[p + hd / 2];
      v[p] = a * cos(theta) - b * sin(theta);
      v[p + hd / 2] = a * sin(theta) + b * cos(theta);
    }
  }
}

// The float64 model over |n| tokens, one position at a time with a KV
// cache; logits of position p go to logits[p] when want[p].
static void ref_forward(ref_model_t *m, const int32_t *tokens, uint32_t n,
                        double *logits, const uint8_t *want) {
  const decoder_config_t *c = &m->c;
  uint32_t hd = c->head_dim, qd = c->heads * hd, kvd = c->kv_heads * hd;
  uint32_t group = c->heads / c->kv_heads;
  double *kc = calloc((uint64_t)c->layers * n * kvd, sizeof(double));
  double *vc = calloc((uint64_t)c->layers * n * kvd, sizeof(double));
  double *x = malloc(c->dim * sizeof(double));
  double *h = malloc(c->dim * sizeof(double));
  double *o = malloc(c->dim * sizeof(double));
  double *q = malloc(qd * sizeof(double));
  double *att = malloc(qd * sizeof(double));
  double *g = malloc(c->ffn * sizeof(double));
  double *u = malloc(c->ffn * sizeof(double));
  double *s = malloc(n * sizeof(double));
  const float *embed = weight(m, "embed");
  for (uint32_t p = 0; p < n; ++p) {
    for (uint32_t i = 0; i < c->dim; ++i) {
      x[i] = embed[(uint64_t)tokens[p] * c->dim + i];
    }
    for (uint32_t l = 0; l < c->layers; ++l) {
      char n1[96];
      double *kl = kc + (uint64_t)l * n * kvd, *vl = vc + (uint64_t)l * n * kvd;
      ref_rmsnorm(x, layer_weight(m, l, "attn_norm"), h, c->dim);
      decoder_weight_name(n1, sizeof(n1), l, "wq");
      ref_project(m, n1, h, q, qd, c->dim);
      decoder_weight_name(n1, sizeof(n1), l, "wk");
      ref_project(m, n1, h, kl + (uint64_t)p * kvd, kvd, c->dim);
      decoder_weight_name(n1, sizeof(n1), l, "wv");
      ref_project(m, n1, h, vl + (uint64_t)p * kvd, kvd, c->dim);
      ref_rope(q, c->heads, hd, p);
      ref_rope(kl + (uint64_t)p * kvd, c->kv_heads, hd, p);
      for (uint32_t hh = 0; hh < c->heads; ++hh) {
        uint32_t kvh = hh / group;
        double max = -INFINITY, sum = 0;
        for (uint32_t j = 0; j <= p; ++j) {
          double d = 0;
          for (uint32_t i = 0; i < hd; ++i) {
            d += q[hh * hd + i] * kl[(uint64_t)j * kvd + kvh * hd + i];
          }
          s[j] = d / sqrt((double)hd);
          max = s[j] > max ? s[j] : max;
        }
        for (uint32_t j = 0; j <= p; ++j) {
          s[j] = exp(s[j] - max);
          sum += s[j];
        }
        for (uint32_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (uint32_t j = 0; j <= p; ++j) {
            acc += s[j] * vl[(uint64_t)j * kvd + kvh * hd + i];
          }
          att[hh * hd + i] = acc / sum;
        }
      }
      decoder_weight_name(n1, sizeof(n1), l, "wo");
      ref_project(m, n1, att, o, c->dim, qd);
      for (uint32_t i = 0; i < c->dim; ++i) {
        x[i] += o[i];
      }
      ref_rmsnorm(x, layer_weight(m, l, "mlp_norm"), h, c->dim);
      decoder_weight_name(n1, sizeof(n1), l, "w_gate");
      ref_project(m, n1, h, g, c->ffn, c->dim);
      decoder_weight_name(n1, sizeof(n1), l, "w_up");
      ref_project(m, n1, h, u, c->ffn, c->dim);
      for (uint32_t i = 0; i < c->ffn; ++i) {
        g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
      }
      decoder_weight_name(n1, sizeof(n1), l, "w_down");
      ref_project(m, n1, g, o, c->dim, c->ffn);
      for (uint32_t i = 0; i < c->dim; ++i) {
        x[i] += o[i];
      }
    }
    if (want[p]) {
      ref_rmsnorm(x, weight(m, "final_norm"), h, c->dim);
      ref_project(m, "lm_head", h, logits + (uint64_t)p * c->vocab, c->vocab,
                  c->dim);
    }
  }
  free(kc);
  free(vc);
  free(x);
  free(h);
  free(o);
  free(q);
  free(att);
  free(g);
  free(u);
  free(s);
}

static void read_config(ref_model_t *m) {
#define READ_FIELD(name, def)                                              \
  {                                                                        \
    const char *v = NULL;                                                  \
    assert_accel_ok(accel_executable_metadata(m->exe, "decoder." #name, &v)); \
    m->c.name = (uint32_t)strtoul(v, NULL, 10);                            \
  }
  DECODER_CONFIG_FIELDS(READ_FIELD)
#undef READ_FIELD
}

static uint32_t argmax_f32(const float *x, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; ++i) {
    best = x[i] > x[best] ? i : best;
  }
  return best;
}

// Runs example-decoder with |prompt| tokens, |steps| generated, KV blocks of
// |block| positions and weights from |seed|, and checks its logits at every
// step (prefill and each greedy decode step) against the float64 model run
// on the same tokens, and each token against the argmax of its step.
static void check_decoder_run(test_env_t *env, uint32_t prompt, uint32_t steps,
                              uint32_t block, uint32_t seed) {
  char dir[] = "/tmp/accel-decoder-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char cmd[8192];
  snprintf(cmd, sizeof(cmd),
           "'%s' '%s' --model %s/model.axe --logits %s/logits.bin "
           "--trace-dir %s --layers 2 --dim 96 --heads 6 --kv-heads 2 "
           "--head-dim 16 --ffn 256 --vocab 300 --prompt %u --steps %u "
           "--block-size %u --seed %u",
           getenv("ACCEL_TEST_DECODER"), getenv("ACCEL_TEST_REFERENCE_AXE"),
           dir, dir, dir, prompt, steps, block, seed);
  fprintf(stderr, "running: %s\n", cmd);
  int rc = system(cmd);
  assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);

  ref_model_t m = {0};
  char path[4200];
  snprintf(path, sizeof(path), "%s/model.axe", dir);
  assert_accel_ok(
      accel_executable_load_file(env->runtime, env->device, path, 0, &m.exe));
  read_config(&m);
  assert_int_equal(m.c.block_size, block);
  snprintf(path, sizeof(path), "%s/logits.bin", dir);
  uint64_t size = 0;
  uint8_t *file = test_read_file(path, &size);
  decoder_logits_header_t h;
  memcpy(&h, file, sizeof(h));
  assert_int_equal(h.magic, DECODER_LOGITS_MAGIC);
  assert_int_equal(h.vocab, m.c.vocab);
  assert_int_equal(h.prompt, prompt);
  assert_int_equal(h.steps, steps);
  assert_int_equal(size, sizeof(h) + 4ull * (h.prompt + h.steps) +
                             4ull * h.steps * h.vocab);
  const int32_t *tokens = (const int32_t *)(file + sizeof(h));
  const float *logits = (const float *)(tokens + h.prompt + h.steps);

  // Positions whose logits chose a token: the prompt's last, then every
  // generated token but the last.
  uint32_t n = h.prompt + h.steps - 1;
  uint8_t *want = calloc(n, 1);
  for (uint32_t p = h.prompt - 1; p < n; ++p) {
    want[p] = 1;
  }
  double *ref = calloc((uint64_t)n * h.vocab, sizeof(double));
  ref_forward(&m, tokens, n, ref, want);
  double worst = 0;
  for (uint32_t t = 0; t < h.steps; ++t) {
    const float *got = logits + (uint64_t)t * h.vocab;
    const double *exp_ = ref + (uint64_t)(h.prompt - 1 + t) * h.vocab;
    for (uint32_t i = 0; i < h.vocab; ++i) {
      double tol = TOLERANCE * fmax(1.0, fabs(exp_[i]));
      double err = fabs((double)got[i] - exp_[i]);
      worst = fmax(worst, err / tol);
      if (!(err <= tol)) {
        fail_msg("step %u logit %u: decoder %.7g, float64 %.7g (error %.3g > "
                 "%.3g)",
                 t, i, (double)got[i], exp_[i], err, tol);
      }
    }
    uint32_t token = (uint32_t)tokens[h.prompt + t];
    assert_int_equal(token, argmax_f32(got, h.vocab));
    uint32_t best = 0, second = 1;
    for (uint32_t i = 0; i < h.vocab; ++i) {
      if (exp_[i] > exp_[best]) {
        second = best;
        best = i;
      } else if (i != best && exp_[i] > exp_[second]) {
        second = i;
      }
    }
    if (exp_[best] - exp_[second] > 2 * TOLERANCE * fmax(1.0, fabs(exp_[best]))) {
      assert_int_equal(token, best);
    }
  }
  fprintf(stderr, "largest error / tolerance over %u steps: %.3f\n", h.steps,
          worst);
  free(want);
  free(ref);
  free(file);
  accel_executable_release(m.exe);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

// A random prompt of a few dozen tokens, ten steps, random block size: the
// decoder matches the float64 model at every step.
static void test_decoder_logits_match_f64_model_at_every_step(void **state) {
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint32_t seed = (uint32_t)test_rng_range(&rng, 1, 1000000);
  uint32_t prompt = (uint32_t)test_rng_range(&rng, 20, 70);
  uint32_t block = (uint32_t)test_rng_range(&rng, 3, 16);
  check_decoder_run(*state, prompt, 10, block, seed);
}

// Edge shapes: a one-token prompt with blocks of one position (every step
// opens a block and grows the cache), and a prompt that fills its blocks
// exactly, with one token generated (no decode step).
static void test_decoder_edge_shapes_match_f64_model(void **state) {
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint32_t seed = (uint32_t)test_rng_range(&rng, 1, 1000000);
  check_decoder_run(*state, 1, 6, 1, seed);
  check_decoder_run(*state, 32, 1, 16, seed + 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decoder_logits_match_f64_model_at_every_step),
      cmocka_unit_test(test_decoder_edge_shapes_match_f64_model),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
