// accel-bench kernels: the reference kernels (kernels/host, libaccel_kernels.so)
// launched through accel_launch on the host device, against the same work done
// directly in the same run on the same data.
//
// Figures (medians of repeated runs after a warm-up; ratios are medians of
// per-run ratios of samples taken side by side, bench_add_paired; higher is
// better for all of them):
//  - matmul_f32_1024: 1024x1024x1024 f32 "matmul" (default tiles), GFLOP/s,
//    against cblas_sgemm called directly with OpenBLAS's own threading (one
//    thread per CPU). Target >= 0.9x.
//  - matmul_f32_1x4096x4096: the decode-shaped f32 product, the same way.
//    Target >= 0.9x.
//  - mlp_block_64x512x2048: examples/mlp_layer.c's block, y = x +
//    gelu(x W1 + b1) W2 + b2 (64 rows, 512 -> 2048 -> 512), as two matmul
//    launches (bias and GELU fused) and an add, against two direct
//    cblas_sgemm calls and the same elementwise loops. Target >= 0.9x.
//  - qgemv_int8_4096 / qgemv_int4_g128_4096: y = x W^T for one row, W
//    4096x4096 quantized, GB/s of weight bytes read (scales and zero points
//    included), against memcpy of as many bytes. Target >= 0.5x.
//  - softmax_4096 / layernorm_4096 / rmsnorm_4096: 1024 rows of 4096, GB/s
//    of input bytes, against memcpy of the same bytes. Target >= 0.5x.
//
// The code object comes from ACCEL_KERNELS (a path) or the build tree
// (ACCEL_KERNELS_PATH); its kernels are registered as run-time kernels
// (accel_kernel_register), the same functions an .axe file would load. The
// host device runs each grid on all its threads (ACCEL_HOST_THREADS unset).
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/accel.h"
#include "bench.h"
#include "kernel_params.h"

#ifndef ACCEL_KERNELS_PATH
#define ACCEL_KERNELS_PATH ""
#endif

void openblas_set_num_threads(int num_threads);

#define KB_MAX_LAUNCHES 3
#define KB_MAX_BINDINGS 5

typedef struct kb_launch {
  accel_kernel_t *kernel;
  uint32_t binding_count;
  accel_launch_binding_t bindings[KB_MAX_BINDINGS];
  const void *constants;
  uint32_t constants_size;
  uint32_t groups;
} kb_launch_t;

// One figure: launches through the runtime against a direct baseline.
typedef struct kb_subject {
  const char *name, *baseline_name, *unit, *target;
  double work;  // flops or bytes per iteration (per the unit)
  int iters;
  kb_launch_t launches[KB_MAX_LAUNCHES];
  int launch_count;
  void (*baseline)(struct kb_subject *s);
  void *p[8];  // the baseline's operands (host pointers of the buffers)
  uint32_t dims[4];
} kb_subject_t;

typedef struct kb {
  accel_device_t *dev;
  accel_stream_t *stream;
  const accel_kernel_library_t *lib;
  accel_kernel_t *kernels[16];
  uint32_t kernel_count;
  accel_buffer_t *buffers[64];
  uint32_t buffer_count;
  int cpus;
  kb_subject_t *subject;  // the one being measured
} kb_t;

static int check(accel_status_t st, const char *what) {
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench kernels: %s: %s: %s\n", what,
            accel_status_name(st), accel_last_error());
    return 1;
  }
  return 0;
}

// Registers |name| from the code object with |bindings| bindings.
static accel_kernel_t *kernel(kb_t *b, const char *name, uint32_t bindings,
                              uint32_t constants_size) {
  accel_kernel_fn_t fn = NULL;
  for (uint32_t i = 0; i < b->lib->export_count; ++i) {
    if (strcmp(b->lib->exports[i].name, name) == 0) fn = b->lib->exports[i].fn;
  }
  accel_kernel_binding_decl_t decls[KB_MAX_BINDINGS];
  for (uint32_t i = 0; i < bindings; ++i) {
    decls[i] = (accel_kernel_binding_decl_t){
        .access = ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE,
        .alignment = 4};
  }
  accel_kernel_desc_t d = {.struct_size = sizeof(d),
                           .abi_version = ACCEL_KERNEL_ABI_VERSION,
                           .name = name, .fn = fn, .binding_count = bindings,
                           .constants_size = constants_size,
                           .bindings = decls};
  accel_kernel_t *k = NULL;
  if (fn == NULL || b->kernel_count == 16 ||
      check(accel_kernel_register(b->dev, &d, &k), name)) {
    return NULL;
  }
  b->kernels[b->kernel_count++] = k;
  return k;
}

