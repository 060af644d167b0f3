// The failure of a lock-discipline check (lock.h).
#include "core/lock.h"

#include <stdio.h>
#include <stdlib.h>

void accel_lock_not_held(const char *lock, const char *func) {
  fprintf(stderr, "accel: %s called without %s held\n", func, lock);
  abort();
}
