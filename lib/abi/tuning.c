// Tuning at launch: device fingerprints, cache keys, the per-kernel tables
// an executable builds from the cache when it loads, and the lookup a
// launch makes (docs/tuning.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "abi/tuning.h"
#include "core/error.h"

// A kernel's tuned configurations (what a kernel's |tuning| points at).
typedef struct accel_tuning_set {
  uint32_t count;
  const accel_kernel_meta_t *meta;
  // |count| keys of constants_size bytes, then per key one value per
  // tunable of |meta| (0: leave as the caller gave it).
  uint8_t *keys;
  uint32_t *values;
  uint32_t constants_size;
} accel_tuning_set_t;

struct accel_tuning_sets {
  uint32_t count;
  accel_tuning_set_t sets[];
};

// ---------------------------------------------------------------------------
// Keys.

void accel_tuning_fingerprint(const accel_device_t *device,
                              char out[ACCEL_TUNING_MAX_TOKEN + 1]) {
  char text[512];
  const accel_device_info_t *i = &device->info;
  snprintf(text, sizeof(text), "%s|%s|%s|%u|%llu|%u", i->backend, i->name,
           i->target, i->compute_queue_count,
           (unsigned long long)i->memory_bytes,
           device->runtime->options.host_thread_count);
  snprintf(out, ACCEL_TUNING_MAX_TOKEN + 1, "%s-%016llx", i->backend,
           (unsigned long long)XXH3_64bits(text, strlen(text)));
}

accel_status_t accel_tuning_key(const char *fingerprint, const char *kernel,
                                const accel_kernel_meta_t *meta,
                                const void *constants,
                                uint32_t constants_size,
                                accel_tuning_entry_t *out) {
  if (constants_size > ACCEL_TUNING_MAX_CONSTANTS || constants_size % 4 != 0 ||
      strlen(kernel) > ACCEL_TUNING_MAX_TOKEN) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "kernel \"%s\": %u constant bytes or its name are "
                       "beyond what the tuning cache keys on (%u bytes, a "
                       "multiple of 4)",
                       kernel, constants_size, ACCEL_TUNING_MAX_CONSTANTS);
  }
  memset(out, 0, sizeof(*out));
  snprintf(out->fingerprint, sizeof(out->fingerprint), "%s", fingerprint);
  snprintf(out->kernel, sizeof(out->kernel), "%s", kernel);
  out->version = meta != NULL ? meta->version : 0;
  out->constants_size = constants_size;
  if (constants_size > 0) {
    memcpy(out->constants, constants, constants_size);
  }
  for (uint32_t t = 0; meta != NULL && t < meta->tunable_count; ++t) {
    const accel_kernel_tunable_t *tu = &meta->tunables[t];
    if (tu->kind == ACCEL_KERNEL_TUNABLE_CONSTANT &&
        tu->constants_offset + 4 <= constants_size) {
      memset(out->constants + tu->constants_offset, 0, 4);
    }
  }
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Attaching to an executable's kernels.

// Whether |e| applies to |k| on the device of fingerprint |fp|: same
// fingerprint, kernel, version and constants size, and every value names
// a tunable of the kernel and is one of its declared candidates.
static bool entry_applies(const accel_tuning_entry_t *e,
                          const accel_kernel_t *k, const char *fp,
                          uint32_t *values) {
  const accel_kernel_meta_t *m = k->meta;
  if (strcmp(e->fingerprint, fp) != 0 || strcmp(e->kernel, k->name) != 0 ||
      e->version != m->version || e->constants_size != k->constants_size) {
    return false;
  }
  memset(values, 0, sizeof(uint32_t) * m->tunable_count);
  for (uint32_t i = 0; i < e->value_count; ++i) {
    bool found = false;
    for (uint32_t t = 0; t < m->tunable_count && !found; ++t) {
      const accel_kernel_tunable_t *tu = &m->tunables[t];
      if (strcmp(tu->name, e->names[i]) != 0) {
        continue;
      }
      for (uint32_t v = 0; v < tu->value_count && !found; ++v) {
        found = tu->values[v] == e->values[i];
      }
      values[t] = e->values[i];
    }
    if (!found) {
      return false;  // stale: a name or value the kernel no longer has
    }
  }
  return true;
}

static accel_status_t build_set(const accel_tuning_cache_t *cache,
                                const accel_kernel_t *k, const char *fp,
                                accel_tuning_set_t *set) {
  const accel_kernel_meta_t *m = k->meta;
  uint32_t values[ACCEL_KERNEL_MAX_TUNABLES];
  set->meta = m;
  set->constants_size = k->constants_size;
  for (uint32_t i = 0; i < cache->count; ++i) {
    if (!entry_applies(&cache->entries[i], k, fp, values)) {
      continue;
    }
    uint32_t n = set->count + 1;
    uint8_t *keys = realloc(set->keys, (size_t)n * (k->constants_size + 1));
    if (keys != NULL) {
      set->keys = keys;
    }
    uint32_t *vals = realloc(set->values,
                             (size_t)n * (m->tunable_count + 1) *
                                 sizeof(uint32_t));
    if (vals != NULL) {
      set->values = vals;
    }
    if (keys == NULL || vals == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "kernel \"%s\": cannot hold %u tuned "
                         "configurations",
                         k->name, n);
    }
    memcpy(set->keys + (size_t)set->count * k->constants_size,
           cache->entries[i].constants, k->constants_size);
    memcpy(set->values + (size_t)set->count * m->tunable_count, values,
           m->tunable_count * sizeof(uint32_t));
    set->count = n;
  }
  return ACCEL_OK;
}