// A device buffer of |bytes| filled with values in [-scale, scale] (f32) or
// random bytes (|floats| false); returns its host pointer.
static void *buffer(kb_t *b, uint64_t bytes, int floats, float scale,
                    accel_launch_binding_t *out) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = bytes};
  accel_buffer_t *buf;
  void *p;
  if (b->buffer_count == 64 || check(accel_buffer_alloc(b->dev, &d, &buf), "alloc") ||
      check(accel_buffer_host_pointer(buf, &p), "host pointer")) {
    return NULL;
  }
  b->buffers[b->buffer_count++] = buf;
  uint64_t x = 0x9e3779b97f4a7c15ull ^ bytes;
  for (uint64_t i = 0; i < (floats ? bytes / 4 : bytes); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (floats) {
      ((float *)p)[i] = ((float)(x >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
    } else {
      ((uint8_t *)p)[i] = (uint8_t)(x >> 32);
    }
  }
  *out = (accel_launch_binding_t){.buffer = buf, .length = bytes};
  return p;
}

static int run_launches(kb_t *b, kb_subject_t *s) {
  for (int it = 0; it < s->iters; ++it) {
    for (int l = 0; l < s->launch_count; ++l) {
      kb_launch_t *L = &s->launches[l];
      accel_launch_desc_t d = {.struct_size = sizeof(d),
                               .workgroup_count = {L->groups, 1, 1},
                               .binding_count = L->binding_count,
                               .bindings = L->bindings,
                               .constants_size = L->constants_size,
                               .constants = L->constants};
      if (check(accel_launch(b->stream, L->kernel, &d), s->name)) return 1;
    }
  }
  return check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
               s->name);
}

static int subject_measure(void *ctx, int run, double *out) {
  (void)run;
  kb_t *b = ctx;
  kb_subject_t *s = b->subject;
  uint64_t t0 = bench_now_ns();
  if (run_launches(b, s)) return 1;
  uint64_t t1 = bench_now_ns();
  // The baseline gets OpenBLAS's own threading; the kernels run one
  // OpenBLAS thread per work-group (the code object sets 1 at load).
  openblas_set_num_threads(b->cpus);
  for (int it = 0; it < s->iters; ++it) s->baseline(s);
  openblas_set_num_threads(1);
  uint64_t t2 = bench_now_ns();
  out[0] = s->work * s->iters / (double)(t1 - t0);  // per ns: G per s
  out[1] = s->work * s->iters / (double)(t2 - t1);
  return 0;
}

static int subject_run(bench_report_t *report, kb_t *b, kb_subject_t *s,
                       int runs) {
  const bench_figure_t fig = {s->name, s->unit, 0, s->baseline_name, 1,
                              s->target, BENCH_PAIRED, false};
  const bench_group_t g = {.runs = runs, .slots = 2,
                           .measure = subject_measure, .figures = &fig,
                           .figure_count = 1};
  b->subject = s;
  return bench_group_run(report, &g, b);
}

// ---- baselines -------------------------------------------------------------

static void sgemm_baseline(kb_subject_t *s) {
  uint32_t m = s->dims[0], n = s->dims[1], k = s->dims[2];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n,
              (int)k, 1.0f, s->p[0], (int)k, s->p[1], (int)n, 0.0f, s->p[3],
              (int)n);
}

static float gelu_tanh(float v) {
  return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

// y = x + gelu(x W1 + b1) W2 + b2 with direct OpenBLAS calls.
static void mlp_baseline(kb_subject_t *s) {
  uint32_t rows = s->dims[0], d = s->dims[1], f = s->dims[2];
  const float *x = s->p[0], *w1 = s->p[1], *b1 = s->p[2], *w2 = s->p[3],
              *b2 = s->p[4];
  float *h = s->p[6], *y = s->p[7];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)f,
              (int)d, 1.0f, x, (int)d, w1, (int)f, 0.0f, h, (int)f);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j = 0; j < f; ++j) {
      h[r * f + j] = gelu_tanh(h[r * f + j] + b1[j]);
    }
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)d,
              (int)f, 1.0f, h, (int)f, w2, (int)d, 0.0f, y, (int)d);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j = 0; j < d; ++j) {
      y[r * d + j] = y[r * d + j] + b2[j] + x[r * d + j];
    }
  }
}

