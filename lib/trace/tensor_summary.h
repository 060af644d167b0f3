// A tensor summary: what one kernel wrote to one typed output binding
// (ACCEL_TRACE_TENSORS, lib/abi/numerics.c), in the form both trace sinks
// share: the built-in recorder stores the text of
// accel_trace_tensor_summary_format as the args of a "tensor summary"
// instant, the accel:tensor_summary LTTng tracepoint carries the fields, and
// accel-trace convert formats those fields with the same function, so that
// both paths give the same instant.
#ifndef ACCEL_TRACE_TENSOR_SUMMARY_H_
#define ACCEL_TRACE_TENSOR_SUMMARY_H_

#include <stddef.h>
#include <stdint.h>

typedef struct accel_trace_tensor_summary {
  const char *kernel;  // the kernel's name (borrowed)
  const char *name;    // the binding's name (borrowed); NULL or "" if none
  uint32_t binding;    // the binding's index
  uint64_t count;      // elements
  uint64_t nan;        // NaN elements
  uint64_t inf;        // +Inf and -Inf elements
  // Over the finite elements; 0 when there is none.
  double min;
  double max;
  double mean;
} accel_trace_tensor_summary_t;

// The text "kernel=K binding=B name=N count=C min=X max=X mean=X nan=C inf=C"
// (values without spaces: a space in a name becomes '_', an empty name is
// "-"; reals with %.9g) into |out| of |size| bytes (truncated, always
// terminated when |size| > 0). Returns the length it would have had.
size_t accel_trace_tensor_summary_format(const accel_trace_tensor_summary_t *s,
                                         char *out, size_t size);

#endif  // ACCEL_TRACE_TENSOR_SUMMARY_H_
