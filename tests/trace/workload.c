// trace-workload: a fixed program that runs host calls (the host device's
// kernels), copies in every direction, fills, events and semaphores across
// two streams, with known counts, for the trace tests.
//
//   trace-workload COUNTERS_OUT [--record PATH] [--fail] [--iterations N]
//                  [--flight-dump PATH] [--abort] [--execute N]
//
// Writes the accel_counters_snapshot() taken after synchronizing, one
// "scope_name<TAB>name<TAB>value" line per counter, to COUNTERS_OUT. With
// --record the built-in recorder runs from before the runtime is created
// until after the snapshot. With --fail a third stream runs a host call that
// fails (a poisoned stream and an error). With --flight-dump it calls
// accel_trace_flight_dump(PATH) at the end and prints the status; with
// --abort it calls abort() once the work is done. With --execute N a stream
// "replay" executes N times a command buffer of a host call, a fill of 4 KiB
// and a launch of "axpy" (after the rest, before the snapshot).
//
// Per iteration: stream "copy" copies 64 KiB host->device and records an
// event; stream "compute" waits for that event, runs a host call, fills 4 KiB,
// launches the run-time kernel "axpy" on a 4x1x1 grid over them, copies 4 KiB
// device->device and 64 KiB device->host. At the end "compute" signals a
// semaphore to 1, the host waits for it, and "compute" copies the kernel's
// output back (one more d2h copy of 4 KiB).
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"

#define COPY_BYTES 65536u
#define FILL_BYTES 4096u

static accel_status_t host_kernel(void *user_data) {
  unsigned *count = user_data;
  (*count)++;
  return ACCEL_OK;
}

// A run-time kernel: y = a * y + 1 over FILL_BYTES of floats, 256 per
// work-group (a 4x1x1 grid).
static int32_t axpy_kernel(const accel_kernel_dispatch_t *d,
                           const accel_kernel_workgroup_t *wg) {
  const float *a = d->constants;
  float *y = d->bindings[0].data;
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t k = wg->id[0] * 256 + i;
    y[k] = *a * y[k] + 1.0f;
  }
  if (wg->id[0] == 0) {  // one kernel message per launch (kernel ABI 1.1)
    d->message(d, wg, ACCEL_KERNEL_MESSAGE_PRINT, "axpy group 0 done");
  }
  return 0;
}

static accel_status_t failing_kernel(void *user_data) {
  return ACCEL_ERROR_INTERNAL;
}

