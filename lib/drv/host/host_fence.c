// Asymmetric fences for the host backend: membarrier(PRIVATE_EXPEDITED)
// lets the rare side of a store-load (Dekker) handshake pay for the fence
// that the frequent side then leaves out (see host_internal.h).
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "drv/host/host_internal.h"

// 1 once membarrier(PRIVATE_EXPEDITED) is registered, 0 if it is not
// available, -1 before accel_host_fences_init. Written once, before any
// queue exists (device open), read relaxed.
_Atomic int accel_host_asymmetric_g = -1;

// A forked child has one thread and a copy of the flag: register it again
// (the kernel keeps the registration across fork; this makes it independent
// of that), or fall back to full fences there.
static void fences_atfork_child(void) {
  if (atomic_load_explicit(&accel_host_asymmetric_g, memory_order_relaxed) ==
          1 &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) !=
          0) {
    atomic_store_explicit(&accel_host_asymmetric_g, 0, memory_order_relaxed);
  }
}

void accel_host_fences_init(void) {
  if (atomic_load_explicit(&accel_host_asymmetric_g, memory_order_acquire) >=
      0) {
    return;
  }
  int ok = 0;
  // ACCEL_MEMBARRIER=0: full fences on both sides and no biased queue
  // owners, as on a kernel without membarrier (read once per process).
  const char *env = getenv("ACCEL_MEMBARRIER");
  bool allowed = env == NULL || strcmp(env, "0") != 0;
  long cmds = allowed ? syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0) : 0;
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) ==
          0) {
    ok = 1;
  }
  int expected = -1;
  if (atomic_compare_exchange_strong_explicit(&accel_host_asymmetric_g,
                                              &expected, ok,
                                              memory_order_acq_rel,
                                              memory_order_acquire) &&
      ok == 1) {
    (void)pthread_atfork(NULL, NULL, fences_atfork_child);
  }
}

void accel_host_heavy_fence(void) {
  accel_host_full_fence();
  if (accel_host_asymmetric()) {
    // Cannot fail once registered (the kernel supports the command).
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
  }
}
