// libFuzzer target for the Perfetto trace reader of accel-trace summary and
// the decoder example (tools/common/trace_summary.c): every input must be
// read or refused; anything else (a crash, a sanitizer report, a hang) is a
// bug. A read input's rows are walked, so that a row with a dangling name or
// category shows up. Built by scripts/fuzz-trace-summary.sh.
#include <stdint.h>
#include <string.h>

#include "trace_summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  trace_summary_t s;
  if (trace_summary_parse(data, size, &s) != 0) {
    return 0;
  }
  uint64_t acc = 0;
  for (size_t i = 0; i < s.count; ++i) {
    acc += strlen(s.entries[i].name) + strlen(s.entries[i].category) +
           s.entries[i].total_ns + s.entries[i].p99_ns;
  }
  g_sink = acc;
  trace_summary_free(&s);
  return 0;
}