static void memcpy_baseline(kb_subject_t *s) {
  memcpy(s->p[7], s->p[6], (size_t)s->work);
}

// ---- subjects -----------------------------------------------------------

static uint32_t groups_for(uint64_t units, int cpus) {
  uint64_t g = units < (uint64_t)cpus * 4 ? units : (uint64_t)cpus * 4;
  return g ? (uint32_t)g : 1;
}

static int matmul_subject(kb_t *b, kb_subject_t *s, uint32_t m, uint32_t n,
                          uint32_t k, accel_kp_matmul_constants_t *c) {
  *c = (accel_kp_matmul_constants_t){.m = m, .n = n, .k = k,
                                     .dtype_a = ACCEL_KP_DTYPE_F32,
                                     .dtype_b = ACCEL_KP_DTYPE_F32};
  kb_launch_t *L = &s->launches[0];
  *L = (kb_launch_t){.kernel = kernel(b, "matmul", 4, sizeof(*c)),
                     .binding_count = 4, .constants = c,
                     .constants_size = sizeof(*c),
                     .groups = groups_for(accel_kp_matmul_units(c), b->cpus)};
  s->p[0] = buffer(b, 4ull * m * k, 1, 1.0f, &L->bindings[0]);
  s->p[1] = buffer(b, 4ull * k * n, 1, 1.0f, &L->bindings[1]);
  s->p[2] = buffer(b, 4ull * n, 1, 1.0f, &L->bindings[2]);
  s->p[3] = buffer(b, 4ull * m * n, 1, 1.0f, &L->bindings[3]);
  s->launch_count = 1;
  s->unit = "GFLOP/s";
  s->baseline_name = "cblas_sgemm_direct";
  s->target = ">= 0.9";
  s->baseline = sgemm_baseline;
  s->dims[0] = m, s->dims[1] = n, s->dims[2] = k;
  s->work = 2.0 * m * n * k;
  return L->kernel == NULL || !s->p[0] || !s->p[1] || !s->p[2] || !s->p[3];
}

typedef struct mlp_constants {
  accel_kp_matmul_constants_t up, down;
  accel_kp_eltwise_constants_t add;
} mlp_constants_t;

static int mlp_subject(kb_t *b, kb_subject_t *s, mlp_constants_t *c) {
  const uint32_t rows = 64, d = 512, f = 2048;
  accel_launch_binding_t x, w1, b1, w2, b2, h, y, out;
  s->p[0] = buffer(b, 4ull * rows * d, 1, 1.0f, &x);
  s->p[1] = buffer(b, 4ull * d * f, 1, 0.05f, &w1);
  s->p[2] = buffer(b, 4ull * f, 1, 0.05f, &b1);
  s->p[3] = buffer(b, 4ull * f * d, 1, 0.05f, &w2);
  s->p[4] = buffer(b, 4ull * d, 1, 0.05f, &b2);
  s->p[5] = buffer(b, 4ull * rows * f, 1, 0.0f, &h);
  s->p[6] = buffer(b, 4ull * rows * f, 1, 0.0f, &y);  // baseline's h
  s->p[7] = buffer(b, 4ull * rows * d, 1, 0.0f, &out);
  for (int i = 0; i < 8; ++i) {
    if (s->p[i] == NULL) return 1;
  }
  c->up = (accel_kp_matmul_constants_t){
      .m = rows, .n = f, .k = d, .flags = ACCEL_KP_MM_BIAS,
      .dtype_a = ACCEL_KP_DTYPE_F32, .dtype_b = ACCEL_KP_DTYPE_F32,
      .activation = ACCEL_KP_ACT_GELU_TANH};
  c->down = (accel_kp_matmul_constants_t){
      .m = rows, .n = d, .k = f, .flags = ACCEL_KP_MM_BIAS,
      .dtype_a = ACCEL_KP_DTYPE_F32, .dtype_b = ACCEL_KP_DTYPE_F32};
  c->add = (accel_kp_eltwise_constants_t){.count = rows * d};
  accel_kernel_t *mm = kernel(b, "matmul", 4, sizeof(c->up));
  accel_kernel_t *add = kernel(b, "add", 3, sizeof(c->add));
  accel_launch_binding_t y_rt = y;
  y_rt.length = 4ull * rows * d;
  s->launches[0] = (kb_launch_t){mm, 4, {x, w1, b1, h}, &c->up, sizeof(c->up),
                                 groups_for(accel_kp_matmul_units(&c->up), b->cpus)};
  s->launches[1] = (kb_launch_t){mm, 4, {h, w2, b2, y_rt}, &c->down,
                                 sizeof(c->down),
                                 groups_for(accel_kp_matmul_units(&c->down), b->cpus)};
  s->launches[2] = (kb_launch_t){add, 3, {y_rt, x, y_rt}, &c->add,
                                 sizeof(c->add), 1};
  s->launch_count = 3;
  s->unit = "GFLOP/s";
  s->baseline_name = "openblas_direct";
  s->target = ">= 0.9";
  s->baseline = mlp_baseline;
  s->dims[0] = rows, s->dims[1] = d, s->dims[2] = f;
  // The baseline writes its hidden layer to p[6] and its output to p[7].
  s->work = 2.0 * rows * d * f * 2;
  return mm == NULL || add == NULL;
}

