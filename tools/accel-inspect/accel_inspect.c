// accel-inspect FILE.axe [--json] [--skip-hashes]: verifies an .axe file
// (structure, versions, every section hash) and prints what it holds: header,
// sections, requirements, kernels and their bindings, code objects, weights
// with their quantization, and user metadata. Exit 0 when the file is valid,
// 1 (with the loader's message) when it is not.
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/axe_reader.h"
#include "accel/accel.h"
#include "tool_cli.h"

static void json_string(const char *s) {
  accel_tool_json_string(s, strlen(s));
}

static void uuid_string(const uint8_t *u, char out[37]) {
  static const int dash[] = {4, 6, 8, 10};
  int o = 0;
  for (int i = 0, d = 0; i < 16; ++i) {
    if (d < 4 && i == dash[d]) {
      out[o++] = '-';
      d++;
    }
    o += sprintf(out + o, "%02x", u[i]);
  }
  out[o] = '\0';
}

static const char *access_name(uint32_t a) {
  return a == 1 ? "r" : a == 2 ? "w" : a == 3 ? "rw" : "?";
}

static const char *scheme_name(uint32_t s) {
  static const char *names[] = {"none", "per_tensor", "per_channel",
                                "groupwise"};
  return s < 4 ? names[s] : "?";
}

static void shape_string(const axe_weight_t *w, char *out, size_t size) {
  size_t o = (size_t)snprintf(out, size, "[");
  for (uint32_t d = 0; d < w->rank && o < size; ++d) {
    o += (size_t)snprintf(out + o, size - o, "%s%llu", d ? "," : "",
                          (unsigned long long)w->shape[d]);
  }
  if (o < size) {
    snprintf(out + o, size - o, "]");
  }
}

static void print_text(const axe_view_t *v, const char *path, bool hashed) {
  const axe_header_t *h = v->header;
  char uuid[37];
  uuid_string(h->uuid, uuid);
  printf("%s: .axe format %u.%u, %llu bytes, uuid %s\n", path,
         h->version_major, h->version_minor, (unsigned long long)h->file_size,
         uuid);
  printf("sections (%u):\n", v->section_count);
  for (uint32_t i = 0; i < v->section_count; ++i) {
    const axe_section_t *s = &v->sections[i];
    printf("  %2u %-12s offset %-10llu size %-10llu align %-5u %s%s%s%s\n", i,
           accel_axe_section_kind_name(s->kind), (unsigned long long)s->offset,
           (unsigned long long)s->size, s->alignment,
           (s->flags & AXE_SECTION_FLAG_REQUIRED) ? "required" : "optional",
           (s->flags & AXE_SECTION_FLAG_MAPPABLE) ? " mappable" : "",
           s->name ? " name=" : "", s->name ? axe_string(v, s->name) : "");
  }
  const axe_requirements_t *r = v->requirements;
  printf("requirements: runtime >= %u.%u, kernel ABI %u.%u, caps 0x%x, "
         "workspace %llu bytes\n",
         r->min_runtime_version >> 16, r->min_runtime_version & 0xffff,
         r->kernel_abi_version >> 16, r->kernel_abi_version & 0xffff,
         r->required_caps, (unsigned long long)r->workspace_bytes);
  printf("kernels (%u):\n", v->kernel_count);
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    printf("  %s (symbol %s, ABI %u.%u, workgroup %ux%ux%u, %u constant "
           "bytes)\n",
           axe_string(v, k->name), axe_string(v, k->symbol),
           k->abi_version >> 16, k->abi_version & 0xffff, k->workgroup_size[0],
           k->workgroup_size[1], k->workgroup_size[2], k->constants_size);
    for (uint32_t b = 0; b < k->binding_count; ++b) {
      const axe_binding_t *bd = &v->bindings[k->binding_first + b];
      printf("    binding %u %-2s %s min %llu align %u\n", b,
             access_name(bd->access), bd->name ? axe_string(v, bd->name) : "-",
             (unsigned long long)bd->min_size_bytes,
             bd->alignment ? bd->alignment : 1);
    }
  }
  printf("weights (%u):\n", v->weight_count);
  for (uint32_t i = 0; i < v->weight_count; ++i) {
    const axe_weight_t *w = &v->weights[i];
    char shape[256];
    shape_string(w, shape, sizeof(shape));
    printf("  %s %s%s %llu bytes%s", axe_string(v, w->name),
           accel_dtype_name((accel_dtype_t)w->dtype), shape,
           (unsigned long long)w->size_bytes,
           w->layout == ACCEL_WEIGHT_LAYOUT_BLOCKED ? " blocked" : "");
    if (w->quant != AXE_NONE) {
      const axe_quant_t *q = &v->quants[w->quant];
      printf(" quant %s axis %u group %u scale %s", scheme_name(q->scheme),
             q->axis, q->group_size, axe_string(v, v->weights[q->scale].name));
      if (q->zero_point != AXE_NONE) {
        printf(" zero %s", axe_string(v, v->weights[q->zero_point].name));
      }
    }
    printf("\n");
  }
  printf("metadata (%u):\n", v->metadata_count);
  for (uint32_t i = 0; i < v->metadata_count; ++i) {
    printf("  %s = %s\n", axe_string(v, v->metadata[i].key),
           axe_string(v, v->metadata[i].value));
  }
  printf("verified: structure ok, %s\n",
         hashed ? "all section hashes match" : "section hashes not checked");
}