void accel_tuning_detach(accel_executable_t *exe) {
  struct accel_tuning_sets *s = exe->tuning;
  if (s == NULL) {
    return;
  }
  for (uint32_t i = 0; i < s->count; ++i) {
    free(s->sets[i].keys);
    free(s->sets[i].values);
  }
  for (uint32_t i = 0; i < exe->view.kernel_count; ++i) {
    exe->kernels[i].tuning = NULL;
  }
  free(s);
  exe->tuning = NULL;
}

static bool tunable_kernel(const accel_kernel_t *k) {
  return k->meta != NULL && k->meta->tunable_count > 0 &&
         k->constants_size <= ACCEL_TUNING_MAX_CONSTANTS &&
         k->constants_size % 4 == 0;
}

accel_status_t accel_tuning_attach(accel_executable_t *exe) {
  uint32_t n = exe->view.kernel_count, tunable = 0;
  for (uint32_t i = 0; i < n; ++i) {
    tunable += tunable_kernel(&exe->kernels[i]) ? 1u : 0u;
  }
  if (tunable == 0 ||
      (exe->device->runtime->flags & ACCEL_RUNTIME_FLAG_TUNING_OFF) != 0) {
    return ACCEL_OK;
  }
  char path[4096];
  accel_tuning_cache_t cache;
  if (accel_tuning_cache_path(path, sizeof(path)) != ACCEL_OK) {
    return ACCEL_OK;  // nowhere to look: untuned
  }
  accel_status_t st = accel_tuning_cache_read(path, &cache);
  if (st != ACCEL_OK) {
    accel_tuning_cache_fini(&cache);
    if (st == ACCEL_ERROR_OUT_OF_MEMORY) {
      return st;
    }
    fprintf(stderr, "accel: ignoring the tuning cache: %s\n",
            accel_last_error());
    return ACCEL_OK;
  }
  if (cache.count == 0) {
    accel_tuning_cache_fini(&cache);
    return ACCEL_OK;
  }
  char fp[ACCEL_TUNING_MAX_TOKEN + 1];
  accel_tuning_fingerprint(exe->device, fp);
  exe->tuning = calloc(1, sizeof(*exe->tuning) +
                              (size_t)tunable * sizeof(accel_tuning_set_t));
  if (exe->tuning == NULL) {
    accel_tuning_cache_fini(&cache);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate tuning tables");
  }
  for (uint32_t i = 0; i < n && st == ACCEL_OK; ++i) {
    accel_kernel_t *k = &exe->kernels[i];
    if (!tunable_kernel(k)) {
      continue;
    }
    accel_tuning_set_t *set = &exe->tuning->sets[exe->tuning->count++];
    st = build_set(&cache, k, fp, set);
    if (st == ACCEL_OK && set->count > 0) {
      k->tuning = set;
    }
  }
  accel_tuning_cache_fini(&cache);
  if (st != ACCEL_OK) {
    accel_tuning_detach(exe);
  }
  return st;
}

// ---------------------------------------------------------------------------
// Applying at launch.

// Whether |constants| equal |key| outside |m|'s CONSTANT tunable fields.
static bool key_matches(const accel_kernel_meta_t *m, const uint8_t *key,
                        const uint8_t *constants, uint32_t size) {
  uint32_t at = 0;
  while (at < size) {
    bool tunable = false;
    for (uint32_t t = 0; t < m->tunable_count && !tunable; ++t) {
      tunable = m->tunables[t].kind == ACCEL_KERNEL_TUNABLE_CONSTANT &&
                m->tunables[t].constants_offset == at;
    }
    if (!tunable && memcmp(key + at, constants + at, 4) != 0) {
      return false;
    }
    at += 4;
  }
  return true;
}

bool accel_tuning_apply(const accel_kernel_t *k,
                        const accel_kernel_dispatch_t *in,
                        accel_kernel_dispatch_t *out, uint8_t *constants_buf) {
  const accel_tuning_set_t *set = k->tuning;
  const uint8_t *constants = in->constants;
  uint32_t size = in->constants_size;
  if (set == NULL || size != set->constants_size ||
      (size > 0 && constants == NULL)) {
    return false;
  }
  const accel_kernel_meta_t *m = set->meta;
  for (uint32_t i = 0; i < set->count; ++i) {
    if (!key_matches(m, set->keys + (size_t)i * size, constants, size)) {
      continue;
    }
    const uint32_t *values = set->values + (size_t)i * m->tunable_count;
    *out = *in;
    if (size > 0) {
      memcpy(constants_buf, constants, size);
      out->constants = constants_buf;
    }
    for (uint32_t t = 0; t < m->tunable_count; ++t) {
      const accel_kernel_tunable_t *tu = &m->tunables[t];
      uint32_t cur;
      if (values[t] == 0) {
        continue;
      }
      if (tu->kind == ACCEL_KERNEL_TUNABLE_WORKGROUPS) {
        out->workgroup_count[0] = values[t];
        out->workgroup_count[1] = 1;
        out->workgroup_count[2] = 1;
        continue;
      }
      memcpy(&cur, constants_buf + tu->constants_offset, 4);
      if (cur == 0) {  // the caller asked for the default: tune it
        memcpy(constants_buf + tu->constants_offset, &values[t], 4);
      }
    }
    return true;
  }
  return false;
}
