#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/runtime.h"
#include "accel_config.h"
#include "core/error.h"
#include "core/runtime_impl.h"
#include "core/driver_device.h"
#include "core/health_impl.h"
#include "runtime/runtime_impl.h"
#include "topo/placement.h"
#include "trace/trace_hooks.h"

#define ACCEL_DEFAULT_SPIN_NS 100000ull
#define ACCEL_MAX_HOST_DEVICES 64u
#define ACCEL_DEFAULT_STREAM_COPY_DMA_MIN_BYTES (1ull << 20)
// Two thread handoffs to a host copy engine and back cost about as much as
// copying 16 KiB from cache (docs/dma.md).
#define ACCEL_DEFAULT_DMA_INLINE_MAX_BYTES (16ull << 10)

void accel_runtime_options_init(accel_runtime_options_t *opts) {
  if (opts != NULL) {
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
  }
}

#define KNOWN_RUNTIME_FLAGS                                          \
  (ACCEL_RUNTIME_FLAG_CHECK_NUMERICS | ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES | \
   ACCEL_RUNTIME_FLAG_TUNING_OFF)

// Resolves options: caller fields (as far as its struct_size reaches), then
// the environment on top, then defaults for what is still zero.
// Copies the caller's options (a struct of any size from its first
// version on) into |out|, which holds the defaults.
static accel_status_t copy_caller_options(const accel_runtime_options_t *in,
                                          accel_runtime_options_t *out) {
  if (in->struct_size < offsetof(accel_runtime_options_t, spin_ns)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "runtime options: struct_size %u is too small "
                       "(use accel_runtime_options_init)",
                       in->struct_size);
  }
  size_t n = in->struct_size < sizeof(*out) ? in->struct_size : sizeof(*out);
  memcpy(out, in, n);
  out->struct_size = sizeof(*out);
  if ((out->flags & ~(uint32_t)KNOWN_RUNTIME_FLAGS) != 0 ||
      out->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "runtime options: unknown flags 0x%x or reserved0 %u "
                       "set",
                       out->flags & ~(uint32_t)KNOWN_RUNTIME_FLAGS,
                       out->reserved0);
  }
  return ACCEL_OK;
}

// Sets or clears |bit| of |*flags| from the switch |name| when it is set:
// |on_word| / "1" set it, |off_word| / "0" clear it (|invert| swaps).
static accel_status_t env_switch(const char *name, const char *on_word,
                                 const char *off_word, bool invert,
                                 uint32_t bit, accel_runtime_flags_t *flags) {
  const char *v = getenv(name);
  if (v == NULL) {
    return ACCEL_OK;
  }
  bool on;
  if (strcmp(v, "1") == 0 || strcmp(v, on_word) == 0) {
    on = true;
  } else if (strcmp(v, "0") == 0 || strcmp(v, off_word) == 0) {
    on = false;
  } else {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s=\"%s\" must be %s (1) or %s (0)", name, v, on_word,
                       off_word);
  }
  if (on != invert) {
    *flags |= bit;
  } else {
    *flags &= ~bit;
  }
  return ACCEL_OK;
}

// The ACCEL_* overrides of the options (accel_env_vars lists them).
static accel_status_t apply_environment(accel_runtime_options_t *out) {
  uint64_t v = 0;
  bool invalid = false;
  ACCEL_RETURN_IF_ERROR(env_switch("ACCEL_CHECK_NUMERICS", "on", "off", false,
                                   ACCEL_RUNTIME_FLAG_CHECK_NUMERICS,
                                   &out->flags));
  ACCEL_RETURN_IF_ERROR(env_switch("ACCEL_TRACE_TENSORS", "on", "off", false,
                                   ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES,
                                   &out->flags));
  ACCEL_RETURN_IF_ERROR(env_switch("ACCEL_TUNING", "on", "off", true,
                                   ACCEL_RUNTIME_FLAG_TUNING_OFF,
                                   &out->flags));
  if (accel_env_u64("ACCEL_SPIN_NS", &v, &invalid)) {
    if (invalid) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_SPIN_NS=\"%s\" is not a number of ns",
                         getenv("ACCEL_SPIN_NS"));
    }
    out->spin_ns = v == 0 ? 1 : v;  // "do not spin" (0 would mean default)
  }
  if (accel_env_u64("ACCEL_HOST_DEVICES", &v, &invalid)) {
    if (invalid || v == 0 || v > ACCEL_MAX_HOST_DEVICES) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_HOST_DEVICES=\"%s\" must be 1 to %u",
                         getenv("ACCEL_HOST_DEVICES"), ACCEL_MAX_HOST_DEVICES);
    }
    out->host_device_count = (uint32_t)v;
  }
  if (accel_env_u64("ACCEL_STREAM_COPY_DMA_MIN_BYTES", &v, &invalid)) {
    if (invalid) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_STREAM_COPY_DMA_MIN_BYTES=\"%s\" is not a "
                         "number of bytes",
                         getenv("ACCEL_STREAM_COPY_DMA_MIN_BYTES"));
    }
    out->stream_copy_dma_min_bytes = v == 0 ? 1 : v;  // 0: every copy
  }
  const char *visible = getenv("ACCEL_VISIBLE_DEVICES");
  if (visible != NULL) {
    out->visible_devices = visible;
  }
  return ACCEL_OK;
}

