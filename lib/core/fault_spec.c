// ACCEL_FAULT_INJECT: faults for a process started from a script, in the
// syntax of docs/health.md ("Fault injection from the environment"):
//
//   SPEC[;SPEC...]     SPEC = KIND[,KEY=VALUE...]
//   KIND  corrected | uncorrected | fatal | hang
//   KEY   device=INDEX|ID   command=N   after_ms=T   queue=NAME
//
// Every part is checked before any fault is injected, so that a typo
// injects nothing and fails accel_runtime_create with a message.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/health_impl.h"

#define SPEC_MAX_CHARS 1024
#define SPEC_MAX_FAULTS 16

typedef struct parsed_fault {
  accel_fault_desc_t desc;
  char queue[64];
  int32_t device;  // index into the visible devices; -1: every device
} parsed_fault_t;

static bool parse_u64(const char *text, uint64_t *out) {
  if (text[0] < '0' || text[0] > '9') {
    return false;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') {
    return false;
  }
  *out = v;
  return true;
}

static int32_t find_device(accel_runtime_t *rt, const char *text) {
  uint64_t index = 0;
  if (parse_u64(text, &index)) {
    return index < rt->device_count ? (int32_t)index : -2;
  }
  for (uint32_t i = 0; i < rt->device_count; ++i) {
    if (strcmp(rt->devices[i]->info.id, text) == 0) {
      return (int32_t)i;
    }
  }
  return -2;
}

static accel_status_t parse_kind(const char *text, uint32_t *out) {
  static const char *const k_kinds[] = {"corrected", "uncorrected", "fatal",
                                        "hang"};
  for (uint32_t i = 0; i < 4; ++i) {
    if (strcmp(text, k_kinds[i]) == 0) {
      *out = i;
      return ACCEL_OK;
    }
  }
  return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                     "ACCEL_FAULT_INJECT: unknown fault kind \"%s\" (expected "
                     "corrected, uncorrected, fatal or hang)",
                     text);
}

static accel_status_t parse_key(accel_runtime_t *rt, char *item,
                                parsed_fault_t *f) {
  char *eq = strchr(item, '=');
  if (eq == NULL || eq == item || eq[1] == '\0') {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FAULT_INJECT: \"%s\" is not KEY=VALUE", item);
  }
  *eq = '\0';
  const char *key = item, *value = eq + 1;
  uint64_t v = 0;
  if (strcmp(key, "command") == 0) {
    if (!parse_u64(value, &v) || v == 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_FAULT_INJECT: command=\"%s\" is not a "
                         "command number from 1",
                         value);
    }
    f->desc.command_index = v;
  } else if (strcmp(key, "after_ms") == 0) {
    if (!parse_u64(value, &v) || v > UINT64_MAX / 1000000ull) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_FAULT_INJECT: after_ms=\"%s\" is not a "
                         "number of milliseconds",
                         value);
    }
    f->desc.delay_ns = v * 1000000ull;
  } else if (strcmp(key, "queue") == 0) {
    if (strlen(value) >= sizeof(f->queue)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_FAULT_INJECT: queue name \"%s\" is longer "
                         "than %zu characters",
                         value, sizeof(f->queue) - 1);
    }
    snprintf(f->queue, sizeof(f->queue), "%s", value);
  } else if (strcmp(key, "device") == 0) {
    f->device = find_device(rt, value);
    if (f->device < 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_FAULT_INJECT: no device \"%s\" (there are %u: "
                         "indices from 0 or ids like host:0)",
                         value, rt->device_count);
    }
  } else {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FAULT_INJECT: unknown key \"%s\" (expected "
                       "device, command, after_ms or queue)",
                       key);
  }
  return ACCEL_OK;
}

static accel_status_t parse_one(accel_runtime_t *rt, char *spec,
                                parsed_fault_t *f) {
  memset(f, 0, sizeof(*f));
  f->desc.struct_size = sizeof(f->desc);
  f->device = -1;
  char *save = NULL;
  char *kind = strtok_r(spec, ",", &save);
  if (kind == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FAULT_INJECT: empty fault");
  }
  ACCEL_RETURN_IF_ERROR(parse_kind(kind, &f->desc.kind));
  for (char *item = strtok_r(NULL, ",", &save); item != NULL;
       item = strtok_r(NULL, ",", &save)) {
    ACCEL_RETURN_IF_ERROR(parse_key(rt, item, f));
  }
  if (f->desc.kind == ACCEL_FAULT_HANG && f->desc.command_index == 0 &&
      f->desc.delay_ns == 0 && f->queue[0] == '\0') {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FAULT_INJECT: a hang needs command=, after_ms= "
                       "or queue=");
  }
  return ACCEL_OK;
}

accel_status_t accel_fault_spec_apply(accel_runtime_t *runtime,
                                      const char *spec) {
  if (spec == NULL || spec[0] == '\0') {
    return ACCEL_OK;
  }
  if (strlen(spec) >= SPEC_MAX_CHARS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FAULT_INJECT: longer than %d characters",
                       SPEC_MAX_CHARS - 1);
  }
  char text[SPEC_MAX_CHARS];
  snprintf(text, sizeof(text), "%s", spec);
  parsed_fault_t faults[SPEC_MAX_FAULTS];
  uint32_t count = 0;
  char *save = NULL;
  for (char *one = strtok_r(text, ";", &save); one != NULL;
       one = strtok_r(NULL, ";", &save)) {
    if (count == SPEC_MAX_FAULTS) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_FAULT_INJECT: more than %d faults",
                         SPEC_MAX_FAULTS);
    }
    ACCEL_RETURN_IF_ERROR(parse_one(runtime, one, &faults[count]));
    count++;
  }
  if (count == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FAULT_INJECT=\"%s\": no fault in it", spec);
  }
  for (uint32_t i = 0; i < count; ++i) {
    parsed_fault_t *f = &faults[i];
    f->desc.queue_name = f->queue[0] != '\0' ? f->queue : NULL;
    for (uint32_t d = 0; d < runtime->device_count; ++d) {
      // Without a device= the faults go to every device that can take
      // them (a cuda device cannot).
      if ((f->device >= 0 && (uint32_t)f->device != d) ||
          (f->device < 0 && runtime->devices[d]->driver->health == NULL)) {
        continue;
      }
      accel_status_t st = accel_device_inject_fault(runtime->devices[d],
                                                    &f->desc);
      if (st != ACCEL_OK) {
        return accel_error_context(st, "ACCEL_FAULT_INJECT fault %u", i + 1);
      }
    }
  }
  return ACCEL_OK;
}
