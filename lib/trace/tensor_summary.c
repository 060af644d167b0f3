// The shared text of a tensor summary (tensor_summary.h).
#include "trace/tensor_summary.h"

#include <stdio.h>

// |in| with spaces and '=' replaced (they separate the pairs), "-" if empty.
static void token(const char *in, char *out, size_t size) {
  if (in == NULL || in[0] == '\0') {
    in = "-";
  }
  size_t i = 0;
  for (; in[i] != '\0' && i + 1 < size; ++i) {
    out[i] = in[i] == ' ' || in[i] == '=' ? '_' : in[i];
  }
  out[i] = '\0';
}

size_t accel_trace_tensor_summary_format(const accel_trace_tensor_summary_t *s,
                                         char *out, size_t size) {
  char kernel[128], name[128];
  token(s->kernel, kernel, sizeof(kernel));
  token(s->name, name, sizeof(name));
  int n = snprintf(out, size,
                   "kernel=%s binding=%u name=%s count=%llu min=%.9g max=%.9g "
                   "mean=%.9g nan=%llu inf=%llu",
                   kernel, s->binding, name, (unsigned long long)s->count,
                   s->min, s->max, s->mean, (unsigned long long)s->nan,
                   (unsigned long long)s->inf);
  return n < 0 ? 0 : (size_t)n;
}