// Reads the count |name| (1 to |max|) into |*out| when it is set.
static accel_status_t env_count(const char *name, uint32_t max,
                                uint32_t *out) {
  uint64_t v = 0;
  bool invalid = false;
  if (accel_env_u64(name, &v, &invalid)) {
    if (invalid || v == 0 || v > max) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s=\"%s\" must be 1 to %u", name, getenv(name), max);
    }
    *out = (uint32_t)v;
  }
  return ACCEL_OK;
}

// ACCEL_WATCHDOG_MS: the default progress deadline of streams and DMA
// queues (docs/health.md); unset or 0: off.
static accel_status_t env_watchdog(uint64_t *out_ns) {
  uint64_t v = 0;
  bool invalid = false;
  *out_ns = 0;
  if (accel_env_u64("ACCEL_WATCHDOG_MS", &v, &invalid)) {
    if (invalid || v > UINT64_MAX / 1000000ull) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_WATCHDOG_MS=\"%s\" is not a number of "
                         "milliseconds",
                         getenv("ACCEL_WATCHDOG_MS"));
    }
    *out_ns = v * 1000000ull;
  }
  return ACCEL_OK;
}

static accel_status_t resolve_options(const accel_runtime_options_t *in,
                                      accel_runtime_options_t *out) {
  accel_runtime_options_init(out);
  if (in != NULL) {
    ACCEL_RETURN_IF_ERROR(copy_caller_options(in, out));
  }
  ACCEL_RETURN_IF_ERROR(apply_environment(out));
  if (out->spin_ns == 0) {
    out->spin_ns = ACCEL_DEFAULT_SPIN_NS;
  }
  if (out->host_device_count == 0) {
    out->host_device_count = 1;
  }
  if (out->stream_copy_dma_min_bytes == 0) {
    out->stream_copy_dma_min_bytes = ACCEL_DEFAULT_STREAM_COPY_DMA_MIN_BYTES;
  }
  if (out->host_device_count > ACCEL_MAX_HOST_DEVICES) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "runtime options: host_device_count %u exceeds %u",
                       out->host_device_count, ACCEL_MAX_HOST_DEVICES);
  }
  return ACCEL_OK;
}

static accel_device_t *find_device(accel_runtime_t *rt, const char *token) {
  char *end = NULL;
  unsigned long index = strtoul(token, &end, 10);
  if (end != token && *end == '\0') {
    return index < rt->all_device_count ? rt->all_devices[index] : NULL;
  }
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    if (strcmp(rt->all_devices[i]->info.id, token) == 0) {
      return rt->all_devices[i];
    }
  }
  return NULL;
}

// Applies the visible-device list. Tokens are indices into the full list or
// ids; duplicates are rejected so that one device never appears twice.
static accel_status_t apply_visibility(accel_runtime_t *rt,
                                       const char *visible) {
  rt->devices = calloc(rt->all_device_count ? rt->all_device_count : 1,
                       sizeof(*rt->devices));
  if (rt->devices == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "runtime: cannot allocate the device list");
  }
  if (visible == NULL || visible[0] == '\0') {
    for (uint32_t i = 0; i < rt->all_device_count; ++i) {
      rt->devices[i] = rt->all_devices[i];
    }
    rt->device_count = rt->all_device_count;
  } else {
    char list[512];
    if (strlen(visible) >= sizeof(list)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "visible devices: list longer than %zu characters",
                         sizeof(list) - 1);
    }
    strcpy(list, visible);
    char *save = NULL;
    for (char *tok = strtok_r(list, ", ", &save); tok != NULL;
         tok = strtok_r(NULL, ", ", &save)) {
      accel_device_t *dev = find_device(rt, tok);
      if (dev == NULL) {
        return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                           "visible devices \"%s\": no device \"%s\" (there "
                           "are %u: indices 0-%u or ids like host:0)",
                           visible, tok, rt->all_device_count,
                           rt->all_device_count ? rt->all_device_count - 1
                                                : 0);
      }
      for (uint32_t i = 0; i < rt->device_count; ++i) {
        if (rt->devices[i] == dev) {
          return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                             "visible devices \"%s\": device %s listed twice",
                             visible, dev->info.id);
        }
      }
      rt->devices[rt->device_count++] = dev;
    }
  }
  for (uint32_t i = 0; i < rt->device_count; ++i) {
    rt->devices[i]->info.index = i;
  }
  return ACCEL_OK;
}