#define CHECK(expr)                                                       \
  do {                                                                    \
    accel_status_t st_ = (expr);                                          \
    if (st_ != ACCEL_OK) {                                                \
      fprintf(stderr, "trace-workload: %s: %s: %s\n", #expr,              \
              accel_status_name(st_), accel_last_error());                \
      return 1;                                                           \
    }                                                                     \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: trace-workload COUNTERS_OUT [--record PATH] [--fail] "
            "[--iterations N]\n");
    return 2;
  }
  const char *record = NULL;
  const char *flight = NULL;
  bool crash = false;
  bool fail = false;
  unsigned iterations = 8;
  unsigned executes = 0;
  for (int i = 2; i < argc; ++i) {
    if (strcmp(argv[i], "--record") == 0 && i + 1 < argc) {
      record = argv[++i];
    } else if (strcmp(argv[i], "--flight-dump") == 0 && i + 1 < argc) {
      flight = argv[++i];
    } else if (strcmp(argv[i], "--abort") == 0) {
      crash = true;
    } else if (strcmp(argv[i], "--fail") == 0) {
      fail = true;
    } else if (strcmp(argv[i], "--execute") == 0 && i + 1 < argc) {
      executes = (unsigned)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = (unsigned)strtoul(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "trace-workload: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (iterations > 8) {
    fprintf(stderr, "trace-workload: at most 8 iterations\n");
    return 2;
  }
  if (record != NULL) {
    CHECK(accel_trace_start(record));
  }
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  CHECK(accel_runtime_create(NULL, &rt));
  CHECK(accel_device_get(rt, 0, &dev));
  accel_stream_desc_t d = {.struct_size = sizeof(d), .name = "compute"};
  accel_stream_t *compute = NULL, *copy = NULL;
  CHECK(accel_stream_create(dev, &d, &compute));
  d.name = "copy";
  CHECK(accel_stream_create(dev, &d, &copy));
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd),
                            .size_bytes = 1u << 20};
  accel_buffer_t *a = NULL, *b = NULL;
  CHECK(accel_buffer_alloc(dev, &bd, &a));
  CHECK(accel_buffer_alloc(dev, &bd, &b));
  static unsigned char host_in[COPY_BYTES], host_out[COPY_BYTES];
  for (unsigned i = 0; i < COPY_BYTES; ++i) {
    host_in[i] = (unsigned char)(i * 7);
  }
  accel_event_t *ev = NULL;
  CHECK(accel_event_create(dev, 0, &ev));
  unsigned kernels = 0;
  accel_kernel_binding_decl_t decl = {
      .name = "y",
      .access = ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE,
      .alignment = 4};
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "axpy", .fn = axpy_kernel,
                            .binding_count = 1, .bindings = &decl,
                            .constants_size = sizeof(float),
                            .workgroup_size = {256, 1, 1}};
  accel_kernel_t *axpy = NULL;
  CHECK(accel_kernel_register(dev, &kd, &axpy));
  float factor = 2.0f;
  accel_launch_binding_t bind = {.buffer = b};
  accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                            .workgroup_count = {FILL_BYTES / 1024, 1, 1},
                            .binding_count = 1, .bindings = &bind,
                            .constants_size = sizeof(factor),
                            .constants = &factor};
  for (unsigned it = 0; it < iterations; ++it) {
    // Each iteration uses its own slice of |a|: the copy stream runs ahead
    // of the compute stream, which is only ordered after it (by |ev|).
    uint64_t slot = (uint64_t)it * COPY_BYTES;
    CHECK(accel_stream_copy_from_host(copy, a, slot, host_in, COPY_BYTES));
    CHECK(accel_event_record(ev, copy));
    CHECK(accel_stream_wait_event(compute, ev));
    CHECK(accel_stream_host_call(compute, host_kernel, &kernels));
    CHECK(accel_stream_fill(compute, b, 0, FILL_BYTES, 0, 1));
    CHECK(accel_launch(compute, axpy, &ld));
    CHECK(accel_stream_copy(compute, a, 8 * COPY_BYTES + it * FILL_BYTES, b,
                            0, FILL_BYTES));
    CHECK(accel_stream_copy_to_host(compute, host_out, a, slot, COPY_BYTES));
  }
  accel_semaphore_t *sem = NULL;
  CHECK(accel_semaphore_create(dev, 0, &sem));
  CHECK(accel_stream_signal(compute, sem, 1));
  CHECK(accel_semaphore_wait(sem, 1, ACCEL_TIMEOUT_INFINITE));
  CHECK(accel_stream_synchronize(copy, ACCEL_TIMEOUT_INFINITE));
  CHECK(accel_stream_synchronize(compute, ACCEL_TIMEOUT_INFINITE));
  float y[FILL_BYTES / sizeof(float)];
  CHECK(accel_stream_copy_to_host(compute, y, b, 0, FILL_BYTES));
  CHECK(accel_stream_synchronize(compute, ACCEL_TIMEOUT_INFINITE));
  if (kernels != iterations || memcmp(host_in, host_out, COPY_BYTES) != 0 ||
      y[0] != 1.0f || y[FILL_BYTES / sizeof(float) - 1] != 1.0f) {
    fprintf(stderr, "trace-workload: wrong results (%u host calls, y %g)\n",
            kernels, y[0]);
    return 1;
  }
  accel_stream_t *replay = NULL;
  if (executes > 0) {
    d.name = "replay";
    CHECK(accel_stream_create(dev, &d, &replay));
    unsigned replayed = 0;
    accel_command_buffer_t *cb = NULL;
    accel_command_buffer_desc_t cd = {.struct_size = sizeof(cd),
                                      .name = "replayed"};
    CHECK(accel_command_buffer_create(dev, &cd, &cb));
    accel_command_buffer_ref_t out = {.buffer = b};
    accel_command_buffer_launch_desc_t cl = {
        .struct_size = sizeof(cl),
        .workgroup_count = {FILL_BYTES / 1024, 1, 1},
        .binding_count = 1, .bindings = &out,
        .constants_size = sizeof(factor), .constants = &factor};
    CHECK(accel_command_buffer_host_call(cb, host_kernel, &replayed));
    CHECK(accel_command_buffer_fill(cb, &out, FILL_BYTES, 0, 1));
    CHECK(accel_command_buffer_launch(cb, axpy, &cl));
    CHECK(accel_command_buffer_finalize(cb));
    for (unsigned i = 0; i < executes; ++i) {
      CHECK(accel_stream_execute(replay, cb, NULL));
    }
    CHECK(accel_stream_synchronize(replay, ACCEL_TIMEOUT_INFINITE));
    accel_command_buffer_release(cb);
    if (replayed != executes) {
      fprintf(stderr, "trace-workload: %u of %u replays ran\n", replayed,
              executes);
      return 1;
    }
  }
  accel_stream_t *bad = NULL;
  if (fail) {
    d.name = "failing";
    CHECK(accel_stream_create(dev, &d, &bad));
    CHECK(accel_stream_host_call(bad, failing_kernel, NULL));
    accel_status_t st = accel_stream_synchronize(bad, ACCEL_TIMEOUT_INFINITE);
    if (st != ACCEL_ERROR_INTERNAL) {
      fprintf(stderr, "trace-workload: failing stream returned %s\n",
              accel_status_name(st));
      return 1;
    }
  }

  size_t count = 0;
  CHECK(accel_counters_snapshot(NULL, 0, &count));
  accel_counter_t *counters = calloc(count, sizeof(*counters));
  if (counters == NULL) {
    return 1;
  }
  counters[0].struct_size = sizeof(*counters);
  size_t n = 0;
  CHECK(accel_counters_snapshot(counters, count, &n));
  FILE *out = fopen(argv[1], "w");
  if (out == NULL) {
    perror(argv[1]);
    return 1;
  }
  for (size_t i = 0; i < n && i < count; ++i) {
    fprintf(out, "%s\t%s\t%llu\n", counters[i].scope_name, counters[i].name,
            (unsigned long long)counters[i].value);
  }
  fclose(out);
  free(counters);
  if (record != NULL) {
    CHECK(accel_trace_stop());
  }
  if (crash) {
    abort();  // with ACCEL_FLIGHT_DIR: the flight recorder is written
  }
  if (flight != NULL) {
    accel_status_t st = accel_trace_flight_dump(flight);
    printf("flight dump: %s: %s\n", accel_status_name(st),
           accel_last_error());
  }
  accel_stream_destroy(bad);
  accel_stream_destroy(replay);
  accel_kernel_release(axpy);
  accel_semaphore_release(sem);
  accel_event_release(ev);
  accel_buffer_release(a);
  accel_buffer_release(b);
  accel_stream_destroy(copy);
  accel_stream_destroy(compute);
  accel_runtime_destroy(rt);
  return 0;
}
