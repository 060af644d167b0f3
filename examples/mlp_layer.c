// example-mlp-layer: compile, load and run one transformer MLP block.
//
//   y = x + gelu(x W1 + b1) W2 + b2
//
// The program plays both sides of the compiler-runtime contract: it packs the
// layer's kernels (the reference kernels' host code object,
// libaccel_kernels.so: matmul with fused bias and GELU, and add) and its
// weights into an .axe file with the builder API, then loads that file the
// way a deployed program would, binds the mapped weights, launches the three
// kernels on a stream, and checks the result against a plain-loop reference.
//
// usage: example-mlp-layer KERNELS.so [OUT.axe] [rows d_model d_ff]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"
#include "accel/executable.h"
#include "kernel_params.h"

#define CHECK(expr)                                                    \
  do {                                                                 \
    accel_status_t st_ = (expr);                                       \
    if (st_ != ACCEL_OK) {                                             \
      fprintf(stderr, "example-mlp-layer: %s failed: %s: %s\n", #expr, \
              accel_status_name(st_), accel_last_error());             \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float rand_unit(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (float)((g_rng >> 40) & 0xffffff) / (float)0x1000000 - 0.5f;
}

static void *read_file(const char *path, uint64_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "example-mlp-layer: cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *data = malloc((size_t)size);
  if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "example-mlp-layer: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  *out_size = (uint64_t)size;
  return data;
}

static void add_weight(accel_exe_builder_t *b, const char *name,
                       const float *data, uint32_t rank, uint64_t d0,
                       uint64_t d1) {
  accel_exe_weight_desc_t w = {.struct_size = sizeof(w), .mappable = 1};
  w.info.struct_size = sizeof(w.info);
  w.info.dtype = ACCEL_DTYPE_F32;
  w.info.name = name;
  w.info.rank = rank;
  w.info.shape[0] = d0;
  w.info.shape[1] = d1;
  w.info.size_bytes = 4 * d0 * (rank == 2 ? d1 : 1);
  w.info.host_data = data;
  CHECK(accel_exe_builder_add_weight(b, &w));
}

static float gelu_ref(double v) {
  return (float)(0.5 * v *
                 (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: example-mlp-layer KERNELS.so [OUT.axe] [rows d_model "
            "d_ff]\n");
    return 2;
  }
  const char *so_path = argv[1];
  const char *axe_path = argc > 2 ? argv[2] : "mlp_layer.axe";
  uint32_t rows = argc > 5 ? (uint32_t)atoi(argv[3]) : 64;
  uint32_t d = argc > 5 ? (uint32_t)atoi(argv[4]) : 512;
  uint32_t f = argc > 5 ? (uint32_t)atoi(argv[5]) : 2048;
  if (rows == 0 || d == 0 || f == 0) {
    fprintf(stderr, "example-mlp-layer: sizes must be positive\n");
    return 2;
  }

  // ---- compile side: pack kernels and weights into an .axe file ----------
  float *w1 = malloc(4ull * d * f), *b1 = malloc(4ull * f);
  float *w2 = malloc(4ull * f * d), *b2 = malloc(4ull * d);
  float *x = malloc(4ull * rows * d);
  for (uint64_t i = 0; i < (uint64_t)d * f; ++i) w1[i] = rand_unit() * 0.1f;
  for (uint64_t i = 0; i < f; ++i) b1[i] = rand_unit() * 0.1f;
  for (uint64_t i = 0; i < (uint64_t)f * d; ++i) w2[i] = rand_unit() * 0.1f;
  for (uint64_t i = 0; i < d; ++i) b2[i] = rand_unit() * 0.1f;
  for (uint64_t i = 0; i < (uint64_t)rows * d; ++i) x[i] = rand_unit();

  double t0 = now_ms();
  accel_exe_builder_t *builder = NULL;
  CHECK(accel_exe_builder_create(&builder));
  // The signatures of kernels/host/kernel_params.h.
  static const accel_kernel_binding_decl_t matmul_bindings[4] = {
      {.name = "a", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "b", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "bias", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "c", .access = ACCEL_KERNEL_ACCESS_WRITE, .alignment = 4},
  };
  static const accel_kernel_binding_decl_t add_bindings[3] = {
      {.name = "a", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "b", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "y", .access = ACCEL_KERNEL_ACCESS_WRITE, .alignment = 4},
  };
  accel_exe_kernel_desc_t kd = {
      .struct_size = sizeof(kd),
      .name = "matmul",
      .binding_count = 4,
      .constants_size = sizeof(accel_kp_matmul_constants_t),
      .bindings = matmul_bindings};
  CHECK(accel_exe_builder_add_kernel(builder, &kd));
  kd = (accel_exe_kernel_desc_t){
      .struct_size = sizeof(kd),
      .name = "add",
      .binding_count = 3,
      .constants_size = sizeof(accel_kp_eltwise_constants_t),
      .bindings = add_bindings};
  CHECK(accel_exe_builder_add_kernel(builder, &kd));
  uint64_t so_size = 0;
  void *so = read_file(so_path, &so_size);
#if defined(__x86_64__)
  const char *target = "host-x86_64";
#else
  const char *target = "host-aarch64";
#endif
  CHECK(accel_exe_builder_add_code(builder, target, ACCEL_CODE_FORMAT_ELF_SO,
                                   so, so_size));
  add_weight(builder, "mlp.w1", w1, 2, d, f);
  add_weight(builder, "mlp.b1", b1, 1, f, 0);
  add_weight(builder, "mlp.w2", w2, 2, f, d);
  add_weight(builder, "mlp.b2", b2, 1, d, 0);
  CHECK(accel_exe_builder_add_metadata(builder, "model", "mlp-block"));
  CHECK(accel_exe_builder_write_file(builder, axe_path, NULL, NULL));
  accel_exe_builder_destroy(builder);
  double t_pack = now_ms() - t0;
  printf("packed %s: 2 kernels, 4 weights (%.1f MiB) in %.1f ms\n", axe_path,
         4.0 * (2.0 * d * f + f + d) / (1 << 20), t_pack);

  // ---- run side: load and launch -------------------------------------------
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  CHECK(accel_runtime_create(NULL, &rt));
  CHECK(accel_device_get(rt, 0, &dev));
  t0 = now_ms();
  accel_executable_t *exe = NULL;
  CHECK(accel_executable_load_file(rt, dev, axe_path, 0, &exe));
  double t_load = now_ms() - t0;
  accel_kernel_t *matmul = NULL, *add = NULL;
  CHECK(accel_executable_kernel(exe, "matmul", &matmul));
  CHECK(accel_executable_kernel(exe, "add", &add));
  accel_buffer_t *bw1, *bb1, *bw2, *bb2;
  CHECK(accel_executable_weight_buffer(exe, "mlp.w1", &bw1));
  CHECK(accel_executable_weight_buffer(exe, "mlp.b1", &bb1));
  CHECK(accel_executable_weight_buffer(exe, "mlp.w2", &bw2));
  CHECK(accel_executable_weight_buffer(exe, "mlp.b2", &bb2));
  printf("loaded in %.2f ms (hashes checked, weights mapped in place)\n",
         t_load);

  accel_buffer_t *bx, *bh, *by;
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc)};
  desc.size_bytes = 4ull * rows * d;
  CHECK(accel_buffer_alloc(dev, &desc, &bx));
  CHECK(accel_buffer_alloc(dev, &desc, &by));
  desc.size_bytes = 4ull * rows * f;
  CHECK(accel_buffer_alloc(dev, &desc, &bh));

  accel_stream_t *s = NULL;
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "mlp"};
  CHECK(accel_stream_create(dev, &sd, &s));
  accel_event_t *ev_start, *ev_end;
  CHECK(accel_event_create(dev, 0, &ev_start));
  CHECK(accel_event_create(dev, 0, &ev_end));

  float *y = malloc(4ull * rows * d);
  const int iters = 10;
  // Layer 1 fuses the bias and GELU into the matmul; layer 2 the bias. The
  // kernels tile the output themselves (fixed tiles, any grid): one
  // work-group per tile lets the device's threads share them.
  accel_kp_matmul_constants_t c1 = {
      .m = rows, .n = f, .k = d, .flags = ACCEL_KP_MM_BIAS,
      .dtype_a = ACCEL_KP_DTYPE_F32, .dtype_b = ACCEL_KP_DTYPE_F32,
      .activation = ACCEL_KP_ACT_GELU_TANH};
  accel_kp_matmul_constants_t c2 = {
      .m = rows, .n = d, .k = f, .flags = ACCEL_KP_MM_BIAS,
      .dtype_a = ACCEL_KP_DTYPE_F32, .dtype_b = ACCEL_KP_DTYPE_F32};
  accel_kp_eltwise_constants_t ca = {.count = rows * d};
  CHECK(accel_stream_copy_from_host(s, bx, 0, x, 4ull * rows * d));
  CHECK(accel_event_record(ev_start, s));
  for (int it = 0; it < iters; ++it) {
    accel_launch_binding_t l1[4] = {{bx, 0, 0}, {bw1, 0, 0}, {bb1, 0, 0},
                                    {bh, 0, 0}};
    accel_launch_desc_t ld = {
        .struct_size = sizeof(ld),
        .workgroup_count = {(uint32_t)accel_kp_matmul_units(&c1), 1, 1},
        .binding_count = 4,
        .constants_size = sizeof(c1),
        .bindings = l1,
        .constants = &c1};
    CHECK(accel_launch(s, matmul, &ld));
    accel_launch_binding_t l2[4] = {{bh, 0, 0}, {bw2, 0, 0}, {bb2, 0, 0},
                                    {by, 0, 0}};
    ld.workgroup_count[0] = (uint32_t)accel_kp_matmul_units(&c2);
    ld.bindings = l2;
    ld.constants = &c2;
    CHECK(accel_launch(s, matmul, &ld));
    accel_launch_binding_t l3[3] = {{by, 0, 0}, {bx, 0, 0}, {by, 0, 0}};
    accel_launch_desc_t la = {
        .struct_size = sizeof(la),
        .workgroup_count = {(uint32_t)accel_kp_eltwise_units(&ca), 1, 1},
        .binding_count = 3,
        .constants_size = sizeof(ca),
        .bindings = l3,
        .constants = &ca};
    CHECK(accel_launch(s, add, &la));
  }
  CHECK(accel_event_record(ev_end, s));
  CHECK(accel_stream_copy_to_host(s, y, by, 0, 4ull * rows * d));
  CHECK(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  int64_t ns = 0;
  CHECK(accel_event_elapsed_ns(ev_start, ev_end, &ns));
  double flops = 2.0 * 2.0 * rows * (double)d * f;
  printf("ran the MLP block %d times on %s: %.3f ms per block, %.2f GFLOP/s\n",
         iters, "host:0", ns / 1e6 / iters, flops * iters / (double)ns);

  // ---- reference -------------------------------------------------------------
  double max_err = 0;
  float *h = malloc(4ull * f);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j = 0; j < f; ++j) {
      double acc = b1[j];
      for (uint32_t k = 0; k < d; ++k) acc += (double)x[r * d + k] * w1[k * f + j];
      h[j] = gelu_ref(acc);
    }
    for (uint32_t j = 0; j < d; ++j) {
      double acc = b2[j];
      for (uint32_t k = 0; k < f; ++k) acc += (double)h[k] * w2[k * d + j];
      double want = acc + x[r * d + j];
      double err = fabs(want - y[r * d + j]);
      if (err > max_err) max_err = err;
    }
  }
  int ok = max_err < 1e-3;
  printf("max |error| against the plain-loop reference: %.2e %s\n", max_err,
         ok ? "ok" : "TOO LARGE");

  accel_event_release(ev_start);
  accel_event_release(ev_end);
  accel_stream_destroy(s);
  accel_buffer_release(bx);
  accel_buffer_release(bh);
  accel_buffer_release(by);
  accel_buffer_release(bw1);
  accel_buffer_release(bb1);
  accel_buffer_release(bw2);
  accel_buffer_release(bb2);
  accel_executable_release(exe);
  accel_runtime_destroy(rt);
  free(w1); free(b1); free(w2); free(b2); free(x); free(y); free(h); free(so);
  printf("%s\n", ok ? "example-mlp-layer: OK" : "example-mlp-layer: FAILED");
  return ok ? 0 : 1;
}
