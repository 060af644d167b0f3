// accel-topo: the machine's topology as accel sees it.
//   accel-topo                 matrix of path classes (like nvidia-smi topo -m)
//   accel-topo --tree          the hwloc tree with devices and NICs named
//   accel-topo --json          everything as one JSON object (the serialized
//                              form that accel_topology_deserialize reads)
//   accel-topo --xml FILE      any of the above for an hwloc XML file
//   accel-topo --synthetic S   any of the above for an hwloc synthetic string
//   accel-topo --from-json F   any of the above for a serialized topology
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"

static int usage(void) {
  fprintf(stderr,
          "usage: accel-topo [--tree | --json] [--xml FILE | --synthetic DESC "
          "| --from-json FILE]\n"
          "  (default: the live machine; ACCEL_TOPOLOGY_XML overrides it)\n");
  return 2;
}

static char *read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    return NULL;
  }
  size_t capacity = 1 << 16, size = 0;
  char *data = malloc(capacity);
  while (data != NULL) {
    size_t n = fread(data + size, 1, capacity - size, f);
    size += n;
    if (size < capacity) {
      break;
    }
    capacity *= 2;
    char *grown = realloc(data, capacity);
    if (grown == NULL) {
      free(data);
      data = NULL;
    } else {
      data = grown;
    }
  }
  fclose(f);
  *out_size = size;
  return data;
}

int main(int argc, char **argv) {
  accel_topology_format_kind_t format = ACCEL_TOPOLOGY_FORMAT_MATRIX;
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  const char *from_json = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--tree") == 0) {
      format = ACCEL_TOPOLOGY_FORMAT_TREE;
    } else if (strcmp(argv[i], "--json") == 0) {
      format = ACCEL_TOPOLOGY_FORMAT_JSON;
    } else if (strcmp(argv[i], "--matrix") == 0) {
      format = ACCEL_TOPOLOGY_FORMAT_MATRIX;
    } else if (strcmp(argv[i], "--xml") == 0 && i + 1 < argc) {
      opts.xml_path = argv[++i];
    } else if (strcmp(argv[i], "--synthetic") == 0 && i + 1 < argc) {
      opts.synthetic = argv[++i];
    } else if (strcmp(argv[i], "--from-json") == 0 && i + 1 < argc) {
      from_json = argv[++i];
    } else {
      return usage();
    }
  }
  if (opts.xml_path != NULL || opts.synthetic != NULL) {
    // An explicit source on the command line wins over the environment.
    opts.flags |= ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  }
  accel_topology_t *topo = NULL;
  accel_status_t st;
  if (from_json != NULL) {
    size_t size = 0;
    char *text = read_file(from_json, &size);
    if (text == NULL) {
      fprintf(stderr, "accel-topo: cannot read %s\n", from_json);
      return 1;
    }
    st = accel_topology_deserialize(text, size, &topo);
    free(text);
  } else {
    st = accel_topology_load(&opts, &topo);
  }
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-topo: %s (%s)\n", accel_last_error(),
            accel_status_name(st));
    return 1;
  }
  size_t length = 0;
  st = accel_topology_format(topo, format, NULL, 0, &length);
  char *text = st == ACCEL_OK ? malloc(length + 1) : NULL;
  if (text != NULL) {
    st = accel_topology_format(topo, format, text, length + 1, &length);
  }
  if (st != ACCEL_OK || text == NULL) {
    fprintf(stderr, "accel-topo: %s\n",
            st != ACCEL_OK ? accel_last_error() : "out of memory");
    free(text);
    accel_topology_destroy(topo);
    return 1;
  }
  fwrite(text, 1, length, stdout);
  free(text);
  accel_topology_destroy(topo);
  return 0;
}
