// Runs a host kernel of a code object directly, without the runtime: the
// object is dlopen()ed, its export table read, and a grid's work-groups are
// run by a chosen number of threads in a shuffled order. Kernel tests use it
// to show that results do not depend on the split, the thread count or the
// schedule, and to read the assertion message of a refused launch.
#ifndef ACCEL_TESTS_KERNEL_RUNNER_H_
#define ACCEL_TESTS_KERNEL_RUNNER_H_

#include <stdint.h>

#include "accel/kernel_abi.h"

typedef struct kernel_lib kernel_lib_t;

// Opens the code object at |path| (fails the test when it cannot).
kernel_lib_t *kernel_lib_open(const char *path);
void kernel_lib_close(kernel_lib_t *lib);
// The export named |name| (fails the test when there is none).
accel_kernel_fn_t kernel_lib_find(kernel_lib_t *lib, const char *name);

// One launch: bindings (data, size) and constants.
typedef struct kernel_launch {
  accel_kernel_fn_t fn;
  uint32_t grid[3];
  uint32_t binding_count;
  accel_kernel_binding_t bindings[8];
  const void *constants;
  uint32_t constants_size;
  // Threads that run the work-groups (>= 1), and the seed of their order.
  uint32_t threads;
  uint64_t order_seed;
} kernel_launch_t;

// Runs every work-group; returns the first non-zero return value (0 when all
// succeeded) and copies the first assertion message into |message| (empty
// when none).
int32_t kernel_run(const kernel_launch_t *launch, char *message,
                   uint64_t message_size);

#endif  // ACCEL_TESTS_KERNEL_RUNNER_H_
