// The `accel` tracepoint provider: the probes, built as libaccel-lttng.so
// (linked with liblttng-ust) and loaded only when tracing is wanted
// (ACCEL_LTTNG, or LD_PRELOAD); libaccel holds the tracepoints themselves
// with dynamic linkage (tp_define.c).
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wredundant-decls"
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "trace/tp.h"
