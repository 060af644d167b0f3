// Tuning at launch (docs/tuning.md): what an executable takes from the
// tuning cache when it loads, and how a launch applies it.
#ifndef ACCEL_ABI_TUNING_H_
#define ACCEL_ABI_TUNING_H_

#include "abi/executable_impl.h"
#include "abi/tuning_cache.h"

// The fingerprint of |device|: "<backend>-<16 hex digits>", the XXH3 hash
// of its name (CPU model and thread count on the host), target, compute
// queues, memory and the host thread count of its runtime.
void accel_tuning_fingerprint(const accel_device_t *device,
                              char out[ACCEL_TUNING_MAX_TOKEN + 1]);

// Fills the key part of |out| (fingerprint, kernel, version, constants with
// the tunable fields of |meta| zeroed) for a launch of |kernel| with
// |constants|. ACCEL_ERROR_UNSUPPORTED when the constants are larger than
// ACCEL_TUNING_MAX_CONSTANTS.
accel_status_t accel_tuning_key(const char *fingerprint, const char *kernel,
                                const accel_kernel_meta_t *meta,
                                const void *constants,
                                uint32_t constants_size,
                                accel_tuning_entry_t *out);

// Loads the configurations of |exe|'s kernels from the cache file (unless
// the runtime turned tuning off or no kernel has tunables) and points each
// tuned kernel's |tuning| at them. A cache that cannot be read or parsed is
// ignored with one line on stderr; only running out of memory fails.
accel_status_t accel_tuning_attach(accel_executable_t *exe);

// Frees what accel_tuning_attach made.
void accel_tuning_detach(accel_executable_t *exe);

// When |k| has a tuned configuration for |in|'s constants, fills |out| with
// |in| changed accordingly (constants copied into |constants_buf|, which
// holds ACCEL_TUNING_MAX_CONSTANTS bytes) and returns true.
bool accel_tuning_apply(const accel_kernel_t *k,
                        const accel_kernel_dispatch_t *in,
                        accel_kernel_dispatch_t *out, uint8_t *constants_buf);

#endif  // ACCEL_ABI_TUNING_H_