static void close_devices(accel_runtime_t *rt) {
  for (uint32_t i = rt->all_device_count; i > 0; --i) {
    accel_device_t *dev = rt->all_devices[i - 1];
    accel_health_fini(dev);
    if (dev->mem_fini != NULL) {
      dev->mem_fini(dev);
    }
    accel_trace_device_close(dev);
    dev->driver->device->close(dev->drv);
    free(dev);
  }
  free(rt->all_devices);
  free(rt->devices);
  for (uint32_t i = rt->backend_count; i > 0; --i) {
    rt->backends[i - 1].driver->device->backend_close(rt->backends[i - 1].backend);
  }
}

static accel_status_t open_backend_devices(accel_runtime_t *rt,
                                           const accel_driver_t *driver,
                                           accel_drv_backend_t *backend) {
  uint32_t n = driver->device->count(backend);
  if (n == 0) {
    return ACCEL_OK;
  }
  accel_device_t **grown = realloc(
      rt->all_devices, (rt->all_device_count + n) * sizeof(*grown));
  if (grown == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "runtime: cannot grow the device list to %u",
                       rt->all_device_count + n);
  }
  rt->all_devices = grown;
  for (uint32_t ordinal = 0; ordinal < n; ++ordinal) {
    accel_device_t *dev = calloc(1, sizeof(*dev));
    if (dev == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "runtime: cannot allocate device %s:%u", driver->name,
                         ordinal);
    }
    accel_status_t st = driver->device->open(backend, ordinal, &dev->drv);
    if (st != ACCEL_OK) {
      free(dev);
      return accel_error_context(st, "opening device %s:%u", driver->name,
                                 ordinal);
    }
    dev->runtime = rt;
    dev->driver = driver;
    dev->ordinal = ordinal;
    dev->info.struct_size = sizeof(dev->info);
    driver->device->info(dev->drv, &dev->info);
    snprintf(dev->info.id, sizeof(dev->info.id), "%s:%u", driver->name,
             ordinal);
    st = accel_health_init(dev);
    if (st != ACCEL_OK) {
      driver->device->close(dev->drv);
      free(dev);
      return st;
    }
    uint64_t host_ns = 0, device_ns = 0;
    driver->device->clock_pair(dev->drv, &host_ns, &device_ns);
    accel_trace_device_open(dev, dev->info.id, host_ns, device_ns);
    rt->all_devices[rt->all_device_count++] = dev;
  }
  return ACCEL_OK;
}