static void print_json(const axe_view_t *v, const char *path, bool hashed) {
  const axe_header_t *h = v->header;
  char uuid[37];
  uuid_string(h->uuid, uuid);
  printf("{\"file\": ");
  json_string(path);
  printf(", \"valid\": true, \"hashes_checked\": %s, \"format\": \"%u.%u\", "
         "\"size\": %llu, \"uuid\": \"%s\",\n",
         hashed ? "true" : "false", h->version_major, h->version_minor,
         (unsigned long long)h->file_size, uuid);
  printf(" \"sections\": [");
  for (uint32_t i = 0; i < v->section_count; ++i) {
    const axe_section_t *s = &v->sections[i];
    printf("%s\n  {\"index\": %u, \"kind\": \"%s\", \"kind_id\": %u, "
           "\"offset\": %llu, \"size\": %llu, \"alignment\": %u, "
           "\"required\": %s, \"mappable\": %s, \"name\": ",
           i ? "," : "", i, accel_axe_section_kind_name(s->kind), s->kind,
           (unsigned long long)s->offset, (unsigned long long)s->size,
           s->alignment,
           (s->flags & AXE_SECTION_FLAG_REQUIRED) ? "true" : "false",
           (s->flags & AXE_SECTION_FLAG_MAPPABLE) ? "true" : "false");
    json_string(axe_string(v, s->name));
    printf("}");
  }
  const axe_requirements_t *r = v->requirements;
  printf("],\n \"requirements\": {\"min_runtime\": \"%u.%u\", "
         "\"kernel_abi\": \"%u.%u\", \"caps\": %u, \"workspace_bytes\": "
         "%llu},\n",
         r->min_runtime_version >> 16, r->min_runtime_version & 0xffff,
         r->kernel_abi_version >> 16, r->kernel_abi_version & 0xffff,
         r->required_caps, (unsigned long long)r->workspace_bytes);
  printf(" \"kernels\": [");
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    printf("%s\n  {\"name\": ", i ? "," : "");
    json_string(axe_string(v, k->name));
    printf(", \"symbol\": ");
    json_string(axe_string(v, k->symbol));
    printf(", \"abi\": \"%u.%u\", \"workgroup_size\": [%u, %u, %u], "
           "\"constants_size\": %u, \"bindings\": [",
           k->abi_version >> 16, k->abi_version & 0xffff, k->workgroup_size[0],
           k->workgroup_size[1], k->workgroup_size[2], k->constants_size);
    for (uint32_t b = 0; b < k->binding_count; ++b) {
      const axe_binding_t *bd = &v->bindings[k->binding_first + b];
      printf("%s{\"name\": ", b ? ", " : "");
      json_string(axe_string(v, bd->name));
      printf(", \"access\": \"%s\", \"min_size\": %llu, \"alignment\": %u}",
             access_name(bd->access), (unsigned long long)bd->min_size_bytes,
             bd->alignment ? bd->alignment : 1);
    }
    printf("]}");
  }
  printf("],\n \"weights\": [");
  for (uint32_t i = 0; i < v->weight_count; ++i) {
    const axe_weight_t *w = &v->weights[i];
    char shape[256];
    shape_string(w, shape, sizeof(shape));
    printf("%s\n  {\"name\": ", i ? "," : "");
    json_string(axe_string(v, w->name));
    printf(", \"dtype\": \"%s\", \"shape\": %s, \"size\": %llu, \"layout\": "
           "\"%s\", \"quant\": \"%s\"}",
           accel_dtype_name((accel_dtype_t)w->dtype), shape,
           (unsigned long long)w->size_bytes,
           w->layout == ACCEL_WEIGHT_LAYOUT_BLOCKED ? "blocked" : "strided",
           w->quant == AXE_NONE ? "none" : scheme_name(v->quants[w->quant].scheme));
  }
  printf("],\n \"metadata\": {");
  for (uint32_t i = 0; i < v->metadata_count; ++i) {
    printf("%s", i ? ", " : "");
    json_string(axe_string(v, v->metadata[i].key));
    printf(": ");
    json_string(axe_string(v, v->metadata[i].value));
  }
  printf("}}\n");
}

static void hex128(const uint8_t h[16], char out[33]) {
  for (int i = 0; i < 16; ++i) {
    sprintf(out + 2 * i, "%02x", h[i]);
  }
}

