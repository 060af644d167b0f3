// accel-topo: the machine's topology as accel sees it.
//   accel-topo                 matrix of path classes (like nvidia-smi topo -m)
//   accel-topo --tree          the hwloc tree with devices and NICs named
//   accel-topo --json          everything as one JSON object (the serialized
//                              form that accel_topology_deserialize reads)
//   accel-topo --xml FILE      any of the above for an hwloc XML file
//   accel-topo --synthetic S   any of the above for an hwloc synthetic string
//   accel-topo --from-json F   any of the above for a serialized topology
//   accel-topo --xml-out FILE  also writes what hwloc found as hwloc XML
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"
#include "tool_cli.h"

#if ACCEL_TOPO_HAVE_HWLOC
#include <hwloc.h>
#endif

static const accel_tool_option_t k_options[] = {
    {"--matrix", NULL, 1,
     "print the matrix of path classes (like nvidia-smi topo -m; default)"},
    {"--tree", NULL, 1, "print the hwloc tree with devices and NICs named"},
    {"--json", NULL, 1,
     "print everything as one JSON object (what --from-json reads)"},
    {"--xml", "FILE", 2, "read the topology from an hwloc XML file"},
    {"--synthetic", "DESC", 2,
     "read the topology from an hwloc synthetic description"},
    {"--from-json", "FILE", 2, "read a topology that --json wrote"},
    {"--xml-out", "FILE", 0,
     "also write the hwloc topology accel read as hwloc XML to FILE"},
};
enum { OPT_MATRIX, OPT_TREE, OPT_JSON, OPT_XML, OPT_SYNTHETIC, OPT_FROM_JSON,
       OPT_XML_OUT };

static const accel_tool_spec_t k_spec = {
    .name = "accel-topo",
    .synopsis = "[--matrix | --tree | --json] [--xml FILE | --synthetic DESC "
                "| --from-json FILE] [--xml-out FILE]",
    .description = "Shows the machine's topology as accel sees it (the live "
                   "machine unless a source is given; ACCEL_TOPOLOGY_XML "
                   "overrides the live machine).",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
};

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

// Writes the hwloc topology of the source accel read (|opts|, else
// ACCEL_TOPOLOGY_XML, else the live machine) to |path| as hwloc XML, loaded
// the way lib/topo loads it (important I/O objects kept), so that lstopo and
// other hwloc tools read what accel saw. Returns 0 or prints why not.
static int write_hwloc_xml(const accel_topology_options_t *opts,
                           const char *path) {
#if ACCEL_TOPO_HAVE_HWLOC
  const char *xml = opts->xml_path;
  const char *env = getenv("ACCEL_TOPOLOGY_XML");
  if (xml == NULL && opts->synthetic == NULL && env != NULL && env[0] != '\0') {
    xml = env;
  }
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    fprintf(stderr, "accel-topo: --xml-out: hwloc_topology_init failed\n");
    return 1;
  }
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  static const char *const k_skipped[] = {"opencl", "gl", "pci"};
  for (size_t i = 0; i < sizeof(k_skipped) / sizeof(k_skipped[0]); ++i) {
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                  k_skipped[i]);
  }
  int rc = 1;
  if ((xml != NULL && hwloc_topology_set_xml(topo, xml) != 0) ||
      (xml == NULL && opts->synthetic != NULL &&
       hwloc_topology_set_synthetic(topo, opts->synthetic) != 0) ||
      hwloc_topology_load(topo) != 0) {
    fprintf(stderr, "accel-topo: --xml-out: hwloc cannot load the topology\n");
  } else if (hwloc_topology_export_xml(topo, path, 0) != 0) {
    fprintf(stderr, "accel-topo: --xml-out: cannot write \"%s\": %s\n", path,
            strerror(errno));
  } else {
    rc = 0;
  }
  hwloc_topology_destroy(topo);
  return rc;
#else
  (void)opts;
  fprintf(stderr, "accel-topo: --xml-out %s: built without hwloc\n", path);
  return 1;
#endif
}

// Loads the topology from |from_json| or |opts|. Returns 0 or prints why not.
static int load(const accel_topology_options_t *opts, const char *from_json,
                accel_topology_t **out) {
  accel_status_t st;
  if (from_json == NULL) {
    st = accel_topology_load(opts, out);
  } else {
    size_t size = 0;
    char *text = read_file(from_json, &size);
    if (text == NULL) {
      fprintf(stderr, "accel-topo: cannot read %s: %s\n", from_json,
              strerror(errno));
      return 1;
    }
    st = accel_topology_deserialize(text, size, out);
    free(text);
  }
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-topo: %s (%s)\n", accel_last_error(),
            accel_status_name(st));
    return 1;
  }
  return 0;
}

// Prints |topo| as |format|; in text formats, first says so plainly when the
// machine has no accelerator (the matrix then shows NICs only).
static int print_topology(const accel_topology_t *topo,
                          accel_topology_format_kind_t format) {
  accel_topology_summary_t sum = {.struct_size = sizeof(sum)};
  if (format != ACCEL_TOPOLOGY_FORMAT_JSON &&
      accel_topology_summary(topo, &sum) == ACCEL_OK &&
      sum.device_count == 0) {
    printf("no accelerator found (%s; %u NIC%s, %u NUMA node%s); the notes "
           "below say what was looked for\n\n",
           sum.source, sum.nic_count, sum.nic_count == 1 ? "" : "s",
           sum.numa_node_count, sum.numa_node_count == 1 ? "" : "s");
  }
  size_t length = 0;
  accel_status_t st = accel_topology_format(topo, format, NULL, 0, &length);
  char *text = st == ACCEL_OK ? malloc(length + 1) : NULL;
  if (text != NULL) {
    st = accel_topology_format(topo, format, text, length + 1, &length);
  }
  if (st != ACCEL_OK || text == NULL) {
    fprintf(stderr, "accel-topo: %s\n",
            st != ACCEL_OK ? accel_last_error() : "out of memory");
    free(text);
    return 1;
  }
  fwrite(text, 1, length, stdout);
  free(text);
  return 0;
}

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  accel_topology_format_kind_t format =
      args.values[OPT_TREE]   ? ACCEL_TOPOLOGY_FORMAT_TREE
      : args.values[OPT_JSON] ? ACCEL_TOPOLOGY_FORMAT_JSON
                              : ACCEL_TOPOLOGY_FORMAT_MATRIX;
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.xml_path = args.values[OPT_XML];
  opts.synthetic = args.values[OPT_SYNTHETIC];
  const char *from_json = args.values[OPT_FROM_JSON];
  const char *xml_out = args.values[OPT_XML_OUT];
  if (xml_out != NULL && from_json != NULL) {
    return accel_tool_usage_error(&k_spec,
                                  "--xml-out needs an hwloc source: a "
                                  "topology read with --from-json has none");
  }
  if (opts.xml_path != NULL || opts.synthetic != NULL) {
    // An explicit source on the command line wins over the environment.
    opts.flags |= ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  }
  accel_topology_t *topo = NULL;
  if (load(&opts, from_json, &topo) != 0) {
    return 1;
  }
  rc = print_topology(topo, format);
  accel_topology_destroy(topo);
  if (rc == 0 && xml_out != NULL) {
    rc = write_hwloc_xml(&opts, xml_out);
  }
  return rc;
}
