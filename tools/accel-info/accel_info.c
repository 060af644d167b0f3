// accel-info: lists the devices accel sees and their properties.
//   accel-info          devices, one block each
//   accel-info --json   the same as one JSON object
//   accel-info --env    every ACCEL_* environment variable and what it sets
#include <stdio.h>
#include <string.h>

#include "accel/accel.h"
#include "tool_cli.h"

static void print_caps(accel_device_caps_t caps) {
  static const struct {
    accel_device_caps_t bit;
    const char *name;
  } k_caps[] = {
      {ACCEL_DEVICE_CAP_HOST_VISIBLE, "host-visible"},
      {ACCEL_DEVICE_CAP_VIRTUAL_MEMORY, "virtual-memory"},
      {ACCEL_DEVICE_CAP_SEMAPHORE_FD, "semaphore-fd"},
      {ACCEL_DEVICE_CAP_IPC, "ipc"},
      {ACCEL_DEVICE_CAP_HOST_KERNELS, "host-kernels"},
      {ACCEL_DEVICE_CAP_STREAM_PRIORITY, "stream-priority"},
      {ACCEL_DEVICE_CAP_TIMESTAMPS, "timestamps"},
  };
  const char *sep = "";
  for (size_t i = 0; i < sizeof(k_caps) / sizeof(k_caps[0]); ++i) {
    if (caps & k_caps[i].bit) {
      printf("%s%s", sep, k_caps[i].name);
      sep = " ";
    }
  }
}

static const accel_tool_option_t k_options[] = {
    {"--json", NULL, 1, "print the devices as one JSON object"},
    {"--env", NULL, 1,
     "list every ACCEL_* environment variable and what it sets"},
};
enum { OPT_JSON, OPT_ENV };

static const accel_tool_spec_t k_spec = {
    .name = "accel-info",
    .synopsis = "[--json | --env]",
    .description = "Lists the devices accel sees and their properties.",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
};

static int print_env(void) {
  size_t n = 0;
  const accel_env_var_t *vars = accel_env_vars(&n);
  for (size_t j = 0; j < n; ++j) {
    printf("%-28s %s\n", vars[j].name, vars[j].description);
  }
  return 0;
}

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  if (args.values[OPT_ENV] != NULL) {
    return print_env();
  }
  int json = args.values[OPT_JSON] != NULL;
  accel_runtime_t *rt = NULL;
  accel_status_t st = accel_runtime_create(NULL, &rt);
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-info: %s: %s\n", accel_status_name(st),
            accel_last_error());
    return 1;
  }
  uint32_t n = 0;
  accel_device_count(rt, &n);
  uint32_t v = accel_api_version();
  if (json) {
    printf("{\"api_version\": \"%u.%u\", \"devices\": [", v >> 16, v & 0xffff);
  } else {
    printf("accel API %u.%u, %u device(s)\n", v >> 16, v & 0xffff, n);
  }
  for (uint32_t i = 0; i < n; ++i) {
    accel_device_t *dev = NULL;
    accel_device_get(rt, i, &dev);
    accel_device_info_t info = {.struct_size = sizeof(info)};
    accel_device_info(dev, &info);
    if (json) {
      printf("%s{\"index\": %u, \"id\": \"%s\", \"name\": \"%s\", "
             "\"backend\": \"%s\", \"target\": \"%s\", \"pci_bus_id\": "
             "\"%s\", \"memory_bytes\": %llu, \"page_size\": %llu, "
             "\"numa_node\": %d, \"compute_queues\": %u, \"copy_queues\": "
             "%u, \"caps\": %u}",
             i ? ", " : "", info.index, info.id, info.name, info.backend,
             info.target, info.pci_bus_id,
             (unsigned long long)info.memory_bytes,
             (unsigned long long)info.page_size, info.numa_node,
             info.compute_queue_count, info.copy_queue_count, info.caps);
    } else {
      printf("\ndevice %u: %s\n", info.index, info.id);
      printf("  name            %s\n", info.name);
      printf("  backend         %s\n", info.backend);
      printf("  target          %s\n", info.target);
      printf("  pci bus id      %s\n",
             info.pci_bus_id[0] ? info.pci_bus_id : "(none)");
      printf("  memory          %.1f GiB\n",
             (double)info.memory_bytes / (1024.0 * 1024 * 1024));
      printf("  page size       %llu bytes\n",
             (unsigned long long)info.page_size);
      printf("  numa node       %d\n", info.numa_node);
      printf("  compute queues  %u\n", info.compute_queue_count);
      printf("  copy queues     %u\n", info.copy_queue_count);
      printf("  capabilities    ");
      print_caps(info.caps);
      printf("\n");
    }
  }
  // Backends with no devices, and why (a missing driver is not an error).
  static const char *const k_backends[] = {"host", "cuda"};
  if (json) {
    printf("], \"skipped_backends\": {");
  }
  int skipped = 0;
  for (size_t b = 0; b < sizeof(k_backends) / sizeof(k_backends[0]); ++b) {
    const char *reason = NULL;
    if (accel_runtime_backend_status(rt, k_backends[b], &reason) != ACCEL_OK ||
        reason[0] == '\0') {
      continue;  // not built in, or opened
    }
    if (json) {
      printf("%s\"%s\": \"", skipped ? ", " : "", k_backends[b]);
      for (const char *c = reason; *c != '\0'; ++c) {
        if (*c == '"' || *c == '\\') {
          putchar('\\');
        }
        putchar((unsigned char)*c < 0x20 ? ' ' : *c);
      }
      printf("\"");
    } else {
      printf("\nbackend %s: %s\n", k_backends[b], reason);
    }
    skipped++;
  }
  if (json) {
    printf("}}\n");
  }
  accel_runtime_destroy(rt);
  return 0;
}