// A memory-bound kernel against memcpy of |bytes|: binds |count| buffers of
// the given sizes (floats when |floats| has the bit), the last one written.
static int bandwidth_subject(kb_t *b, kb_subject_t *s, const char *kname,
                             uint32_t count, const uint64_t *sizes,
                             uint32_t floats, const void *constants,
                             uint32_t constants_size, uint64_t units,
                             double bytes) {
  kb_launch_t *L = &s->launches[0];
  *L = (kb_launch_t){.kernel = kernel(b, kname, count, constants_size),
                     .binding_count = count, .constants = constants,
                     .constants_size = constants_size,
                     .groups = groups_for(units, b->cpus)};
  for (uint32_t i = 0; i < count; ++i) {
    void *p = buffer(b, sizes[i], (floats >> i) & 1, 1.0f, &L->bindings[i]);
    if (p == NULL) return 1;
    s->p[i] = p;
  }
  accel_launch_binding_t unused;
  s->p[6] = buffer(b, (uint64_t)bytes, 0, 0.0f, &unused);
  s->p[7] = buffer(b, (uint64_t)bytes, 0, 0.0f, &unused);
  s->launch_count = 1;
  s->unit = "GB/s";
  s->baseline_name = "memcpy_same_bytes";
  s->target = ">= 0.5";
  s->baseline = memcpy_baseline;
  s->work = bytes;
  return L->kernel == NULL || s->p[6] == NULL || s->p[7] == NULL;
}

static const accel_kernel_library_t *open_library(void) {
  const char *path = getenv("ACCEL_KERNELS");
  if (path == NULL || path[0] == '\0') path = ACCEL_KERNELS_PATH;
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (so == NULL) {
    fprintf(stderr, "accel-bench kernels: cannot load \"%s\" (set "
            "ACCEL_KERNELS): %s\n", path, dlerror());
    return NULL;
  }
  const accel_kernel_library_t *(*query)(uint32_t) =
      (const accel_kernel_library_t *(*)(uint32_t))dlsym(
          so, ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL);
  const accel_kernel_library_t *lib = query ? query(ACCEL_KERNEL_ABI_VERSION) : NULL;
  if (lib == NULL || (lib->init != NULL && lib->init() != 0)) {
    fprintf(stderr, "accel-bench kernels: %s is not a kernel library\n", path);
    return NULL;
  }
  return lib;
}

