// accel: the host-side runtime for machine-learning accelerators.
// Include this header for the whole public API.
#ifndef ACCEL_ACCEL_H_
#define ACCEL_ACCEL_H_

#include "accel/base.h"
#include "accel/api_table.h"
#include "accel/command_buffer.h"
#include "accel/cluster.h"
#include "accel/device.h"
#include "accel/dlpack.h"
#include "accel/dma.h"
#include "accel/event.h"
#include "accel/executable.h"
#include "accel/gguf.h"
#include "accel/gguf_import.h"
#include "accel/health.h"
#include "accel/kv_cache.h"
#include "accel/scheduler.h"
#include "accel/kernel_abi.h"
#include "accel/memory.h"
#include "accel/runtime.h"
#include "accel/sampling.h"
#include "accel/semaphore.h"
#include "accel/serve.h"
#include "accel/stream.h"
#include "accel/tokenizer.h"
#include "accel/topology.h"
#include "accel/trace.h"

#endif  // ACCEL_ACCEL_H_