accel_status_t accel_runtime_create_with_drivers(
    const accel_runtime_options_t *opts, const accel_driver_t *const *drivers,
    uint32_t driver_count, accel_runtime_t **out_runtime) {
  ACCEL_CHECK_ARG(out_runtime != NULL, "out_runtime (NULL)");
  ACCEL_CHECK_ARG(drivers != NULL || driver_count == 0, "drivers (NULL)");
  if (driver_count > ACCEL_MAX_BACKENDS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "runtime: %u backends exceed the limit of %u",
                       driver_count, ACCEL_MAX_BACKENDS);
  }
  accel_runtime_options_t resolved;
  ACCEL_RETURN_IF_ERROR(resolve_options(opts, &resolved));

  ACCEL_RETURN_IF_ERROR(accel_trace_runtime_create());
  accel_runtime_t *rt = calloc(1, sizeof(*rt));
  if (rt == NULL) {
    accel_trace_runtime_destroy(NULL);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "runtime: cannot allocate %zu bytes", sizeof(*rt));
  }
  rt->options.spin_ns = resolved.spin_ns;
  rt->flags = resolved.flags;
  rt->options.host_device_count = resolved.host_device_count;
  rt->stream_copy_dma_min_bytes = resolved.stream_copy_dma_min_bytes;
  rt->dma_inline_max_bytes = ACCEL_DEFAULT_DMA_INLINE_MAX_BYTES;
  uint64_t inline_max = 0;
  bool inline_invalid = false;
  if (accel_env_u64("ACCEL_DMA_INLINE_MAX_BYTES", &inline_max,
                    &inline_invalid)) {
    if (inline_invalid) {
      free(rt);
      accel_trace_runtime_destroy(NULL);
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_DMA_INLINE_MAX_BYTES=\"%s\" is not a number "
                         "of bytes",
                         getenv("ACCEL_DMA_INLINE_MAX_BYTES"));
    }
    rt->dma_inline_max_bytes = inline_max;
  }
  accel_status_t st =
      env_count("ACCEL_COPY_ENGINES", 64, &rt->options.copy_engine_count);
  if (st == ACCEL_OK) {
    st = env_watchdog(&rt->watchdog_ns);
  }
  if (st == ACCEL_OK) {
    st = env_count("ACCEL_HOST_THREADS", 65, &rt->options.host_thread_count);
  }
  if (st != ACCEL_OK) {
    free(rt);
    accel_trace_runtime_destroy(NULL);
    return st;
  }

  for (uint32_t i = 0; i < driver_count; ++i) {
    accel_drv_backend_t *backend = NULL;
    st = drivers[i]->device->backend_open(drivers[i], &rt->options, &backend);
    if (st == ACCEL_ERROR_UNAVAILABLE) {
      // Absent backend: skipped by design, not an error; the reason is kept
      // for accel-info.
      rt->skipped[rt->skipped_count].name = drivers[i]->name;
      snprintf(rt->skipped[rt->skipped_count].reason,
               sizeof(rt->skipped[0].reason), "%s", accel_last_error());
      rt->skipped_count++;
      accel_error_clear();
      st = ACCEL_OK;
      continue;
    }
    if (st != ACCEL_OK) {
      accel_error_context(st, "opening backend %s", drivers[i]->name);
      goto err_close_devices;
    }
    rt->backends[rt->backend_count].driver = drivers[i];
    rt->backends[rt->backend_count].backend = backend;
    rt->backend_count++;
    st = open_backend_devices(rt, drivers[i], backend);
    if (st != ACCEL_OK) {
      goto err_close_devices;
    }
  }
  // Bind each device's threads to its NUMA node's cores (best effort).
  accel_topo_place_devices(rt);
  st = apply_visibility(rt, resolved.visible_devices);
  if (st != ACCEL_OK) {
    goto err_close_devices;
  }
  st = accel_fault_spec_apply(rt, getenv("ACCEL_FAULT_INJECT"));
  if (st != ACCEL_OK) {
    goto err_close_devices;
  }
  accel_trace_runtime_ready(rt, rt->device_count);
  *out_runtime = rt;
  return ACCEL_OK;

err_close_devices:
  close_devices(rt);
  free(rt);
  accel_trace_runtime_destroy(NULL);
  return st;
}

accel_status_t accel_runtime_create(const accel_runtime_options_t *opts,
                                    accel_runtime_t **out_runtime) {
  static const accel_driver_t *const k_drivers[] = {
      &accel_host_driver,
#if ACCEL_HAVE_CUDA
      &accel_cuda_driver,
#endif
  };
  return accel_runtime_create_with_drivers(
      opts, k_drivers, sizeof(k_drivers) / sizeof(k_drivers[0]), out_runtime);
}

accel_status_t accel_runtime_backend_status(const accel_runtime_t *runtime,
                                            const char *backend,
                                            const char **out_reason) {
  ACCEL_CHECK_ARG(runtime != NULL, "runtime (NULL)");
  ACCEL_CHECK_ARG(backend != NULL, "backend (NULL)");
  ACCEL_CHECK_ARG(out_reason != NULL, "out_reason (NULL)");
  for (uint32_t i = 0; i < runtime->backend_count; ++i) {
    if (strcmp(runtime->backends[i].driver->name, backend) == 0) {
      *out_reason = "";
      return ACCEL_OK;
    }
  }
  for (uint32_t i = 0; i < runtime->skipped_count; ++i) {
    if (strcmp(runtime->skipped[i].name, backend) == 0) {
      *out_reason = runtime->skipped[i].reason;
      return ACCEL_OK;
    }
  }
  return accel_error(ACCEL_ERROR_NOT_FOUND,
                     "backend status: no backend \"%s\" is built into this "
                     "accel (built in: host%s)",
                     backend, ACCEL_HAVE_CUDA ? ", cuda" : "");
}

void accel_runtime_destroy(accel_runtime_t *runtime) {
  if (runtime == NULL) {
    return;
  }
  close_devices(runtime);
  accel_trace_runtime_destroy(runtime);
  free(runtime);
}