int accel_bench_kernels(const bench_args_t *args) {
  int runs = args->quick ? 3 : 9;
  kb_t b = {.lib = open_library()};
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  b.cpus = cpus > 0 ? (int)cpus : 1;
  accel_runtime_t *rt = NULL;
  if (b.lib == NULL || check(accel_runtime_create(NULL, &rt), "runtime") ||
      check(accel_device_get(rt, 0, &b.dev), "device") ||
      check(accel_stream_create(b.dev, NULL, &b.stream), "stream")) {
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "kernels", b.dev);
  static kb_subject_t subjects[8];
  static accel_kp_matmul_constants_t mm[2];
  static mlp_constants_t mlp;
  static accel_kp_qmatmul_constants_t q8, q4;
  static accel_kp_softmax_constants_t sm;
  static accel_kp_norm_constants_t ln, rms;
  const uint32_t n = 4096, rows = 1024;
  int failed = 0;
  subjects[0] = (kb_subject_t){.name = "matmul_f32_1024", .iters = args->quick ? 2 : 6};
  failed |= matmul_subject(&b, &subjects[0], 1024, 1024, 1024, &mm[0]);
  subjects[1] = (kb_subject_t){.name = "matmul_f32_1x4096x4096", .iters = args->quick ? 4 : 20};
  failed |= matmul_subject(&b, &subjects[1], 1, 4096, 4096, &mm[1]);
  subjects[2] = (kb_subject_t){.name = "mlp_block_64x512x2048", .iters = args->quick ? 10 : 60};
  failed |= mlp_subject(&b, &subjects[2], &mlp);
  int qi = args->quick ? 5 : 40;
  q8 = (accel_kp_qmatmul_constants_t){.m = 1, .n = n, .k = n};
  q4 = (accel_kp_qmatmul_constants_t){.m = 1, .n = n, .k = n, .group_size = 128};
  uint64_t q8_sizes[] = {4ull * n, (uint64_t)n * n, 4ull * n, 4ull * n};
  subjects[3] = (kb_subject_t){.name = "qgemv_int8_4096", .iters = qi};
  failed |= bandwidth_subject(&b, &subjects[3], "qmatmul_int8", 4, q8_sizes,
                              0xd, &q8, sizeof(q8), accel_kp_qmatmul_units(&q8),
                              (double)n * n + 4.0 * n);
  uint64_t groups = (uint64_t)n * n / 128;
  uint64_t q4_sizes[] = {4ull * n, (uint64_t)n * n / 2, 4 * groups, groups, 4ull * n};
  subjects[4] = (kb_subject_t){.name = "qgemv_int4_g128_4096", .iters = qi};
  failed |= bandwidth_subject(&b, &subjects[4], "qmatmul_int4", 5, q4_sizes,
                              0x15, &q4, sizeof(q4), accel_kp_qmatmul_units(&q4),
                              (double)n * n / 2 + 5.0 * groups);
  // Zero points must be 0..15 and scales positive for a real int4 layer;
  // the values do not change the work, only keep the outputs finite.
  for (uint64_t i = 0; i < groups; ++i) {
    ((uint8_t *)subjects[4].p[3])[i] &= 0x0f;
  }
  uint64_t rb = 4ull * rows * n;
  sm = (accel_kp_softmax_constants_t){.rows = rows, .cols = n};
  ln = (accel_kp_norm_constants_t){.rows = rows, .cols = n, .eps = 1e-5f};
  rms = ln;
  uint64_t sm_sizes[] = {rb, rb};
  uint64_t ln_sizes[] = {rb, 4ull * n, 4ull * n, rb};
  uint64_t rms_sizes[] = {rb, 4ull * n, rb};
  int ri = args->quick ? 3 : 20;
  subjects[5] = (kb_subject_t){.name = "softmax_4096", .iters = ri};
  failed |= bandwidth_subject(&b, &subjects[5], "softmax", 2, sm_sizes, 0x3,
                              &sm, sizeof(sm), rows, (double)rb);
  subjects[6] = (kb_subject_t){.name = "layernorm_4096", .iters = ri};
  failed |= bandwidth_subject(&b, &subjects[6], "layernorm", 4, ln_sizes, 0xf,
                              &ln, sizeof(ln), rows, (double)rb);
  subjects[7] = (kb_subject_t){.name = "rmsnorm_4096", .iters = ri};
  failed |= bandwidth_subject(&b, &subjects[7], "rmsnorm", 3, rms_sizes, 0x7,
                              &rms, sizeof(rms), rows, (double)rb);
  for (int i = 0; i < 8 && !failed; ++i) {
    failed |= subject_run(&report, &b, &subjects[i], runs);
  }
  // The attention family's figures (attention_bench.c) and the decoder
  // run end to end (decoder_bench.c), on reference.axe.
  if (!failed) {
    failed |= bench_kernels_attention(&report, rt, b.dev, args->quick) ||
              bench_kernels_decoder(&report, rt, args->quick) ||
              bench_kernels_numerics(&report, args->quick);
  }
  accel_stream_destroy(b.stream);
  for (uint32_t i = 0; i < b.buffer_count; ++i) accel_buffer_release(b.buffers[i]);
  for (uint32_t i = 0; i < b.kernel_count; ++i) accel_kernel_release(b.kernels[i]);
  accel_runtime_destroy(rt);
  return failed ? 1 : bench_print(&report, args->json);
}
