// Model-layer host kernels, built as one host code object
// (libaccel_layer_kernels.so) that examples pack into .axe files with their
// weights. They follow docs/kernel-abi.md: one call per work-group, bindings
// and constants in declaration order. Matrix products use OpenBLAS (one
// thread per call: the host device already spreads work-groups over its
// threads).
//
//   dense   y[r, n] = act(sum_k x[r, k] * w[k, n] + b[n]) for the
//           rows_per_group rows of this work-group.
//           bindings: x (read, f32 [rows, k]), w (read, f32 [k, n]),
//                     b (read, f32 [n]), y (write, f32 [rows, n]).
//           constants: uint32 rows, k, n, rows_per_group, activation
//                      (0 none, 1 gelu-tanh), uint32 reserved.
//   add     y[i] += r[i] for the 4096 elements of this work-group.
//           bindings: y (read-write, f32), r (read, f32).
//           constants: uint32 count, uint32 reserved.
#include <cblas.h>
#include <math.h>
#include <stdint.h>

#include "accel/kernel_abi.h"

void openblas_set_num_threads(int num_threads);

#define ADD_ITEMS 4096u

typedef struct dense_constants {
  uint32_t rows, k, n, rows_per_group, activation, reserved;
} dense_constants_t;

static float gelu_tanh(float v) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
}

ACCEL_KERNEL_ENTRY int32_t dense(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t dense(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg) {
  dense_constants_t c;
  __builtin_memcpy(&c, d->constants, sizeof(c));
  if (c.rows_per_group == 0 ||
      d->bindings[0].size_bytes < 4ull * c.rows * c.k ||
      d->bindings[1].size_bytes < 4ull * c.k * c.n ||
      d->bindings[2].size_bytes < 4ull * c.n ||
      d->bindings[3].size_bytes < 4ull * c.rows * c.n) {
    return 1;  // the bindings do not hold the shapes the constants give
  }
  uint64_t first = (uint64_t)wg->id[0] * c.rows_per_group;
  if (first >= c.rows) {
    return 0;
  }
  uint32_t count = (uint32_t)(first + c.rows_per_group <= c.rows
                                  ? c.rows_per_group
                                  : c.rows - first);
  const float *x = (const float *)d->bindings[0].data + first * c.k;
  const float *w = d->bindings[1].data;
  const float *b = d->bindings[2].data;
  float *y = (float *)d->bindings[3].data + first * c.n;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)count, (int)c.n,
              (int)c.k, 1.0f, x, (int)c.k, w, (int)c.n, 0.0f, y, (int)c.n);
  for (uint32_t r = 0; r < count; ++r) {
    float *row = y + (uint64_t)r * c.n;
    for (uint32_t j = 0; j < c.n; ++j) {
      float v = row[j] + b[j];
      row[j] = c.activation == 1 ? gelu_tanh(v) : v;
    }
  }
  return 0;
}

ACCEL_KERNEL_ENTRY int32_t add(const accel_kernel_dispatch_t *d,
                               const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t add(const accel_kernel_dispatch_t *d,
                               const accel_kernel_workgroup_t *wg) {
  uint32_t count;
  __builtin_memcpy(&count, d->constants, sizeof(count));
  if (d->bindings[0].size_bytes < 4ull * count ||
      d->bindings[1].size_bytes < 4ull * count) {
    return 1;
  }
  float *y = d->bindings[0].data;
  const float *r = d->bindings[1].data;
  uint64_t first = (uint64_t)wg->id[0] * ADD_ITEMS;
  uint64_t last = first + ADD_ITEMS < count ? first + ADD_ITEMS : count;
  for (uint64_t i = first; i < last; ++i) {
    y[i] += r[i];
  }
  return 0;
}

static int32_t library_init(void) {
  openblas_set_num_threads(1);
  return 0;
}

static const accel_kernel_export_t k_exports[] = {
    {.name = "dense", .fn = dense},
    {.name = "add", .fn = add},
};

static const accel_kernel_library_t k_library = {
    .struct_size = sizeof(accel_kernel_library_t),
    .abi_version = ACCEL_KERNEL_ABI_VERSION,
    .name = "accel model-layer host kernels",
    .init = library_init,
    .export_count = sizeof(k_exports) / sizeof(k_exports[0]),
    .exports = k_exports,
};

ACCEL_KERNEL_EXPORT const accel_kernel_library_t *accel_kernel_library_query(
    uint32_t runtime_abi_version);

ACCEL_KERNEL_EXPORT const accel_kernel_library_t *accel_kernel_library_query(
    uint32_t runtime_abi_version) {
  if ((runtime_abi_version >> 16) != ACCEL_KERNEL_ABI_VERSION_MAJOR) {
    return NULL;
  }
  return &k_library;
}
