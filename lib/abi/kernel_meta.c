// Kernel metadata (kernel ABI 1.2): the checks a code object's metadata
// table passes before any launch reads it (docs/kernel-abi.md).
#include <string.h>

#include "abi/kernel_meta.h"

static bool name_ok(const char *name) {
  if (name == NULL || name[0] == '\0' ||
      strlen(name) > ACCEL_KERNEL_MAX_TUNABLE_NAME) {
    return false;
  }
  for (const char *p = name; *p != '\0'; ++p) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) {
      return false;
    }
  }
  return true;
}

static accel_status_t check_tunable(const accel_kernel_tunable_t *t,
                                    const char *what, const char *kernel,
                                    uint32_t index) {
  if (!name_ok(t->name)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: kernel \"%s\" tunable %u: name must be 1 to %u "
                       "bytes of [a-z0-9_]",
                       what, kernel, index, ACCEL_KERNEL_MAX_TUNABLE_NAME);
  }
  if (t->kind != ACCEL_KERNEL_TUNABLE_CONSTANT &&
      t->kind != ACCEL_KERNEL_TUNABLE_WORKGROUPS) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: kernel \"%s\" tunable \"%s\": unknown kind %u",
                       what, kernel, t->name, t->kind);
  }
  if (t->kind == ACCEL_KERNEL_TUNABLE_CONSTANT
          ? t->constants_offset % 4 != 0
          : t->constants_offset != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: kernel \"%s\" tunable \"%s\": constants_offset %u "
                       "must be a multiple of 4 (0 for a work-group count)",
                       what, kernel, t->name, t->constants_offset);
  }
  if (t->value_count == 0 || t->value_count > ACCEL_KERNEL_MAX_TUNABLE_VALUES ||
      t->values == NULL || t->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: kernel \"%s\" tunable \"%s\": %u values (1 to "
                       "%u, table %s), reserved0 %u",
                       what, kernel, t->name, t->value_count,
                       ACCEL_KERNEL_MAX_TUNABLE_VALUES,
                       t->values ? "set" : "NULL", t->reserved0);
  }
  for (uint32_t v = 0; v < t->value_count; ++v) {
    if (t->values[v] == 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "%s: kernel \"%s\" tunable \"%s\": value %u is 0 "
                         "(0 means the default and is not a candidate)",
                         what, kernel, t->name, v);
    }
  }
  return ACCEL_OK;
}

static accel_status_t check_meta(const accel_kernel_library_t *lib,
                                 const accel_kernel_meta_t *m,
                                 const char *what, uint32_t index) {
  if (m->kernel == NULL) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: metadata entry %u names no kernel", what, index);
  }
  bool exported = false;
  for (uint32_t e = 0; e < lib->export_count && !exported; ++e) {
    exported = lib->exports[e].name != NULL &&
               strcmp(lib->exports[e].name, m->kernel) == 0;
  }
  if (!exported) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: metadata entry %u names \"%s\", which the "
                       "library does not export",
                       what, index, m->kernel);
  }
  for (uint32_t j = 0; j < index; ++j) {
    if (strcmp(lib->metas[j].kernel, m->kernel) == 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "%s: metadata entries %u and %u both describe "
                         "\"%s\"",
                         what, j, index, m->kernel);
    }
  }
  if ((m->binding_count > 0 && m->binding_types == NULL) ||
      m->tunable_count > ACCEL_KERNEL_MAX_TUNABLES ||
      (m->tunable_count > 0 && m->tunables == NULL)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: kernel \"%s\" metadata: %u binding types (table "
                       "%s), %u tunables (max %u, table %s)",
                       what, m->kernel, m->binding_count,
                       m->binding_types ? "set" : "NULL", m->tunable_count,
                       ACCEL_KERNEL_MAX_TUNABLES, m->tunables ? "set" : "NULL");
  }
  for (uint32_t b = 0; b < m->binding_count; ++b) {
    if (m->binding_types[b] >= ACCEL_KERNEL_ELEM_COUNT) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "%s: kernel \"%s\" binding %u: unknown element type "
                         "%u",
                         what, m->kernel, b, m->binding_types[b]);
    }
  }
  for (uint32_t t = 0; t < m->tunable_count; ++t) {
    ACCEL_RETURN_IF_ERROR(check_tunable(&m->tunables[t], what, m->kernel, t));
    for (uint32_t u = 0; u < t; ++u) {
      if (strcmp(m->tunables[u].name, m->tunables[t].name) == 0) {
        return accel_error(ACCEL_ERROR_FORMAT,
                           "%s: kernel \"%s\": tunable \"%s\" appears twice",
                           what, m->kernel, m->tunables[t].name);
      }
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_kernel_meta_check_library(
    const accel_kernel_library_t *lib, const char *what) {
  if (lib->struct_size < sizeof(accel_kernel_library_t) ||
      (lib->abi_version & 0xffff) < 2) {
    return ACCEL_OK;  // before ABI 1.2: no metadata table
  }
  if (lib->meta_count > lib->export_count ||
      (lib->meta_count > 0 && lib->metas == NULL) || lib->reserved1 != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: %u metadata entries for %u exports (table %s), "
                       "reserved1 %u",
                       what, lib->meta_count, lib->export_count,
                       lib->metas ? "set" : "NULL", lib->reserved1);
  }
  for (uint32_t i = 0; i < lib->meta_count; ++i) {
    ACCEL_RETURN_IF_ERROR(check_meta(lib, &lib->metas[i], what, i));
  }
  return ACCEL_OK;
}

const accel_kernel_meta_t *accel_kernel_meta_find(
    const accel_kernel_library_t *lib, const char *name) {
  if (lib == NULL || lib->struct_size < sizeof(accel_kernel_library_t) ||
      (lib->abi_version & 0xffff) < 2) {
    return NULL;
  }
  for (uint32_t i = 0; i < lib->meta_count; ++i) {
    if (strcmp(lib->metas[i].kernel, name) == 0) {
      return &lib->metas[i];
    }
  }
  return NULL;
}

accel_status_t accel_kernel_meta_check_kernel(const accel_kernel_meta_t *meta,
                                              const char *kernel,
                                              uint32_t binding_count,
                                              uint32_t constants_size) {
  if (meta->binding_count != 0 && meta->binding_count != binding_count) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "kernel \"%s\": the code object types %u bindings, "
                       "the kernel record declares %u",
                       kernel, meta->binding_count, binding_count);
  }
  for (uint32_t t = 0; t < meta->tunable_count; ++t) {
    const accel_kernel_tunable_t *tu = &meta->tunables[t];
    if (tu->kind == ACCEL_KERNEL_TUNABLE_CONSTANT &&
        (uint64_t)tu->constants_offset + 4 > constants_size) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "kernel \"%s\": tunable \"%s\" at constants offset "
                         "%u lies outside the %u constant bytes",
                         kernel, tu->name, tu->constants_offset,
                         constants_size);
    }
  }
  return ACCEL_OK;
}
