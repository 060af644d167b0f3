// The `accel` tracepoints inside libaccel, with dynamic linkage: their
// probes live in the provider library (tp.c, libaccel-lttng.so), loaded by
// lttng_load.c or LD_PRELOAD; until then every tracepoint is a disabled
// branch and no LTTng library or thread is in the process.
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wredundant-decls"
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_PROBE_DYNAMIC_LINKAGE
#include "trace/tp.h"
