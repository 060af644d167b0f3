// Checks run after a kernel (ACCEL_RUNTIME_FLAG_CHECK_NUMERICS) and tensor
// summaries for the trace (ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES), over the
// bindings a kernel's code object types (kernel ABI 1.2). docs/numerics.md.
#ifndef ACCEL_ABI_NUMERICS_H_
#define ACCEL_ABI_NUMERICS_H_

#include "abi/executable_impl.h"

// Scans every binding |k| writes (typed f32, f16 or bf16) in declaration
// order for the first NaN or infinity. ACCEL_ERROR_ABORTED with a message
// naming the kernel, the binding, the element and value, and the state of
// the kernel's inputs when one is found; ACCEL_OK otherwise.
accel_status_t accel_numerics_check(const accel_kernel_t *k,
                                    const accel_kernel_dispatch_t *dispatch);

// Records a tensor summary (count, min, max, mean of the finite values,
// NaN and Inf counts) of every typed binding |k| writes, when the trace
// recorder is on.
void accel_numerics_summarize(const accel_kernel_t *k,
                              const accel_kernel_dispatch_t *dispatch);

#endif  // ACCEL_ABI_NUMERICS_H_
