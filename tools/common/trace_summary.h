// Reads a Perfetto trace written by accel (the built-in recorder,
// ACCEL_TRACE / accel_trace_start, or accel-trace convert) into one row per
// slice name: its count, total, p50 and p99 durations and bytes, grouped as
// "kernel" (launches, by kernel name), "host" (host calls), "copy" (by
// direction) and "command" (fill, signal, wait, semaphore waits). A launch's
// time counts once, on its kernel's row. accel-trace summary prints it; the
// decoder example reads where its time went from it. Uses no libaccel.
#ifndef ACCEL_TOOLS_TRACE_SUMMARY_H_
#define ACCEL_TOOLS_TRACE_SUMMARY_H_

#include <stddef.h>
#include <stdint.h>

typedef struct trace_summary_entry {
  char name[96];
  const char *category;  // "kernel", "host", "copy" or "command" (static)
  uint64_t count;
  uint64_t bytes;
  uint64_t total_ns;
  uint64_t p50_ns;
  uint64_t p99_ns;
} trace_summary_entry_t;

// Rows by category (kernel, host, copy, command), by name within one.
typedef struct trace_summary {
  trace_summary_entry_t *entries;
  size_t count;
} trace_summary_t;

// Reads the trace at |path| into |*out| (free with trace_summary_free).
// Returns 0, or 1 after writing why to stderr (the file cannot be read, or
// is not a Perfetto trace: every length is checked before it is used).
int trace_summary_read(const char *path, trace_summary_t *out);

// The same from the bytes [data, data + size) (a trace in memory; the
// libFuzzer target fuzz/fuzz_trace_summary.c). Returns 0, or 1 without a
// message when the bytes are not a Perfetto trace or memory runs out.
int trace_summary_parse(const uint8_t *data, size_t size,
                        trace_summary_t *out);

void trace_summary_free(trace_summary_t *summary);

#endif  // ACCEL_TOOLS_TRACE_SUMMARY_H_
