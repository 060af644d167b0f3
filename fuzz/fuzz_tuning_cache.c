// libFuzzer target for the tuning cache reader (lib/abi/tuning_cache.c):
// every input must be parsed or refused with a message; anything else (a
// crash, a sanitizer report, a hang) is a bug. A parsed cache is written
// back out and parsed again, and must give the same entries. Built by
// scripts/fuzz-tuning-cache.sh.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/tuning_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  accel_tuning_cache_t cache;
  accel_status_t st = accel_tuning_cache_parse((const char *)data, size, &cache);
  if (st != ACCEL_OK) {
    if (accel_last_error()[0] == '\0') {
      abort();  // a refusal always says why
    }
    accel_tuning_cache_fini(&cache);
    return 0;
  }
  char path[64];
  snprintf(path, sizeof(path), "/tmp/accel-fuzz-tuning-%ld", (long)getpid());
  if (accel_tuning_cache_write(path, &cache) == ACCEL_OK) {
    accel_tuning_cache_t again;
    if (accel_tuning_cache_read(path, &again) != ACCEL_OK ||
        again.count != cache.count) {
      abort();  // what we write we must read back
    }
    for (uint32_t i = 0; i < cache.count; ++i) {
      const accel_tuning_entry_t *a = &cache.entries[i], *b = &again.entries[i];
      if (strcmp(a->kernel, b->kernel) != 0 || a->version != b->version ||
          a->value_count != b->value_count ||
          memcmp(a->constants, b->constants, a->constants_size) != 0) {
        abort();
      }
    }
    accel_tuning_cache_fini(&again);
    unlink(path);
  }
  accel_tuning_cache_fini(&cache);
  return 0;
}
