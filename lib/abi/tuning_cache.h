// The tuning cache file (docs/tuning.md): tuned configurations of kernels
// keyed by device fingerprint, kernel, kernel version and the launch's
// constants (which hold its dtype and shape), in a text file that accel-tune
// writes and executables read when they load (tuning.h). The file is input:
// parsed with every field checked, fuzzed (fuzz/fuzz_tuning_cache.c).
#ifndef ACCEL_ABI_TUNING_CACHE_H_
#define ACCEL_ABI_TUNING_CACHE_H_

#include <stddef.h>
#include <stdint.h>

#include "abi/kernel_meta.h"

#define ACCEL_TUNING_CACHE_VERSION 1u
// Largest constants block a cache entry keys on.
#define ACCEL_TUNING_MAX_CONSTANTS 256u
#define ACCEL_TUNING_MAX_TOKEN 64u
#define ACCEL_TUNING_MAX_ENTRIES 65536u
#define ACCEL_TUNING_MAX_FILE_BYTES (64u << 20)

// One line of the cache.
typedef struct accel_tuning_entry {
  char fingerprint[ACCEL_TUNING_MAX_TOKEN + 1];
  char kernel[ACCEL_TUNING_MAX_TOKEN + 1];
  uint32_t version;
  uint32_t constants_size;
  // The launch's constants with every CONSTANT tunable field zeroed.
  uint8_t constants[ACCEL_TUNING_MAX_CONSTANTS];
  uint32_t value_count;
  char names[ACCEL_KERNEL_MAX_TUNABLES][ACCEL_KERNEL_MAX_TUNABLE_NAME + 1];
  uint32_t values[ACCEL_KERNEL_MAX_TUNABLES];
  // Tuned time over default time when measured (informational); 0: unknown.
  double ratio;
} accel_tuning_entry_t;

typedef struct accel_tuning_cache {
  uint32_t count;
  uint32_t capacity;
  accel_tuning_entry_t *entries;  // owned
} accel_tuning_cache_t;

// Parses the cache text |data| (|size| bytes) into |out| (initialized
// here; accel_tuning_cache_fini frees it, also after a failure).
// ACCEL_ERROR_FORMAT naming the line and field for any malformed line, an
// unknown version, or more than ACCEL_TUNING_MAX_ENTRIES entries; a later
// line with the key of an earlier one replaces it.
accel_status_t accel_tuning_cache_parse(const char *data, size_t size,
                                        accel_tuning_cache_t *out);

// Reads and parses the file |path|; a missing file is an empty cache.
// ACCEL_ERROR_IO when it cannot be read, ACCEL_ERROR_FORMAT as above.
accel_status_t accel_tuning_cache_read(const char *path,
                                       accel_tuning_cache_t *out);

// Adds |entry| to |cache|, replacing an entry with the same key.
accel_status_t accel_tuning_cache_put(accel_tuning_cache_t *cache,
                                      const accel_tuning_entry_t *entry);

// Writes |cache| to |path| atomically (a temporary file renamed over it),
// creating the parent folder when missing. ACCEL_ERROR_IO on failure.
accel_status_t accel_tuning_cache_write(const char *path,
                                        const accel_tuning_cache_t *cache);

void accel_tuning_cache_fini(accel_tuning_cache_t *cache);

// The cache's path: ACCEL_TUNING_CACHE, else
// $XDG_CACHE_HOME/accel/tuning-cache, else $HOME/.cache/accel/tuning-cache.
// ACCEL_ERROR_NOT_FOUND when none of them is set.
accel_status_t accel_tuning_cache_path(char *out, size_t size);

#endif  // ACCEL_ABI_TUNING_CACHE_H_
