// trace-tensors: a fixed program whose kernels write known NaN and Inf
// counts, for the tensor summary tests (ACCEL_TRACE_TENSORS).
//
//   trace-tensors REFERENCE_AXE [--record PATH]
//
// On stream "tensors" it launches the reference kernels of REFERENCE_AXE:
//   softmax over x [4, 8], x[r][c] = 0.25 c - 0.5 r, row 2 all -inf: its y
//     (binding 1) holds 8 NaN (row 2) and 24 finite values, each row
//     summing to 1;
//   rmsnorm over the same x with row 2 set to 1 + c and element [2][3] to 0,
//     gamma = 1 except gamma[3] = +inf, eps 0: its y (binding 2) holds
//     3 Inf (elements [r][3] of rows 0, 1 and 3, whose x is not 0), 1 NaN
//     (0 * inf at [2][3]) and 28 finite values.
// Writes the inputs and outputs as "kernel<TAB>x|y<TAB>index<TAB>value"
// lines (%.9g) on stdout, so that a test can recompute the summaries. With
// --record the built-in recorder runs from before the runtime is created
// until after the launches.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accel/accel.h"
#include "kernel_params.h"

#define ROWS 4u
#define COLS 8u

#define CHECK(expr)                                                       \
  do {                                                                    \
    accel_status_t st_ = (expr);                                          \
    if (st_ != ACCEL_OK) {                                                \
      fprintf(stderr, "trace-tensors: %s: %s: %s\n", #expr,               \
              accel_status_name(st_), accel_last_error());                \
      return 1;                                                           \
    }                                                                     \
  } while (0)

// A buffer of |bytes| on |dev| holding |data|.
static accel_status_t upload(accel_device_t *dev, const void *data,
                             uint64_t bytes, accel_buffer_t **out) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = bytes};
  accel_status_t st = accel_buffer_alloc(dev, &d, out);
  void *p = NULL;
  if (st == ACCEL_OK) {
    st = accel_buffer_host_pointer(*out, &p);
  }
  if (st == ACCEL_OK) {
    memcpy(p, data, bytes);
  }
  return st;
}

static void print(const char *kernel, const char *what, const float *v,
                  uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    printf("%s\t%s\t%u\t%.9g\n", kernel, what, i, (double)v[i]);
  }
}

int main(int argc, char **argv) {
  const char *record = NULL;
  if (argc == 4 && strcmp(argv[2], "--record") == 0) {
    record = argv[3];
  } else if (argc != 2) {
    fprintf(stderr, "usage: trace-tensors REFERENCE_AXE [--record PATH]\n");
    return 2;
  }
  if (record != NULL) {
    CHECK(accel_trace_start(record));
  }
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_executable_t *exe = NULL;
  accel_stream_t *stream = NULL;
  CHECK(accel_runtime_create(NULL, &rt));
  CHECK(accel_device_get(rt, 0, &dev));
  CHECK(accel_executable_load_file(rt, dev, argv[1], 0, &exe));
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "tensors"};
  CHECK(accel_stream_create(dev, &sd, &stream));
  accel_kernel_t *softmax = NULL, *rmsnorm = NULL;
  CHECK(accel_executable_kernel(exe, "softmax", &softmax));
  CHECK(accel_executable_kernel(exe, "rmsnorm", &rmsnorm));

  float x[ROWS * COLS], x2[ROWS * COLS], gamma[COLS], zero[ROWS * COLS];
  for (uint32_t r = 0; r < ROWS; ++r) {
    for (uint32_t c = 0; c < COLS; ++c) {
      x[r * COLS + c] = r == 2 ? -INFINITY : 0.25f * (float)c - 0.5f * (float)r;
      x2[r * COLS + c] = r == 2 ? 1.0f + (float)c : x[r * COLS + c];
    }
  }
  x2[2 * COLS + 3] = 0.0f;
  for (uint32_t c = 0; c < COLS; ++c) {
    gamma[c] = c == 3 ? INFINITY : 1.0f;
  }
  // x2[0][3] = 0.75, x2[1][3] = 0.25, x2[3][3] = -0.75: none is 0.
  memset(zero, 0, sizeof(zero));
  accel_buffer_t *bx = NULL, *bx2 = NULL, *bg = NULL, *by = NULL, *by2 = NULL;
  CHECK(upload(dev, x, sizeof(x), &bx));
  CHECK(upload(dev, x2, sizeof(x2), &bx2));
  CHECK(upload(dev, gamma, sizeof(gamma), &bg));
  CHECK(upload(dev, zero, sizeof(zero), &by));
  CHECK(upload(dev, zero, sizeof(zero), &by2));

  accel_kp_softmax_constants_t sc = {.rows = ROWS, .cols = COLS};
  accel_launch_binding_t sb[2] = {{.buffer = bx}, {.buffer = by}};
  accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                            .workgroup_count = {1, 1, 1},
                            .binding_count = 2, .bindings = sb,
                            .constants_size = sizeof(sc), .constants = &sc};
  CHECK(accel_launch(stream, softmax, &ld));
  accel_kp_norm_constants_t nc = {.rows = ROWS, .cols = COLS, .eps = 0.0f};
  accel_launch_binding_t nb[3] = {
      {.buffer = bx2}, {.buffer = bg}, {.buffer = by2}};
  ld.binding_count = 3;
  ld.bindings = nb;
  ld.constants_size = sizeof(nc);
  ld.constants = &nc;
  CHECK(accel_launch(stream, rmsnorm, &ld));
  CHECK(accel_stream_synchronize(stream, ACCEL_TIMEOUT_INFINITE));
  if (record != NULL) {
    CHECK(accel_trace_stop());
  }

  void *y = NULL, *y2 = NULL;
  CHECK(accel_buffer_host_pointer(by, &y));
  CHECK(accel_buffer_host_pointer(by2, &y2));
  print("softmax", "x", x, ROWS * COLS);
  print("softmax", "y", y, ROWS * COLS);
  print("rmsnorm", "x", x2, ROWS * COLS);
  print("rmsnorm", "y", y2, ROWS * COLS);

  accel_buffer_release(bx);
  accel_buffer_release(bx2);
  accel_buffer_release(bg);
  accel_buffer_release(by);
  accel_buffer_release(by2);
  accel_stream_destroy(stream);
  accel_executable_release(exe);
  accel_runtime_destroy(rt);
  return 0;
}