// After a failed parse: when the structure is sound and only content hashes
// differ, names every section whose hash differs with both hashes, which
// says more than the loader's first "content hash mismatch". A hash tells
// that some byte of a section changed, not which or how many. Returns the
// number of sections reported.
static uint32_t report_hash_mismatches(const void *data, uint64_t size,
                                       const char *path, bool json) {
  axe_view_t v;
  if (accel_axe_parse(data, size, true, &v) != ACCEL_OK) {
    return 0;  // the structure itself is bad: the loader's message says how
  }
  uint32_t count = 0;
  for (uint32_t i = 0; i < v.section_count; ++i) {
    const axe_section_t *s = &v.sections[i];
    uint8_t actual[16];
    accel_axe_hash128(v.data + s->offset, s->size, actual);
    if (memcmp(actual, s->hash, 16) == 0) {
      continue;
    }
    char want[33], got[33];
    hex128(s->hash, want);
    hex128(actual, got);
    const char *name = s->name ? axe_string(&v, s->name) : "";
    if (json) {
      printf("%s{\"section\": %u, \"kind\": \"%s\", \"name\": ", count ? ", " : "",
             i, accel_axe_section_kind_name(s->kind));
      json_string(name);
      printf(", \"offset\": %llu, \"size\": %llu, \"expected_hash\": "
             "\"%s\", \"actual_hash\": \"%s\"}",
             (unsigned long long)s->offset, (unsigned long long)s->size, want,
             got);
    } else {
      fprintf(stderr,
              "accel-inspect: %s: section %u (%s%s%s, %llu bytes at offset "
              "%llu): content hash differs: expected %s (recorded when the "
              "file was written), actual %s (of the bytes now in the file); "
              "at least one byte of this section changed\n",
              path, i, accel_axe_section_kind_name(s->kind), name[0] ? " " : "",
              name, (unsigned long long)s->size,
              (unsigned long long)s->offset, want, got);
    }
    count++;
  }
  return count;
}

// Reports why |data| failed to parse with |st| (the loader's message in
// accel_last_error), on stderr and, with |json|, as a JSON object on stdout.
static void report_invalid(const void *data, uint64_t size, const char *path,
                           accel_status_t st, bool json, bool skip_hashes) {
  char message[1024];
  snprintf(message, sizeof(message), "%s", accel_last_error());
  if (json) {
    printf("{\"file\": ");
    json_string(path);
    printf(", \"valid\": false, \"status\": \"%s\", \"error\": ",
           accel_status_name(st));
    json_string(message);
    printf(", \"hash_mismatches\": [");
  }
  uint32_t mismatches =
      skip_hashes ? 0 : report_hash_mismatches(data, size, path, json);
  if (json) {
    printf("]}\n");
  }
  if (mismatches == 0) {
    fprintf(stderr, "accel-inspect: %s is not valid: %s: %s\n", path,
            accel_status_name(st), message);
  } else {
    fprintf(stderr,
            "accel-inspect: %s is not valid: %u section%s hold%s content "
            "that differs from what was written (structure ok)\n",
            path, mismatches, mismatches == 1 ? "" : "s",
            mismatches == 1 ? "s" : "");
  }
}

static const accel_tool_option_t k_options[] = {
    {"--json", NULL, 0, "print the file's contents as one JSON object"},
    {"--skip-hashes", NULL, 0,
     "check the structure only, not the section hashes"},
};
enum { OPT_JSON, OPT_SKIP_HASHES };

static const accel_tool_spec_t k_spec = {
    .name = "accel-inspect",
    .synopsis = "FILE.axe [--json] [--skip-hashes]",
    .description = "Verifies an .axe executable (structure, versions, every "
                   "section hash) and prints what it holds; exits 1 when the "
                   "file is not valid.",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 1,
    .max_positional = 1,
};

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  const char *path = args.positional[0];
  bool json = args.values[OPT_JSON] != NULL;
  bool skip_hashes = args.values[OPT_SKIP_HASHES] != NULL;
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    fprintf(stderr, "accel-inspect: cannot open %s: %s\n", path,
            strerror(errno));
    return 1;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    fprintf(stderr, "accel-inspect: cannot stat %s: %s\n", path,
            strerror(errno));
    close(fd);
    return 1;
  }
  if (!S_ISREG(sb.st_mode)) {
    fprintf(stderr,
            "accel-inspect: %s is not a regular file: an executable is read "
            "from a file\n",
            path);
    close(fd);
    return 1;
  }
  uint64_t size = (uint64_t)sb.st_size;
  void *data = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (data == MAP_FAILED) {
    fprintf(stderr, "accel-inspect: cannot map %s: %s\n", path,
            strerror(errno));
    return 1;
  }
  axe_view_t view;
  static const uint8_t empty[8] __attribute__((aligned(8)));
  accel_status_t st =
      accel_axe_parse(data ? data : empty, size, skip_hashes, &view);
  if (st != ACCEL_OK) {
    report_invalid(data ? data : empty, size, path, st, json, skip_hashes);
    if (data) {
      munmap(data, size);
    }
    return 1;
  }
  if (json) {
    print_json(&view, path, !skip_hashes);
  } else {
    print_text(&view, path, !skip_hashes);
  }
  munmap(data, size);
  return 0;
}
