// Test harness of the reference kernels (tests/kernels): packs each kernel a
// case names, with the code object ACCEL_TEST_KERNELS names
// (libaccel_kernels.so), into an .axe image, loads it on the host device as
// a deployed program would, and runs launch cases on runtimes with 1, 2 or 7
// host threads (ACCEL_HOST_THREADS),
// so that a test can compare the bits across thread counts and grids. Also
// the tests' own reference arithmetic helpers, written independently of the
// kernels (float64, their own dtype conversions).
#ifndef ACCEL_TESTS_KERNELS_KERNEL_HARNESS_H_
#define ACCEL_TESTS_KERNELS_KERNEL_HARNESS_H_

#include "test_support.h"

#define KT_MAX_BINDINGS 8

// One launch: bindings with their initial contents, constants and a grid.
typedef struct kt_case {
  const char *kernel;
  // One letter per binding: 'r' read, 'w' write, 'b' both.
  const char *access;
  uint32_t binding_count;
  // Initial contents (NULL: zeros) and bound length of each binding. A
  // length of 0 binds a 4-byte buffer (kernels whose shapes are empty).
  const void *data[KT_MAX_BINDINGS];
  uint64_t bytes[KT_MAX_BINDINGS];
  const void *constants;
  uint32_t constants_size;
  // Work-groups (in x); 0 means 1.
  uint32_t groups;
  // alias[i] = j + 1 binds binding j's buffer again as binding i (in-place
  // kernels); 0: a buffer of its own.
  uint8_t alias[KT_MAX_BINDINGS];
} kt_case_t;

// Runs |c| on the runtime with |threads| host threads (1, 2 or 7) and waits.
// Each binding ends where an inaccessible page begins (host memory
// registered with accel_host_register; a plain buffer where pinning is over
// RLIMIT_MEMLOCK), so a kernel that read or wrote past a binding's bound
// length would fault.
// On ACCEL_OK, out[i] (when |out| is not NULL) receives a malloc'd copy of
// binding i after the launch (free with kt_free_outputs). On failure the
// stream is replaced and kt_expect_failure sees the message.
accel_status_t kt_run(const kt_case_t *c, uint32_t threads, void **out);
void kt_free_outputs(const kt_case_t *c, void **out);

// Runs |c| with 1, 2 and 7 threads and the grids 1, 2, 3, 7, |units| and
// |units| + 3 work-groups, asserting that every output binding is
// bit-identical to the first run. Returns the first run's outputs.
void kt_check_reproducible(const kt_case_t *c, uint64_t units, void **out);

// Asserts that |c| fails with ACCEL_ERROR_ABORTED and a message containing
// |needle| (and does not fault: see kt_run).
void kt_expect_failure(const kt_case_t *c, const char *needle);

// Closes the runtimes (cmocka group teardown).
int kt_teardown(void **state);

// Reference helpers.
double kt_uniform(test_rng_t *rng, double lo, double hi);
double kt_bf16_value(uint16_t h);
uint16_t kt_bf16_from(double v);  // truncation: any bf16 is fine as input
double kt_f16_value(uint16_t h);
uint16_t kt_f16_from(double v);
// The activation |op| (accel_kp_activation) of |v| in float64.
double kt_activation(uint32_t op, double v);
// Largest |got - want| / (tol_abs + tol_rel * scale[i]) over n values,
// printing the first failure; asserts it is <= 1.
void kt_assert_close(const char *what, const float *got, const double *want,
                     const double *scale, uint64_t n, double tol_rel,
                     double tol_abs);

#endif  // ACCEL_TESTS_KERNELS_KERNEL_HARNESS_H_
