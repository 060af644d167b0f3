// A strict test double of the CUDA driver API, built as libcuda.so.1 for the
// tests only (ACCEL_CUDA_LIBRARY points the cuda backend at it). Device
// memory is host memory and each stream is a host thread, so that the
// backend's logic runs in CI where no GPU exists.
//
// What it proves: that accel uses the driver API as documented. It enforces
// the documented rules of every call the backend makes (ACCEL_CUDA_SYMBOLS):
// a current context, handles of the right kind and still alive, sizes and
// offsets that are multiples of the allocation granularity, mapped ranges
// with access set before any device access, stream order, sticky errors
// (after an illegal address every call in the context returns it),
// CUDA_ERROR_NOT_READY from queries of busy streams, and no CUDA call from a
// host function. What it does not prove: anything about NVIDIA's driver or a
// GPU (timing, caching, PCIe, the real ordering of device writes); those are
// checked by scripts/gpu-check.sh on a machine with a GPU.
//
// Configuration (read at cuInit):
//   CUDA_DOUBLE_DEVICES=N     devices (default 2)
//   CUDA_DOUBLE_MODE=stub     cuInit answers CUDA_ERROR_STUB_LIBRARY
//   CUDA_DOUBLE_MODE=nodevice cuInit answers CUDA_ERROR_NO_DEVICE
//   CUDA_DOUBLE_MODE=nomemops no 64-bit stream memory operations (nor
//                             batch mem-op graph nodes)
//   CUDA_VISIBLE_DEVICES      as the driver applies it
// Test hooks: cuda_double_inject_fault(CUresult) makes the next copy or fill
// a stream executes fail with that (sticky) error;
// cuda_double_fail_call(name, CUresult) makes the next call of entry |name|
// (those that acquire resources) return that error, and
// cuda_double_fail_armed() says whether it is still waiting for the call;
// cuda_double_register_kernel(name, fn, param_sizes, count) gives the PTX
// entry |name| a host function to run at launch (the SIMT emulator that
// would run the PTX's CUDA C source is a later step). PTX is parsed only
// for its .entry names and parameter counts; cubin images are refused.
// Every driver entry defined here is exported (the project builds with
// -fvisibility=hidden).
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "drv/cuda/cuda_symbols.h"

#define EXPORT __attribute__((visibility("default")))
#define GRANULARITY (2ull << 20)
#define MAX_DEVICES 8
#define PHYS_NAME "cuda-double-phys"

// ---------------------------------------------------------------------------
// State.
// ---------------------------------------------------------------------------

enum { KIND_CTX = 0x43545831, KIND_STREAM = 0x53545231, KIND_PHYS = 0x50485931 };

typedef struct ctx {
  uint32_t kind;
  int device;  // physical index
  int retains;
  _Atomic int sticky;  // CUresult; 0 while healthy
} ctx_t;

typedef struct range {
  struct range *next;
  uint64_t base, size;
  int type;  // RANGE_*
  int access;  // mappings: CU_MEM_ACCESS_FLAGS_PROT_*
  struct phys *phys;  // mappings
  unsigned flags;     // host allocations / registrations
} range_t;

enum { RANGE_RESERVED = 1, RANGE_MAPPED, RANGE_HOST_ALLOC, RANGE_HOST_REGISTERED };

typedef struct phys {
  uint32_t kind;
  struct phys *next;
  int fd;
  uint64_t size;
  bool exportable;
} phys_t;

typedef enum op_kind {
  OP_COPY, OP_FILL, OP_WAIT, OP_WRITE, OP_HOST, OP_KERNEL,
  // A graph launch's first and last operations (graphs below).
  OP_GRAPH_BEGIN, OP_GRAPH_END
} op_kind_t;

struct gexec;

// A host function standing in for a kernel: called once per launch with
// copies of the parameter values and the launch shape.
typedef void (*cuda_double_kernel_fn)(void **params, const unsigned grid[3],
                                      const unsigned block[3]);

#define MAX_KERNEL_PARAMS 64

typedef struct registered_kernel {
  struct registered_kernel *next;
  char name[128];
  cuda_double_kernel_fn fn;
  uint32_t param_count;
  size_t param_sizes[MAX_KERNEL_PARAMS];
} registered_kernel_t;

typedef struct library {
  uint32_t kind;
  struct library *next;
  uint32_t entry_count;
  struct {
    char name[128];
    uint32_t param_count;
  } entries[64];
} library_t;

enum { KIND_LIBRARY = 0x4c494231, KIND_KERNEL = 0x4b524e31 };

typedef struct kernel {
  uint32_t kind;
  struct kernel *next;
  library_t *library;
  uint32_t entry;
} kernel_t;

typedef struct op {
  struct op *next;
  op_kind_t kind;
  union {
    struct {  // strided 3D copy (1D: height = depth = 1)
      uint64_t dst, src, width, height, depth;
      uint64_t dst_pitch, src_pitch, dst_slice, src_slice;
    } copy;
    struct {  // strided fill of |elem|-byte values
      uint64_t dst, pitch, width, height, value;
      uint32_t elem;
    } fill;
    struct {
      uint64_t addr, value;
    } word;
    struct {
      CUhostFn fn;
      void *user_data;
    } host;
    struct {
      cuda_double_kernel_fn fn;
      unsigned grid[3], block[3];
      void *params[MAX_KERNEL_PARAMS];  // each a malloc'ed copy
      uint32_t param_count;
    } kernel;
    struct {
      struct gexec *exec;
      uint64_t number;  // the exec's launch number, from 1
    } graph;
  };
} op_t;

typedef struct stream {
  uint32_t kind;
  struct stream *next_live;
  ctx_t *ctx;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  op_t *head, *tail;
  uint32_t pending;  // queued + running (lock)
  bool destroyed;    // lock
} stream_t;

static struct {
  pthread_mutex_t lock;  // guards everything below
  bool initialized;
  int mode_nomemops;
  int physical_count;
  int visible[MAX_DEVICES];  // ordinal -> physical index
  int visible_count;
  ctx_t ctx[MAX_DEVICES];
  range_t *ranges;
  phys_t *phys;
  stream_t *streams;
  CUresult inject;  // next copy/fill fails with this
  registered_kernel_t *registered;
  library_t *libraries;
  kernel_t *kernels;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

// Initial-exec: static TLS, which glibc keeps in a surplus for dlopen'ed
// libraries; dynamic TLS blocks are freed by ld.so at thread exit, which
// ThreadSanitizer does not see ordered after the thread's last access.
static _Thread_local ctx_t *t_current __attribute__((tls_model("initial-exec")));
static _Thread_local bool t_in_callback
    __attribute__((tls_model("initial-exec")));

EXPORT void cuda_double_inject_fault(CUresult result);
void cuda_double_inject_fault(CUresult result) {
  pthread_mutex_lock(&g.lock);
  g.inject = result;
  pthread_mutex_unlock(&g.lock);
}

// One armed failure of a named entry point (g.lock).
static char g_fail_name[64];
static CUresult g_fail_result;

EXPORT void cuda_double_fail_call(const char *name, CUresult result);
void cuda_double_fail_call(const char *name, CUresult result) {
  pthread_mutex_lock(&g.lock);
  snprintf(g_fail_name, sizeof(g_fail_name), "%s", name);
  g_fail_result = result;
  pthread_mutex_unlock(&g.lock);
}

EXPORT int cuda_double_fail_armed(void);
int cuda_double_fail_armed(void) {
  pthread_mutex_lock(&g.lock);
  int armed = g_fail_name[0] != '\0';
  pthread_mutex_unlock(&g.lock);
  return armed;
}

// The armed failure if it names |name| (consumed), else CUDA_SUCCESS.
static CUresult injected(const char *name) {
  pthread_mutex_lock(&g.lock);
  CUresult r = CUDA_SUCCESS;
  if (g_fail_name[0] != '\0' && strcmp(g_fail_name, name) == 0) {
    r = g_fail_result;
    g_fail_name[0] = '\0';
  }
  pthread_mutex_unlock(&g.lock);
  return r;
}

EXPORT void cuda_double_register_kernel(const char *name,
                                        cuda_double_kernel_fn fn,
                                        const size_t *param_sizes,
                                        uint32_t param_count);
void cuda_double_register_kernel(const char *name, cuda_double_kernel_fn fn,
                                 const size_t *param_sizes,
                                 uint32_t param_count) {
  registered_kernel_t *k = calloc(1, sizeof(*k));
  if (k == NULL || param_count > MAX_KERNEL_PARAMS) {
    free(k);
    return;
  }
  snprintf(k->name, sizeof(k->name), "%s", name);
  k->fn = fn;
  k->param_count = param_count;
  if (param_count > 0) {
    memcpy(k->param_sizes, param_sizes, param_count * sizeof(size_t));
  }
  pthread_mutex_lock(&g.lock);
  k->next = g.registered;
  g.registered = k;
  pthread_mutex_unlock(&g.lock);
}

// Every entry: initialized, not inside a host function.
static CUresult enter(void) {
  if (t_in_callback) {
    return CUDA_ERROR_NOT_PERMITTED;  // host functions must not call CUDA
  }
  pthread_mutex_lock(&g.lock);
  bool ok = g.initialized;
  pthread_mutex_unlock(&g.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

// Entries that need a current context: its sticky error, if any.
static CUresult enter_ctx(ctx_t **out) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  ctx_t *c = t_current;
  if (c == NULL) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  pthread_mutex_lock(&g.lock);
  int retains = c->retains;
  pthread_mutex_unlock(&g.lock);
  if (retains <= 0) {
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  int sticky = atomic_load(&c->sticky);
  if (sticky != 0) {
    return (CUresult)sticky;
  }
  if (out != NULL) {
    *out = c;
  }
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Initialization, errors, devices, contexts.
// ---------------------------------------------------------------------------

static void parse_visible(void) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  g.visible_count = 0;
  if (v == NULL) {
    for (int i = 0; i < g.physical_count; ++i) {
      g.visible[g.visible_count++] = i;
    }
    return;
  }
  // As the driver: indices separated by commas; the list stops at the first
  // entry that is not a valid, unused index.
  const char *p = v;
  while (*p != '\0' && g.visible_count < MAX_DEVICES) {
    char *end = NULL;
    long idx = strtol(p, &end, 10);
    if (end == p || idx < 0 || idx >= g.physical_count) {
      break;
    }
    bool dup = false;
    for (int i = 0; i < g.visible_count; ++i) {
      dup = dup || g.visible[i] == idx;
    }
    if (dup) {
      break;
    }
    g.visible[g.visible_count++] = (int)idx;
    p = *end == ',' ? end + 1 : end;
    if (*end != ',') {
      break;
    }
  }
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const char *mode = getenv("CUDA_DOUBLE_MODE");
  if (mode != NULL && strcmp(mode, "stub") == 0) {
    return CUDA_ERROR_STUB_LIBRARY;
  }
  if (mode != NULL && strcmp(mode, "nodevice") == 0) {
    return CUDA_ERROR_NO_DEVICE;
  }
  pthread_mutex_lock(&g.lock);
  if (!g.initialized) {
    const char *n = getenv("CUDA_DOUBLE_DEVICES");
    g.physical_count = n != NULL ? atoi(n) : 2;
    if (g.physical_count < 0 || g.physical_count > MAX_DEVICES) {
      g.physical_count = 2;
    }
    g.mode_nomemops = mode != NULL && strcmp(mode, "nomemops") == 0;
    parse_visible();
    for (int i = 0; i < MAX_DEVICES; ++i) {
      g.ctx[i].kind = KIND_CTX;
      g.ctx[i].device = i;
    }
    g.initialized = true;
  }
  CUresult r = g.visible_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
  pthread_mutex_unlock(&g.lock);
  return r;
}

CUresult cuDriverGetVersion(int *version) {
  if (version == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

static const struct {
  CUresult code;
  const char *name, *text;
} k_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
     "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
     "invalid device context"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
     "context is destroyed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "unspecified launch failure"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
     "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
     "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED",
     "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "operation not supported"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED",
     "resource already mapped"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
     "device kernel image is invalid"},
};

CUresult cuGetErrorName(CUresult error, const char **str) {
  for (size_t i = 0; i < sizeof(k_errors) / sizeof(k_errors[0]); ++i) {
    if (k_errors[i].code == error) {
      *str = k_errors[i].name;
      return CUDA_SUCCESS;
    }
  }
  *str = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **str) {
  for (size_t i = 0; i < sizeof(k_errors) / sizeof(k_errors[0]); ++i) {
    if (k_errors[i].code == error) {
      *str = k_errors[i].text;
      return CUDA_SUCCESS;
    }
  }
  *str = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (count == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *count = g.visible_count;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (device == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (ordinal < 0 || ordinal >= g.visible_count) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *device = ordinal;
  return CUDA_SUCCESS;
}

static bool valid_device(CUdevice dev) {
  return dev >= 0 && dev < g.visible_count;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (name == NULL || len <= 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!valid_device(dev)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  snprintf(name, (size_t)len, "CUDA test double %d", g.visible[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (bytes == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!valid_device(dev)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *bytes = 16ull << 30;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                              CUdevice dev) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (pi == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!valid_device(dev)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      *pi = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
      *pi = g.mode_nomemops ? 0 : 1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (bus_id == NULL || len < 13) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!valid_device(dev)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  snprintf(bus_id, (size_t)len, "0000:%02X:00.0", 0x10 + g.visible[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (pctx == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!valid_device(dev)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  pthread_mutex_lock(&g.lock);
  ctx_t *c = &g.ctx[g.visible[dev]];
  c->retains++;
  pthread_mutex_unlock(&g.lock);
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (!valid_device(dev)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  pthread_mutex_lock(&g.lock);
  ctx_t *c = &g.ctx[g.visible[dev]];
  if (c->retains <= 0) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_CONTEXT;  // released more often than retained
  }
  if (--c->retains == 0) {
    // The primary context is reset when its last user releases it.
    atomic_store(&c->sticky, 0);
  }
  pthread_mutex_unlock(&g.lock);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  ctx_t *c = (ctx_t *)ctx;
  if (c != NULL && (c < &g.ctx[0] || c >= &g.ctx[MAX_DEVICES])) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  t_current = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (least != NULL) {
    *least = 0;
  }
  if (greatest != NULL) {
    *greatest = -5;
  }
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Address ranges (g.lock held).
// ---------------------------------------------------------------------------

static range_t *range_find_locked(uint64_t addr, int type) {
  for (range_t *r = g.ranges; r != NULL; r = r->next) {
    if (r->type == type && addr >= r->base && addr - r->base < r->size) {
      return r;
    }
  }
  return NULL;
}

static bool range_overlaps_locked(uint64_t base, uint64_t size, int type) {
  for (range_t *r = g.ranges; r != NULL; r = r->next) {
    if (r->type == type && base < r->base + r->size && r->base < base + size) {
      return true;
    }
  }
  return false;
}

static range_t *range_add_locked(uint64_t base, uint64_t size, int type) {
  range_t *r = calloc(1, sizeof(*r));
  if (r == NULL) {
    return NULL;
  }
  r->base = base;
  r->size = size;
  r->type = type;
  r->next = g.ranges;
  g.ranges = r;
  return r;
}

static void range_remove_locked(range_t *victim) {
  for (range_t **p = &g.ranges; *p != NULL; p = &(*p)->next) {
    if (*p == victim) {
      *p = victim->next;
      free(victim);
      return;
    }
  }
}

// True when [addr, addr+size) may be accessed by a stream: entirely covered
// by mappings with at least |need| access, or inside one pinned host range,
// or (|host_ok|, copies) memory the double knows nothing of (pageable host
// memory under unified addressing). A range inside a reservation but not
// mapped (or mapped without access) is an illegal address.
static bool access_ok_locked(uint64_t addr, uint64_t size, int need,
                             bool host_ok) {
  if (size == 0) {
    return true;
  }
  for (int t = RANGE_HOST_ALLOC; t <= RANGE_HOST_REGISTERED; ++t) {
    range_t *h = range_find_locked(addr, t);
    if (h != NULL) {
      return size <= h->base + h->size - addr;
    }
  }
  if (range_find_locked(addr, RANGE_RESERVED) == NULL &&
      range_find_locked(addr + size - 1, RANGE_RESERVED) == NULL) {
    return host_ok;
  }
  uint64_t at = addr, end = addr + size;
  while (at < end) {
    range_t *m = range_find_locked(at, RANGE_MAPPED);
    if (m == NULL || (m->access & need) != need) {
      return false;
    }
    at = m->base + m->size;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Virtual memory management.
// ---------------------------------------------------------------------------

static bool valid_prop(const CUmemAllocationProp *prop) {
  return prop != NULL && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
         valid_device(prop->location.id);
}

CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                       const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (granularity == NULL || !valid_prop(prop) ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = GRANULARITY;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemAddressReserve");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (ptr == NULL || size == 0 || size % GRANULARITY != 0 || flags != 0 ||
      addr != 0 || (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (alignment < GRANULARITY) {
    alignment = GRANULARITY;
  }
  size_t span = size + alignment;
  void *p = mmap(NULL, span, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t base = (uint64_t)(uintptr_t)p;
  uint64_t aligned = (base + alignment - 1) & ~(uint64_t)(alignment - 1);
  if (aligned > base) {
    munmap(p, aligned - base);
  }
  if (base + span > aligned + size) {
    munmap((void *)(uintptr_t)(aligned + size), base + span - aligned - size);
  }
  pthread_mutex_lock(&g.lock);
  range_t *rr = range_add_locked(aligned, size, RANGE_RESERVED);
  pthread_mutex_unlock(&g.lock);
  if (rr == NULL) {
    munmap((void *)(uintptr_t)aligned, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = aligned;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  range_t *res = range_find_locked(ptr, RANGE_RESERVED);
  // The whole reservation, with no mapping left in it.
  if (res == NULL || res->base != ptr || res->size != size ||
      range_overlaps_locked(ptr, size, RANGE_MAPPED)) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  range_remove_locked(res);
  pthread_mutex_unlock(&g.lock);
  munmap((void *)(uintptr_t)ptr, size);
  return CUDA_SUCCESS;
}

static phys_t *phys_lookup_locked(CUmemGenericAllocationHandle h) {
  for (phys_t *p = g.phys; p != NULL; p = p->next) {
    if ((CUmemGenericAllocationHandle)(uintptr_t)p == h) {
      return p;
    }
  }
  return NULL;
}

static CUresult phys_add(int fd, uint64_t size, bool exportable,
                         CUmemGenericAllocationHandle *out) {
  phys_t *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  p->kind = KIND_PHYS;
  p->fd = fd;
  p->size = size;
  p->exportable = exportable;
  pthread_mutex_lock(&g.lock);
  p->next = g.phys;
  g.phys = p;
  pthread_mutex_unlock(&g.lock);
  *out = (CUmemGenericAllocationHandle)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop,
                     unsigned long long flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemCreate");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (handle == NULL || size == 0 || size % GRANULARITY != 0 || flags != 0 ||
      !valid_prop(prop) ||
      (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
       prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int fd = memfd_create(PHYS_NAME, MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    if (fd >= 0) {
      close(fd);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // cuMemCreate does not promise zeroed memory: the first and last pages
  // hold garbage, so that a user that relies on zeroes sees it.
  static const uint8_t garbage[4096] = {[0 ... 4095] = 0xa5};
  if (pwrite(fd, garbage, sizeof(garbage), 0) != (ssize_t)sizeof(garbage) ||
      pwrite(fd, garbage, sizeof(garbage), (off_t)(size - sizeof(garbage))) !=
          (ssize_t)sizeof(garbage)) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = phys_add(fd, size,
               prop->requestedHandleTypes ==
                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
               handle);
  if (r != CUDA_SUCCESS) {
    close(fd);
  }
  return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  phys_t *p = phys_lookup_locked(handle);
  if (p == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (phys_t **pp = &g.phys; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  }
  // Mappings keep the memory (their mmap holds the file) until unmapped.
  for (range_t *m = g.ranges; m != NULL; m = m->next) {
    if (m->type == RANGE_MAPPED && m->phys == p) {
      m->phys = NULL;
    }
  }
  pthread_mutex_unlock(&g.lock);
  close(p->fd);
  free(p);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemMap");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (size == 0 || size % GRANULARITY != 0 || offset % GRANULARITY != 0 ||
      ptr % GRANULARITY != 0 || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  phys_t *p = phys_lookup_locked(handle);
  range_t *res = range_find_locked(ptr, RANGE_RESERVED);
  if (p == NULL || res == NULL || ptr + size > res->base + res->size ||
      offset + size > p->size) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (range_overlaps_locked(ptr, size, RANGE_MAPPED)) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_ALREADY_MAPPED;
  }
  // Inaccessible until cuMemSetAccess, as on a GPU.
  void *m = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
                 MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset);
  range_t *mr = m == MAP_FAILED ? NULL
                                : range_add_locked(ptr, size, RANGE_MAPPED);
  if (mr == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  mr->phys = p;
  mr->access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  pthread_mutex_unlock(&g.lock);
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (size == 0 || size % GRANULARITY != 0 || ptr % GRANULARITY != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  // Only whole mappings, covering the range exactly.
  uint64_t at = ptr, end = ptr + size;
  while (at < end) {
    range_t *m = range_find_locked(at, RANGE_MAPPED);
    if (m == NULL || m->base != at || m->base + m->size > end) {
      pthread_mutex_unlock(&g.lock);
      return CUDA_ERROR_INVALID_VALUE;
    }
    at = m->base + m->size;
  }
  for (at = ptr; at < end;) {
    range_t *m = range_find_locked(at, RANGE_MAPPED);
    at = m->base + m->size;
    range_remove_locked(m);
  }
  mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  pthread_mutex_unlock(&g.lock);
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
                        const CUmemAccessDesc *desc, size_t count) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemSetAccess");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (desc == NULL || count == 0 || size == 0 || size % GRANULARITY != 0 ||
      ptr % GRANULARITY != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int access = -1;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !valid_device(desc[i].location.id) ||
        (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    access = (int)desc[i].flags;
  }
  pthread_mutex_lock(&g.lock);
  uint64_t at = ptr, end = ptr + size;
  while (at < end) {  // the range must be mapped throughout
    range_t *m = range_find_locked(at, RANGE_MAPPED);
    if (m == NULL) {
      pthread_mutex_unlock(&g.lock);
      return CUDA_ERROR_INVALID_VALUE;
    }
    at = m->base + m->size;
  }
  for (at = ptr; at < end;) {
    range_t *m = range_find_locked(at, RANGE_MAPPED);
    m->access = access;
    at = m->base + m->size;
  }
  int prot = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                 ? PROT_READ | PROT_WRITE
             : access == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ
                                                       : PROT_NONE;
  mprotect((void *)(uintptr_t)ptr, size, prot);
  pthread_mutex_unlock(&g.lock);
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareable,
                                      CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type,
                                      unsigned long long flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemExportToShareableHandle");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (shareable == NULL || flags != 0 ||
      type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  phys_t *p = phys_lookup_locked(handle);
  int fd = p != NULL && p->exportable ? fcntl(p->fd, F_DUPFD_CLOEXEC, 0) : -2;
  pthread_mutex_unlock(&g.lock);
  if (fd == -2) {
    // Export needs the handle type requested at cuMemCreate.
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (fd < 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *(int *)shareable = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                        void *os_handle,
                                        CUmemAllocationHandleType type) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (handle == NULL || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int fd = (int)(intptr_t)os_handle;
  char link[64], target[128];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  struct stat st;
  if (n <= 0 || fstat(fd, &st) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  target[n] = '\0';
  if (strncmp(target, "/memfd:" PHYS_NAME " ", strlen("/memfd:" PHYS_NAME " ")) !=
      0) {
    return CUDA_ERROR_INVALID_VALUE;  // not memory a driver exported
  }
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = phys_add(dup, (uint64_t)st.st_size, true, handle);
  if (r != CUDA_SUCCESS) {
    close(dup);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Pinned host memory. Unified addressing: the device address of pinned host
// memory is its host address.
// ---------------------------------------------------------------------------

CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemHostAlloc");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (pp == NULL || size == 0 ||
      (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                           CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t rounded = (size + 4095) & ~(size_t)4095;
  void *p = mmap(NULL, rounded, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&g.lock);
  range_t *h = range_add_locked((uint64_t)(uintptr_t)p, rounded,
                                RANGE_HOST_ALLOC);
  if (h != NULL) {
    h->flags = flags;
  }
  pthread_mutex_unlock(&g.lock);
  if (h == NULL) {
    munmap(p, rounded);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  range_t *h = range_find_locked((uint64_t)(uintptr_t)p, RANGE_HOST_ALLOC);
  if (h == NULL || h->base != (uint64_t)(uintptr_t)p) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t size = h->size;
  range_remove_locked(h);
  pthread_mutex_unlock(&g.lock);
  munmap(p, size);
  return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p,
                                   unsigned int flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemHostGetDevicePointer");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (pdptr == NULL || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t a = (uint64_t)(uintptr_t)p;
  pthread_mutex_lock(&g.lock);
  range_t *h = range_find_locked(a, RANGE_HOST_ALLOC);
  if (h == NULL) {
    h = range_find_locked(a, RANGE_HOST_REGISTERED);
  }
  bool mapped = h != NULL && (h->flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0;
  pthread_mutex_unlock(&g.lock);
  if (!mapped) {
    return CUDA_ERROR_INVALID_VALUE;  // not pinned with DEVICEMAP
  }
  *pdptr = a;
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister(void *p, size_t size, unsigned int flags) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuMemHostRegister");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (p == NULL || size == 0 ||
      (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE |
                           CU_MEMHOSTREGISTER_DEVICEMAP)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t a = (uint64_t)(uintptr_t)p;
  pthread_mutex_lock(&g.lock);
  if (range_overlaps_locked(a, size, RANGE_HOST_REGISTERED) ||
      range_overlaps_locked(a, size, RANGE_HOST_ALLOC)) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  range_t *h = range_add_locked(a, size, RANGE_HOST_REGISTERED);
  if (h != NULL) {
    // DEVICEMAP is the same bit in both flag sets.
    h->flags = flags & CU_MEMHOSTREGISTER_DEVICEMAP ? CU_MEMHOSTALLOC_DEVICEMAP
                                                    : 0;
  }
  pthread_mutex_unlock(&g.lock);
  return h != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemHostUnregister(void *p) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  range_t *h = range_find_locked((uint64_t)(uintptr_t)p, RANGE_HOST_REGISTERED);
  if (h == NULL || h->base != (uint64_t)(uintptr_t)p) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  range_remove_locked(h);
  pthread_mutex_unlock(&g.lock);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Streams: a thread each, running its operations in order.
// ---------------------------------------------------------------------------

static void sleep_ns(long ns) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
  nanosleep(&ts, NULL);
}

static void graph_begin(stream_t *s, const op_t *op);
static void graph_end(const op_t *op);

// Runs |op|; a bad address or an injected fault poisons the context.
static CUresult run_op(stream_t *s, op_t *op) {
  switch (op->kind) {
    case OP_COPY: {
      pthread_mutex_lock(&g.lock);
      CUresult inject = g.inject;
      g.inject = CUDA_SUCCESS;
      bool ok = true;
      for (uint64_t z = 0; z < op->copy.depth && ok; ++z) {
        for (uint64_t y = 0; y < op->copy.height && ok; ++y) {
          ok = access_ok_locked(op->copy.src + z * op->copy.src_slice +
                                    y * op->copy.src_pitch,
                                op->copy.width, CU_MEM_ACCESS_FLAGS_PROT_READ,
                                true) &&
               access_ok_locked(op->copy.dst + z * op->copy.dst_slice +
                                    y * op->copy.dst_pitch,
                                op->copy.width,
                                CU_MEM_ACCESS_FLAGS_PROT_READWRITE, true);
        }
      }
      pthread_mutex_unlock(&g.lock);
      if (inject != CUDA_SUCCESS) {
        return inject;
      }
      if (!ok) {
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      }
      for (uint64_t z = 0; z < op->copy.depth; ++z) {
        for (uint64_t y = 0; y < op->copy.height; ++y) {
          memmove((void *)(uintptr_t)(op->copy.dst + z * op->copy.dst_slice +
                                      y * op->copy.dst_pitch),
                  (const void *)(uintptr_t)(op->copy.src +
                                            z * op->copy.src_slice +
                                            y * op->copy.src_pitch),
                  op->copy.width);
        }
      }
      return CUDA_SUCCESS;
    }
    case OP_FILL: {
      pthread_mutex_lock(&g.lock);
      CUresult inject = g.inject;
      g.inject = CUDA_SUCCESS;
      bool ok = true;
      for (uint64_t y = 0; y < op->fill.height && ok; ++y) {
        ok = access_ok_locked(op->fill.dst + y * op->fill.pitch,
                              op->fill.width * op->fill.elem,
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE, false);
      }
      pthread_mutex_unlock(&g.lock);
      if (inject != CUDA_SUCCESS) {
        return inject;
      }
      if (!ok) {
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      }
      for (uint64_t y = 0; y < op->fill.height; ++y) {
        uint8_t *row = (uint8_t *)(uintptr_t)(op->fill.dst + y * op->fill.pitch);
        for (uint64_t x = 0; x < op->fill.width; ++x) {
          memcpy(row + x * op->fill.elem, &op->fill.value, op->fill.elem);
        }
      }
      return CUDA_SUCCESS;
    }
    case OP_WAIT: {
      _Atomic uint64_t *w = (_Atomic uint64_t *)(uintptr_t)op->word.addr;
      long nap = 1000;
      // GEQ as the driver defines it: (int64_t)(*addr - value) >= 0. A GPU
      // polls in hardware: yield for a while (most waits end soon), then
      // sleep in growing naps.
      for (int polls = 0;
           (int64_t)(atomic_load_explicit(w, memory_order_acquire) -
                     op->word.value) < 0;
           ++polls) {
        if (atomic_load(&s->ctx->sticky) != 0) {
          return CUDA_SUCCESS;  // the context died: the stream stops
        }
        if (polls < 2000) {
          sched_yield();
          continue;
        }
        sleep_ns(nap);
        nap = nap < 200000 ? nap * 2 : nap;
      }
      return CUDA_SUCCESS;
    }
    case OP_WRITE:
      atomic_store_explicit((_Atomic uint64_t *)(uintptr_t)op->word.addr,
                            op->word.value, memory_order_release);
      return CUDA_SUCCESS;
    case OP_HOST:
      t_in_callback = true;
      op->host.fn(op->host.user_data);
      t_in_callback = false;
      return CUDA_SUCCESS;
    case OP_KERNEL:
      op->kernel.fn(op->kernel.params, op->kernel.grid, op->kernel.block);
      return CUDA_SUCCESS;
    case OP_GRAPH_BEGIN:
      graph_begin(s, op);
      return CUDA_SUCCESS;
    case OP_GRAPH_END:
      graph_end(op);
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static void *stream_main(void *arg) {
  stream_t *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->head == NULL && !s->destroyed) {
      pthread_cond_wait(&s->cond, &s->lock);
    }
    if (s->head == NULL) {
      break;  // destroyed and drained
    }
    op_t *op = s->head;
    pthread_mutex_unlock(&s->lock);
    // After a sticky error nothing more runs in the context.
    // A graph launch's end is bookkeeping: it runs in a dead context too.
    if (atomic_load(&s->ctx->sticky) == 0 || op->kind == OP_GRAPH_END) {
      CUresult r = run_op(s, op);
      if (r != CUDA_SUCCESS) {
        int zero = 0;
        atomic_compare_exchange_strong(&s->ctx->sticky, &zero, (int)r);
      }
    }
    pthread_mutex_lock(&s->lock);
    s->head = op->next;
    if (s->head == NULL) {
      s->tail = NULL;
    }
    s->pending--;
    if (op->kind == OP_KERNEL) {
      for (uint32_t i = 0; i < op->kernel.param_count; ++i) {
        free(op->kernel.params[i]);
      }
    }
    free(op);
    pthread_cond_broadcast(&s->cond);
  }
  pthread_mutex_unlock(&s->lock);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->lock);
  free(s);
  return NULL;
}

// The live stream |h| of the current context, or NULL.
static stream_t *stream_lookup(CUstream h, ctx_t *c) {
  pthread_mutex_lock(&g.lock);
  stream_t *found = NULL;
  for (stream_t *s = g.streams; s != NULL; s = s->next_live) {
    if ((CUstream)s == h) {
      found = s;
    }
  }
  pthread_mutex_unlock(&g.lock);
  return found != NULL && found->ctx == c ? found : NULL;
}

// Checks the context and the stream handle; the legacy default stream (0)
// is not used by accel and is refused.
static CUresult stream_enter(CUstream h, stream_t **out) {
  ctx_t *c = NULL;
  CUresult r = enter_ctx(&c);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  stream_t *s = stream_lookup(h, c);
  if (s == NULL) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *out = s;
  return CUDA_SUCCESS;
}

static CUresult stream_push(stream_t *s, op_t op) {
  op_t *o = malloc(sizeof(*o));
  if (o == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *o = op;
  o->next = NULL;
  pthread_mutex_lock(&s->lock);
  if (s->tail != NULL) {
    s->tail->next = o;
  } else {
    s->head = o;
  }
  s->tail = o;
  s->pending++;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags,
                                    int priority) {
  ctx_t *c = NULL;
  CUresult r = enter_ctx(&c);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuStreamCreateWithPriority");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (phStream == NULL ||
      (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  (void)priority;  // clamped to [greatest, least] by the driver
  stream_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->kind = KIND_STREAM;
  s->ctx = c;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
  if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_detach(s->thread);
  pthread_mutex_lock(&g.lock);
  s->next_live = g.streams;
  g.streams = s;
  pthread_mutex_unlock(&g.lock);
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream h) {
  stream_t *s = NULL;
  ctx_t *c = NULL;
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  c = t_current;
  if (c == NULL) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  // Destroying is allowed after a sticky error (it releases resources).
  s = stream_lookup(h, c);
  if (s == NULL) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  pthread_mutex_lock(&g.lock);
  for (stream_t **p = &g.streams; *p != NULL; p = &(*p)->next_live) {
    if (*p == s) {
      *p = s->next_live;
      break;
    }
  }
  pthread_mutex_unlock(&g.lock);
  // As the driver: returns at once; the stream finishes its work and its
  // resources are freed afterwards.
  pthread_mutex_lock(&s->lock);
  s->destroyed = true;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream h) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&s->lock);
  uint32_t pending = s->pending;
  pthread_mutex_unlock(&s->lock);
  int sticky = atomic_load(&s->ctx->sticky);
  if (sticky != 0) {
    return (CUresult)sticky;
  }
  return pending != 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream h) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&s->lock);
  while (s->pending != 0 && atomic_load(&s->ctx->sticky) == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&s->cond, &s->lock, &ts);
  }
  pthread_mutex_unlock(&s->lock);
  int sticky = atomic_load(&s->ctx->sticky);
  return sticky != 0 ? (CUresult)sticky : CUDA_SUCCESS;
}

// The 8-byte aligned word at |addr| that stream memory operations may use:
// pinned host memory mapped for the device, or device memory.
static CUresult check_word(CUdeviceptr addr) {
  if (g.mode_nomemops) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (addr % 8 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  range_t *h = range_find_locked(addr, RANGE_HOST_ALLOC);
  if (h == NULL) {
    h = range_find_locked(addr, RANGE_HOST_REGISTERED);
  }
  bool ok = (h != NULL && (h->flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0) ||
            range_find_locked(addr, RANGE_MAPPED) != NULL;
  pthread_mutex_unlock(&g.lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuStreamWaitValue64(CUstream h, CUdeviceptr addr, cuuint64_t value,
                             unsigned int flags) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r == CUDA_SUCCESS) {
    r = check_word(addr);
  }
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (flags != CU_STREAM_WAIT_VALUE_GEQ) {
    return CUDA_ERROR_INVALID_VALUE;  // the only mode accel relies on
  }
  return stream_push(s, (op_t){.kind = OP_WAIT, .word = {addr, value}});
}

CUresult cuStreamWriteValue64(CUstream h, CUdeviceptr addr, cuuint64_t value,
                              unsigned int flags) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r == CUDA_SUCCESS) {
    r = check_word(addr);
  }
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT &&
      flags != CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return stream_push(s, (op_t){.kind = OP_WRITE, .word = {addr, value}});
}

CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *user_data) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuLaunchHostFunc");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (fn == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return stream_push(s, (op_t){.kind = OP_HOST, .host = {fn, user_data}});
}

// ---------------------------------------------------------------------------
// Copies and fills. Unified addressing: an address is device memory when it
// lies in a reservation, pinned host memory when the double pinned it, and
// pageable host memory otherwise (copies only).
// ---------------------------------------------------------------------------

// The device (not pageable host) memory an operation must name at enqueue.
static bool known_locked(uint64_t addr) {
  return range_find_locked(addr, RANGE_RESERVED) != NULL ||
         range_find_locked(addr, RANGE_HOST_ALLOC) != NULL ||
         range_find_locked(addr, RANGE_HOST_REGISTERED) != NULL;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                       CUstream h) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (dst == 0 || src == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Overlapping ranges are undefined for cuMemcpy: refuse them.
  if (n != 0 && dst < src + n && src < dst + n) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return stream_push(s, (op_t){.kind = OP_COPY,
                               .copy = {.dst = dst, .src = src, .width = n,
                                        .height = 1, .depth = 1}});
}

static uint64_t side(CUmemorytype type, const void *host, CUdeviceptr dev) {
  return type == CU_MEMORYTYPE_HOST ? (uint64_t)(uintptr_t)host : dev;
}

static bool valid_type(CUmemorytype type) {
  return type == CU_MEMORYTYPE_HOST || type == CU_MEMORYTYPE_DEVICE ||
         type == CU_MEMORYTYPE_UNIFIED;  // arrays: not used by accel
}

CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D *p, CUstream h) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (p == NULL || !valid_type(p->srcMemoryType) ||
      !valid_type(p->dstMemoryType) || p->srcPitch < p->WidthInBytes ||
      p->dstPitch < p->WidthInBytes || p->srcXInBytes != 0 || p->srcY != 0 ||
      p->dstXInBytes != 0 || p->dstY != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return stream_push(
      s, (op_t){.kind = OP_COPY,
                .copy = {.dst = side(p->dstMemoryType, p->dstHost,
                                     p->dstDevice),
                         .src = side(p->srcMemoryType, p->srcHost,
                                     p->srcDevice),
                         .width = p->WidthInBytes, .height = p->Height,
                         .depth = 1, .dst_pitch = p->dstPitch,
                         .src_pitch = p->srcPitch}});
}

CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D *p, CUstream h) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (p == NULL || !valid_type(p->srcMemoryType) ||
      !valid_type(p->dstMemoryType) || p->srcPitch < p->WidthInBytes ||
      p->dstPitch < p->WidthInBytes || p->reserved0 != NULL ||
      p->reserved1 != NULL || p->srcLOD != 0 || p->dstLOD != 0 ||
      p->srcHeight < p->Height || p->dstHeight < p->Height ||
      p->srcXInBytes != 0 || p->srcY != 0 || p->srcZ != 0 ||
      p->dstXInBytes != 0 || p->dstY != 0 || p->dstZ != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return stream_push(
      s, (op_t){.kind = OP_COPY,
                .copy = {.dst = side(p->dstMemoryType, p->dstHost,
                                     p->dstDevice),
                         .src = side(p->srcMemoryType, p->srcHost,
                                     p->srcDevice),
                         .width = p->WidthInBytes, .height = p->Height,
                         .depth = p->Depth, .dst_pitch = p->dstPitch,
                         .src_pitch = p->srcPitch,
                         .dst_slice = p->dstPitch * p->dstHeight,
                         .src_slice = p->srcPitch * p->srcHeight}});
}

static CUresult fill(CUstream h, CUdeviceptr dst, size_t pitch, uint64_t value,
                     uint32_t elem, size_t width, size_t height) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  // Fills need device-known memory aligned to the element size.
  pthread_mutex_lock(&g.lock);
  bool known = known_locked(dst);
  pthread_mutex_unlock(&g.lock);
  if (!known || dst % elem != 0 || pitch < width * elem ||
      (height > 1 && pitch % elem != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return stream_push(s, (op_t){.kind = OP_FILL,
                               .fill = {.dst = dst, .pitch = pitch,
                                        .width = width, .height = height,
                                        .value = value, .elem = elem}});
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n,
                         CUstream h) {
  return fill(h, dst, n, uc, 1, n, 1);
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short us, size_t n,
                          CUstream h) {
  return fill(h, dst, n * 2, us, 2, n, 1);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n,
                          CUstream h) {
  return fill(h, dst, n * 4, ui, 4, n, 1);
}

CUresult cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int ui,
                            size_t width, size_t height, CUstream h) {
  return fill(h, dst, pitch, ui, 4, width, height);
}

// ---------------------------------------------------------------------------
// Code objects: PTX parsed for its entries, kernels run as registered host
// functions.
// ---------------------------------------------------------------------------

// Writes |text| into the JIT error log the caller passed, if any.
static void jit_log(CUjit_option *options, void **values, unsigned count,
                    const char *text) {
  char *buf = NULL;
  size_t size = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) {
      buf = values[i];
    } else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      size = (size_t)(uintptr_t)values[i];
    }
  }
  if (buf != NULL && size > 0) {
    snprintf(buf, size, "%s", text);
  }
}

// Parses the .entry names of |ptx| and counts their .param declarations.
static bool parse_ptx(const char *ptx, library_t *lib, char *why,
                      size_t why_size) {
  if (strstr(ptx, ".version") == NULL || strstr(ptx, ".target") == NULL) {
    snprintf(why, why_size,
             "ptxas fatal   : PTX lacks a .version or .target directive");
    return false;
  }
  for (const char *p = strstr(ptx, ".entry"); p != NULL;
       p = strstr(p + 6, ".entry")) {
    if (lib->entry_count == 64) {
      snprintf(why, why_size, "ptxas fatal   : too many entries");
      return false;
    }
    const char *n = p + 6;
    while (*n == ' ' || *n == '\t') {
      n++;
    }
    size_t len = strcspn(n, " \t(\n");
    if (len == 0 || len >= sizeof(lib->entries[0].name)) {
      snprintf(why, why_size, "ptxas fatal   : malformed .entry");
      return false;
    }
    memcpy(lib->entries[lib->entry_count].name, n, len);
    lib->entries[lib->entry_count].name[len] = '\0';
    const char *open = strchr(n, '(');
    const char *close = open != NULL ? strchr(open, ')') : NULL;
    uint32_t params = 0;
    for (const char *q = open; q != NULL && q < close;
         q = strstr(q + 1, ".param")) {
      if (q != open && q < close) {
        params++;
      }
    }
    lib->entries[lib->entry_count].param_count = params;
    lib->entry_count++;
  }
  return true;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
                           CUjit_option *jit_options, void **jit_values,
                           unsigned int jit_count,
                           CUlibraryOption *library_options,
                           void **library_values, unsigned int library_count) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuLibraryLoadData");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (library == NULL || code == NULL ||
      (jit_count > 0 && (jit_options == NULL || jit_values == NULL)) ||
      library_count != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (memcmp(code, "\177ELF", 4) == 0) {
    jit_log(jit_options, jit_values, jit_count,
            "test double: cubin images are not emulated");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  library_t *lib = calloc(1, sizeof(*lib));
  if (lib == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  char why[256];
  if (!parse_ptx(code, lib, why, sizeof(why))) {
    free(lib);
    jit_log(jit_options, jit_values, jit_count, why);
    return CUDA_ERROR_INVALID_PTX;
  }
  lib->kind = KIND_LIBRARY;
  pthread_mutex_lock(&g.lock);
  lib->next = g.libraries;
  g.libraries = lib;
  pthread_mutex_unlock(&g.lock);
  *library = (CUlibrary)lib;
  return CUDA_SUCCESS;
}

static library_t *library_lookup_locked(CUlibrary h) {
  for (library_t *l = g.libraries; l != NULL; l = l->next) {
    if ((CUlibrary)l == h) {
      return l;
    }
  }
  return NULL;
}

CUresult cuLibraryUnload(CUlibrary h) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  library_t *lib = library_lookup_locked(h);
  if (lib == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (library_t **p = &g.libraries; *p != NULL; p = &(*p)->next) {
    if (*p == lib) {
      *p = lib->next;
      break;
    }
  }
  for (kernel_t **p = &g.kernels; *p != NULL;) {
    if ((*p)->library == lib) {
      kernel_t *dead = *p;
      *p = dead->next;
      free(dead);
    } else {
      p = &(*p)->next;
    }
  }
  pthread_mutex_unlock(&g.lock);
  free(lib);
  return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *out, CUlibrary h, const char *name) {
  CUresult r = enter();
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (out == NULL || name == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  library_t *lib = library_lookup_locked(h);
  if (lib == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (uint32_t i = 0; i < lib->entry_count; ++i) {
    if (strcmp(lib->entries[i].name, name) == 0) {
      kernel_t *k = calloc(1, sizeof(*k));
      if (k == NULL) {
        pthread_mutex_unlock(&g.lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      k->kind = KIND_KERNEL;
      k->library = lib;
      k->entry = i;
      k->next = g.kernels;
      g.kernels = k;
      pthread_mutex_unlock(&g.lock);
      *out = (CUkernel)k;
      return CUDA_SUCCESS;
    }
  }
  pthread_mutex_unlock(&g.lock);
  return CUDA_ERROR_NOT_FOUND;
}

static kernel_t *kernel_lookup_locked(const void *h) {
  for (kernel_t *k = g.kernels; k != NULL; k = k->next) {
    if ((const void *)k == h) {
      return k;
    }
  }
  return NULL;
}

// A CUfunction in the double is its kernel (one context per device).
CUresult cuKernelGetFunction(CUfunction *out, CUkernel h) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (out == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  kernel_t *k = kernel_lookup_locked(h);
  pthread_mutex_unlock(&g.lock);
  if (k == NULL) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *out = (CUfunction)k;
  return CUDA_SUCCESS;
}

static void op_free(op_t *op) {
  if (op->kind == OP_KERNEL) {
    for (uint32_t i = 0; i < op->kernel.param_count; ++i) {
      free(op->kernel.params[i]);
    }
  }
}

// A launch's operation (cuLaunchKernel's and a kernel node's), checked as
// the driver checks it: the PTX declares the parameters and a registered
// host stand-in must match them; parameter values are copied, as the driver
// does.
static CUresult kernel_op(const CUDA_KERNEL_NODE_PARAMS *p, op_t *op) {
  if (p == NULL || p->func == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (p->gridDimX == 0 || p->gridDimY == 0 || p->gridDimZ == 0 ||
      p->blockDimX == 0 || p->blockDimY == 0 || p->blockDimZ == 0 ||
      (uint64_t)p->blockDimX * p->blockDimY * p->blockDimZ > 1024 ||
      p->sharedMemBytes > 48 * 1024 || p->extra != NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  kernel_t *k = kernel_lookup_locked(p->func);
  if (k == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const char *name = k->library->entries[k->entry].name;
  uint32_t declared = k->library->entries[k->entry].param_count;
  registered_kernel_t *reg = g.registered;
  while (reg != NULL && strcmp(reg->name, name) != 0) {
    reg = reg->next;
  }
  pthread_mutex_unlock(&g.lock);
  if (reg == NULL || reg->param_count != declared ||
      (declared > 0 && p->kernelParams == NULL)) {
    return reg == NULL ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
  }
  *op = (op_t){.kind = OP_KERNEL,
               .kernel = {.fn = reg->fn,
                          .grid = {p->gridDimX, p->gridDimY, p->gridDimZ},
                          .block = {p->blockDimX, p->blockDimY, p->blockDimZ},
                          .param_count = declared}};
  for (uint32_t i = 0; i < declared; ++i) {
    op->kernel.params[i] = malloc(reg->param_sizes[i] ? reg->param_sizes[i] : 1);
    if (op->kernel.params[i] == NULL) {
      op->kernel.param_count = i;
      op_free(op);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(op->kernel.params[i], p->kernelParams[i], reg->param_sizes[i]);
  }
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz,
                        unsigned shared_bytes, CUstream h, void **params,
                        void **extra) {
  stream_t *s = NULL;
  CUresult r = stream_enter(h, &s);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  CUDA_KERNEL_NODE_PARAMS p = {.func = f, .gridDimX = gx, .gridDimY = gy,
                               .gridDimZ = gz, .blockDimX = bx,
                               .blockDimY = by, .blockDimZ = bz,
                               .sharedMemBytes = shared_bytes,
                               .kernelParams = params, .extra = extra};
  op_t op;
  r = kernel_op(&p, &op);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = stream_push(s, op);
  if (r != CUDA_SUCCESS) {
    op_free(&op);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Graphs. A graph is a list of nodes, each an operation (or, for a batch
// mem-op node, up to MAX_NODE_OPS) that a stream would run, with its
// dependencies (nodes of the same graph, so creation order is a topological
// order). Instantiation copies the nodes into an executable graph; its node
// updates (cuGraphExec*SetParams) change only that copy, within the limits
// the driver documents (1D memsets and memcpys, the same count and kinds of
// batch mem-ops, the same kernel). A launch pushes the nodes onto the stream
// in a random order that respects the dependencies (a missing dependency
// shows up as a wrong result), after a first operation that waits for the
// exec's previous launch to end: an executable graph does not run
// concurrently with itself.
// ---------------------------------------------------------------------------

enum { KIND_GRAPH = 0x47525031, KIND_NODE = 0x4e4f4431, KIND_EXEC = 0x45584531 };
enum { NODE_HOST = 1, NODE_MEMSET, NODE_MEMCPY, NODE_MEMOP, NODE_KERNEL };

#define MAX_NODE_OPS 4

typedef struct gnode {
  uint32_t kind;
  struct graph *graph;
  uint32_t index;  // in the graph
  int type;        // NODE_*
  uint32_t op_count;
  op_t ops[MAX_NODE_OPS];
  uint32_t dep_count;
  uint32_t *deps;  // indexes of earlier nodes
} gnode_t;

typedef struct graph {
  uint32_t kind;
  struct graph *next_live;
  ctx_t *ctx;
  gnode_t **nodes;
  uint32_t count, cap;
} graph_t;

typedef struct gexec {
  uint32_t kind;
  struct gexec *next_live;
  ctx_t *ctx;
  graph_t *graph;  // the source (NULL once destroyed): node handles
  uint32_t count;
  gnode_t *nodes;  // copies, by index
  uint64_t launched;  // g.lock
  uint64_t ended;     // g.lock
  uint32_t refs;      // g.lock: 1 while alive + 1 per launch not ended
  uint32_t seed;      // g.lock: the launch order's
} gexec_t;

static graph_t *g_graphs;
static gexec_t *g_execs;
static pthread_cond_t g_graph_cond = PTHREAD_COND_INITIALIZER;

// A copy of |op| with its own kernel parameter copies.
static CUresult op_copy(op_t *dst, const op_t *src) {
  *dst = *src;
  if (src->kind != OP_KERNEL) {
    return CUDA_SUCCESS;
  }
  for (uint32_t i = 0; i < src->kernel.param_count; ++i) {
    dst->kernel.params[i] = NULL;
  }
  pthread_mutex_lock(&g.lock);
  registered_kernel_t *reg = g.registered;
  while (reg != NULL && reg->fn != src->kernel.fn) {
    reg = reg->next;
  }
  pthread_mutex_unlock(&g.lock);
  for (uint32_t i = 0; i < src->kernel.param_count; ++i) {
    size_t size = reg != NULL ? reg->param_sizes[i] : 0;
    dst->kernel.params[i] = malloc(size ? size : 1);
    if (dst->kernel.params[i] == NULL) {
      op_free(dst);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(dst->kernel.params[i], src->kernel.params[i], size);
  }
  return CUDA_SUCCESS;
}

static void gexec_unref_locked(gexec_t *e) {
  if (--e->refs != 0) {
    return;
  }
  for (uint32_t i = 0; i < e->count; ++i) {
    for (uint32_t k = 0; k < e->nodes[i].op_count; ++k) {
      op_free(&e->nodes[i].ops[k]);
    }
    free(e->nodes[i].deps);
  }
  free(e->nodes);
  free(e);
}

static void graph_begin(stream_t *s, const op_t *op) {
  gexec_t *e = op->graph.exec;
  pthread_mutex_lock(&g.lock);
  while (e->ended + 1 < op->graph.number && atomic_load(&s->ctx->sticky) == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&g_graph_cond, &g.lock, &ts);
  }
  pthread_mutex_unlock(&g.lock);
}

static void graph_end(const op_t *op) {
  gexec_t *e = op->graph.exec;
  pthread_mutex_lock(&g.lock);
  if (op->graph.number > e->ended) {
    e->ended = op->graph.number;
  }
  pthread_cond_broadcast(&g_graph_cond);
  gexec_unref_locked(e);
  pthread_mutex_unlock(&g.lock);
}

static graph_t *graph_lookup_locked(CUgraph h) {
  for (graph_t *gr = g_graphs; gr != NULL; gr = gr->next_live) {
    if ((CUgraph)gr == h) {
      return gr;
    }
  }
  return NULL;
}

static gexec_t *exec_lookup_locked(CUgraphExec h) {
  for (gexec_t *e = g_execs; e != NULL; e = e->next_live) {
    if ((CUgraphExec)e == h) {
      return e;
    }
  }
  return NULL;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  ctx_t *c = NULL;
  CUresult r = enter_ctx(&c);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  r = injected("cuGraphCreate");
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (phGraph == NULL || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  graph_t *gr = calloc(1, sizeof(*gr));
  if (gr == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  gr->kind = KIND_GRAPH;
  gr->ctx = c;
  pthread_mutex_lock(&g.lock);
  gr->next_live = g_graphs;
  g_graphs = gr;
  pthread_mutex_unlock(&g.lock);
  *phGraph = (CUgraph)gr;
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  CUresult r = enter();  // allowed after a sticky error: it frees
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  graph_t *gr = graph_lookup_locked(hGraph);
  if (gr == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (graph_t **p = &g_graphs; *p != NULL; p = &(*p)->next_live) {
    if (*p == gr) {
      *p = gr->next_live;
      break;
    }
  }
  // Executable graphs live on; their node handles die with the graph.
  for (gexec_t *e = g_execs; e != NULL; e = e->next_live) {
    if (e->graph == gr) {
      e->graph = NULL;
    }
  }
  pthread_mutex_unlock(&g.lock);
  for (uint32_t i = 0; i < gr->count; ++i) {
    for (uint32_t k = 0; k < gr->nodes[i]->op_count; ++k) {
      op_free(&gr->nodes[i]->ops[k]);
    }
    free(gr->nodes[i]->deps);
    free(gr->nodes[i]);
  }
  free(gr->nodes);
  free(gr);
  return CUDA_SUCCESS;
}

// Adds a node of |type| with |ops| (owned from here, also on failure) after
// |deps| to |hGraph|.
static CUresult node_add(CUgraphNode *out, CUgraph hGraph,
                         const CUgraphNode *deps, size_t dep_count, int type,
                         op_t *ops, uint32_t op_count) {
  ctx_t *c = NULL;
  CUresult r = enter_ctx(&c);
  if (r == CUDA_SUCCESS) {
    r = injected("cuGraphAddNode");
  }
  if (r == CUDA_SUCCESS && (out == NULL || (dep_count > 0 && deps == NULL))) {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  gnode_t *n = NULL;
  if (r == CUDA_SUCCESS) {
    n = calloc(1, sizeof(*n));
    if (n != NULL && dep_count > 0) {
      n->deps = calloc(dep_count, sizeof(uint32_t));
    }
    if (n == NULL || (dep_count > 0 && n->deps == NULL)) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (r != CUDA_SUCCESS) {
    if (n != NULL) {
      free(n->deps);
      free(n);
    }
    for (uint32_t k = 0; k < op_count; ++k) {
      op_free(&ops[k]);
    }
    return r;
  }
  pthread_mutex_lock(&g.lock);
  graph_t *gr = graph_lookup_locked(hGraph);
  if (gr == NULL || gr->ctx != c) {
    r = CUDA_ERROR_INVALID_HANDLE;
  }
  // Each dependency: a node of this graph, named once.
  for (size_t i = 0; r == CUDA_SUCCESS && i < dep_count; ++i) {
    const gnode_t *d = (const gnode_t *)deps[i];
    bool found = false;
    for (uint32_t k = 0; k < gr->count && !found; ++k) {
      found = gr->nodes[k] == d;
    }
    for (size_t j = 0; found && j < i; ++j) {
      found = deps[j] != deps[i];
    }
    if (!found) {
      r = CUDA_ERROR_INVALID_VALUE;
    } else {
      n->deps[i] = d->index;
    }
  }
  if (r == CUDA_SUCCESS && gr->count == gr->cap) {
    uint32_t cap = gr->cap ? gr->cap * 2 : 16;
    gnode_t **grown = realloc(gr->nodes, cap * sizeof(*grown));
    if (grown == NULL) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      gr->nodes = grown;
      gr->cap = cap;
    }
  }
  if (r != CUDA_SUCCESS) {
    pthread_mutex_unlock(&g.lock);
    free(n->deps);
    free(n);
    for (uint32_t k = 0; k < op_count; ++k) {
      op_free(&ops[k]);
    }
    return r;
  }
  n->kind = KIND_NODE;
  n->graph = gr;
  n->index = gr->count;
  n->type = type;
  n->op_count = op_count;
  memcpy(n->ops, ops, op_count * sizeof(op_t));
  n->dep_count = (uint32_t)dep_count;
  gr->nodes[gr->count++] = n;
  pthread_mutex_unlock(&g.lock);
  *out = (CUgraphNode)n;
  return CUDA_SUCCESS;
}

static CUresult host_op(const CUDA_HOST_NODE_PARAMS *p, op_t *op) {
  if (p == NULL || p->fn == NULL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *op = (op_t){.kind = OP_HOST, .host = {p->fn, p->userData}};
  return CUDA_SUCCESS;
}

// A memset node's operation, checked as cuMemsetD*Async checks its
// arguments, in the current context.
static CUresult memset_op(const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx,
                          op_t *op) {
  if (p == NULL || (ctx != NULL && (ctx_t *)ctx != t_current)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint32_t elem = p->elementSize;
  if ((elem != 1 && elem != 2 && elem != 4) || p->width == 0 ||
      p->height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g.lock);
  bool known = known_locked(p->dst);
  pthread_mutex_unlock(&g.lock);
  if (!known || p->dst % elem != 0 || p->pitch < p->width * elem ||
      (p->height > 1 && p->pitch % elem != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *op = (op_t){.kind = OP_FILL,
               .fill = {.dst = p->dst, .pitch = p->pitch, .width = p->width,
                        .height = p->height, .value = p->value,
                        .elem = elem}};
  return CUDA_SUCCESS;
}

// A memcpy node's operation, checked as cuMemcpy3DAsync checks its
// arguments; device sides must be device memory the driver knows, and a 1D
// copy must not overlap itself.
static CUresult memcpy_op(const CUDA_MEMCPY3D *p, CUcontext ctx, op_t *op) {
  if (p == NULL || (ctx != NULL && (ctx_t *)ctx != t_current) ||
      !valid_type(p->srcMemoryType) || !valid_type(p->dstMemoryType) ||
      p->WidthInBytes == 0 || p->Height == 0 || p->Depth == 0 ||
      p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes ||
      p->reserved0 != NULL || p->reserved1 != NULL || p->srcLOD != 0 ||
      p->dstLOD != 0 || p->srcXInBytes != 0 || p->srcY != 0 ||
      p->srcZ != 0 || p->dstXInBytes != 0 || p->dstY != 0 || p->dstZ != 0 ||
      (p->Depth > 1 &&
       (p->srcHeight < p->Height || p->dstHeight < p->Height))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t dst = side(p->dstMemoryType, p->dstHost, p->dstDevice);
  uint64_t src = side(p->srcMemoryType, p->srcHost, p->srcDevice);
  pthread_mutex_lock(&g.lock);
  bool known = (p->dstMemoryType != CU_MEMORYTYPE_DEVICE ||
                known_locked(dst)) &&
               (p->srcMemoryType != CU_MEMORYTYPE_DEVICE || known_locked(src));
  pthread_mutex_unlock(&g.lock);
  uint64_t n = p->WidthInBytes;
  if (dst == 0 || src == 0 || !known ||
      (p->Height == 1 && p->Depth == 1 && dst < src + n && src < dst + n)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *op = (op_t){.kind = OP_COPY,
               .copy = {.dst = dst, .src = src, .width = n,
                        .height = p->Height, .depth = p->Depth,
                        .dst_pitch = p->dstPitch, .src_pitch = p->srcPitch,
                        .dst_slice = p->dstPitch * p->dstHeight,
                        .src_slice = p->srcPitch * p->srcHeight}};
  return CUDA_SUCCESS;
}

// A batch mem-op node's operations: 64-bit waits (GEQ) and writes on words
// that stream memory operations may use.
static CUresult memop_ops(const CUDA_BATCH_MEM_OP_NODE_PARAMS *p, op_t *ops,
                          uint32_t *count) {
  if (p == NULL || p->count == 0 || p->count > MAX_NODE_OPS ||
      p->paramArray == NULL || p->flags != 0 ||
      (ctx_t *)p->ctx != t_current) {
    return p != NULL && p->count > MAX_NODE_OPS ? CUDA_ERROR_NOT_SUPPORTED
                                                : CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < p->count; ++i) {
    const CUstreamBatchMemOpParams *o = &p->paramArray[i];
    if (o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
      CUresult r = check_word(o->waitValue.address);
      if (r != CUDA_SUCCESS) {
        return r;
      }
      if (o->waitValue.flags != CU_STREAM_WAIT_VALUE_GEQ) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      ops[i] = (op_t){.kind = OP_WAIT,
                      .word = {o->waitValue.address, o->waitValue.value64}};
    } else if (o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64) {
      CUresult r = check_word(o->writeValue.address);
      if (r != CUDA_SUCCESS) {
        return r;
      }
      if (o->writeValue.flags != CU_STREAM_WRITE_VALUE_DEFAULT &&
          o->writeValue.flags != CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      ops[i] = (op_t){.kind = OP_WRITE,
                      .word = {o->writeValue.address, o->writeValue.value64}};
    } else {
      return CUDA_ERROR_INVALID_VALUE;  // the only kinds accel relies on
    }
  }
  *count = p->count;
  return CUDA_SUCCESS;
}

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                            const CUgraphNode *dependencies,
                            size_t numDependencies,
                            const CUDA_HOST_NODE_PARAMS *nodeParams) {
  op_t op;
  CUresult r = enter_ctx(NULL);
  if (r == CUDA_SUCCESS) {
    r = host_op(nodeParams, &op);
  }
  return r != CUDA_SUCCESS ? r
                           : node_add(phGraphNode, hGraph, dependencies,
                                      numDependencies, NODE_HOST, &op, 1);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies,
                              size_t numDependencies,
                              const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                              CUcontext ctx) {
  op_t op;
  CUresult r = enter_ctx(NULL);
  if (r == CUDA_SUCCESS) {
    r = memset_op(memsetParams, ctx, &op);
  }
  return r != CUDA_SUCCESS ? r
                           : node_add(phGraphNode, hGraph, dependencies,
                                      numDependencies, NODE_MEMSET, &op, 1);
}

CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies,
                              size_t numDependencies,
                              const CUDA_MEMCPY3D *copyParams, CUcontext ctx) {
  op_t op;
  CUresult r = enter_ctx(NULL);
  if (r == CUDA_SUCCESS) {
    r = memcpy_op(copyParams, ctx, &op);
  }
  return r != CUDA_SUCCESS ? r
                           : node_add(phGraphNode, hGraph, dependencies,
                                      numDependencies, NODE_MEMCPY, &op, 1);
}

CUresult cuGraphAddBatchMemOpNode(
    CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
    size_t numDependencies, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams) {
  op_t ops[MAX_NODE_OPS];
  uint32_t count = 0;
  CUresult r = enter_ctx(NULL);
  if (r == CUDA_SUCCESS) {
    r = memop_ops(nodeParams, ops, &count);
  }
  return r != CUDA_SUCCESS ? r
                           : node_add(phGraphNode, hGraph, dependencies,
                                      numDependencies, NODE_MEMOP, ops, count);
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies,
                              size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  op_t op;
  CUresult r = enter_ctx(NULL);
  if (r == CUDA_SUCCESS) {
    r = kernel_op(nodeParams, &op);
  }
  return r != CUDA_SUCCESS ? r
                           : node_add(phGraphNode, hGraph, dependencies,
                                      numDependencies, NODE_KERNEL, &op, 1);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags) {
  ctx_t *c = NULL;
  CUresult r = enter_ctx(&c);
  if (r == CUDA_SUCCESS) {
    r = injected("cuGraphInstantiateWithFlags");
  }
  if (r != CUDA_SUCCESS) {
    return r;
  }
  if (phGraphExec == NULL || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;  // accel asks for no instantiate flags
  }
  gexec_t *e = calloc(1, sizeof(*e));
  if (e == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&g.lock);
  graph_t *gr = graph_lookup_locked(hGraph);
  if (gr == NULL || gr->ctx != c) {
    pthread_mutex_unlock(&g.lock);
    free(e);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  uint32_t count = gr->count;
  e->nodes = calloc(count ? count : 1, sizeof(gnode_t));
  bool ok = e->nodes != NULL;
  for (uint32_t i = 0; ok && i < count; ++i) {
    gnode_t *n = &e->nodes[i];
    *n = *gr->nodes[i];
    n->op_count = 0;
    n->deps = calloc(n->dep_count ? n->dep_count : 1, sizeof(uint32_t));
    ok = n->deps != NULL;
    if (ok && n->dep_count > 0) {
      memcpy(n->deps, gr->nodes[i]->deps, n->dep_count * sizeof(uint32_t));
    }
    e->count = i + 1;
    pthread_mutex_unlock(&g.lock);  // op_copy takes the lock
    for (uint32_t k = 0; ok && k < gr->nodes[i]->op_count; ++k) {
      ok = op_copy(&n->ops[k], &gr->nodes[i]->ops[k]) == CUDA_SUCCESS;
      n->op_count = ok ? k + 1 : k;
    }
    pthread_mutex_lock(&g.lock);
  }
  e->kind = KIND_EXEC;
  e->ctx = c;
  e->graph = gr;
  e->refs = 1;
  e->seed = 0x9e3779b9u ^ (uint32_t)(uintptr_t)e;
  if (!ok) {
    gexec_unref_locked(e);
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  e->next_live = g_execs;
  g_execs = e;
  pthread_mutex_unlock(&g.lock);
  *phGraphExec = (CUgraphExec)e;
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  CUresult r = enter();  // allowed after a sticky error: it frees
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  gexec_t *e = exec_lookup_locked(hGraphExec);
  if (e == NULL) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (gexec_t **p = &g_execs; *p != NULL; p = &(*p)->next_live) {
    if (*p == e) {
      *p = e->next_live;
      break;
    }
  }
  // As the driver: an exec in flight is freed once its launches ended.
  gexec_unref_locked(e);
  pthread_mutex_unlock(&g.lock);
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  stream_t *s = NULL;
  CUresult r = stream_enter(hStream, &s);
  if (r == CUDA_SUCCESS) {
    r = injected("cuGraphLaunch");
  }
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  gexec_t *e = exec_lookup_locked(hGraphExec);
  if (e == NULL || e->ctx != s->ctx) {
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  uint32_t n = e->count;
  uint32_t seed = e->seed++;
  pthread_mutex_unlock(&g.lock);
  // The nodes in a random order that respects the dependencies.
  uint32_t *order = malloc((n ? n : 1) * sizeof(uint32_t));
  uint32_t *waiting = calloc(n ? n : 1, sizeof(uint32_t));
  bool *done = calloc(n ? n : 1, sizeof(bool));
  op_t *ops = calloc(2 + (size_t)n * MAX_NODE_OPS, sizeof(op_t));
  if (order == NULL || waiting == NULL || done == NULL || ops == NULL) {
    free(order);
    free(waiting);
    free(done);
    free(ops);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (uint32_t placed = 0; placed < n; ++placed) {
    uint32_t ready = 0;
    for (uint32_t i = 0; i < n; ++i) {
      bool ok = !done[i];
      for (uint32_t k = 0; ok && k < e->nodes[i].dep_count; ++k) {
        ok = done[e->nodes[i].deps[k]];
      }
      if (ok) {
        waiting[ready++] = i;
      }
    }
    uint32_t pick = waiting[rand_r(&seed) % ready];
    order[placed] = pick;
    done[pick] = true;
  }
  pthread_mutex_lock(&g.lock);
  uint64_t number = ++e->launched;
  e->refs++;  // dropped by the launch's end
  pthread_mutex_unlock(&g.lock);
  uint32_t count = 0;
  ops[count++] = (op_t){.kind = OP_GRAPH_BEGIN, .graph = {e, number}};
  bool ok = true;
  for (uint32_t i = 0; i < n && ok; ++i) {
    const gnode_t *node = &e->nodes[order[i]];
    for (uint32_t k = 0; k < node->op_count && ok; ++k) {
      ok = op_copy(&ops[count], &node->ops[k]) == CUDA_SUCCESS;
      count += ok;
    }
  }
  ops[count++] = (op_t){.kind = OP_GRAPH_END, .graph = {e, number}};
  free(order);
  free(waiting);
  free(done);
  if (!ok) {
    for (uint32_t i = 0; i < count; ++i) {
      op_free(&ops[i]);
    }
    free(ops);
    pthread_mutex_lock(&g.lock);
    e->ended = number;  // never launched: the next launch need not wait
    gexec_unref_locked(e);
    pthread_mutex_unlock(&g.lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // One push of the whole launch: nothing else on the stream interleaves.
  op_t *head = NULL, *tail = NULL;
  for (uint32_t i = 0; i < count; ++i) {
    op_t *o = malloc(sizeof(*o));
    if (o == NULL) {
      // Out of memory while linking: run what is linked, the rest not.
      op_free(&ops[i]);
      continue;
    }
    *o = ops[i];
    o->next = NULL;
    if (tail != NULL) {
      tail->next = o;
    } else {
      head = o;
    }
    tail = o;
  }
  free(ops);
  pthread_mutex_lock(&s->lock);
  if (s->tail != NULL) {
    s->tail->next = head;
  } else {
    s->head = head;
  }
  s->tail = tail;
  for (op_t *o = head; o != NULL; o = o->next) {
    s->pending++;
  }
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return CUDA_SUCCESS;
}

// The copy in |hGraphExec| of node |hNode| of its source graph, of |type|.
static CUresult exec_node(CUgraphExec hGraphExec, CUgraphNode hNode, int type,
                          gnode_t **out) {
  CUresult r = enter_ctx(NULL);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  pthread_mutex_lock(&g.lock);
  gexec_t *e = exec_lookup_locked(hGraphExec);
  const gnode_t *n = (const gnode_t *)hNode;
  bool found = false;
  for (uint32_t k = 0; e != NULL && e->graph != NULL && !found &&
                       k < e->graph->count;
       ++k) {
    found = e->graph->nodes[k] == n;
  }
  pthread_mutex_unlock(&g.lock);
  if (e == NULL || !found || e->ctx != t_current) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (e->nodes[n->index].type != type) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = &e->nodes[n->index];
  return CUDA_SUCCESS;
}

// Replaces |node|'s operations (executable graphs are updated by the thread
// that owns them; a launch copies them under no lock, as the driver
// requires updates not to race launches of the same exec).
static void node_set(gnode_t *node, const op_t *ops, uint32_t count) {
  for (uint32_t k = 0; k < node->op_count; ++k) {
    op_free(&node->ops[k]);
  }
  memcpy(node->ops, ops, count * sizeof(op_t));
  node->op_count = count;
}

CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec,
                                      CUgraphNode hNode,
                                      const CUDA_HOST_NODE_PARAMS *nodeParams) {
  gnode_t *node = NULL;
  op_t op;
  CUresult r = exec_node(hGraphExec, hNode, NODE_HOST, &node);
  if (r == CUDA_SUCCESS) {
    r = host_op(nodeParams, &op);
  }
  if (r == CUDA_SUCCESS) {
    node_set(node, &op, 1);
  }
  return r;
}

CUresult cuGraphExecMemsetNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode,
    const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx) {
  gnode_t *node = NULL;
  op_t op;
  CUresult r = exec_node(hGraphExec, hNode, NODE_MEMSET, &node);
  if (r == CUDA_SUCCESS) {
    r = memset_op(memsetParams, ctx, &op);
  }
  // Both the node as instantiated and its update must be 1D.
  if (r == CUDA_SUCCESS &&
      (node->ops[0].fill.height != 1 || op.fill.height != 1)) {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r == CUDA_SUCCESS) {
    node_set(node, &op, 1);
  }
  return r;
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec,
                                        CUgraphNode hNode,
                                        const CUDA_MEMCPY3D *copyParams,
                                        CUcontext ctx) {
  gnode_t *node = NULL;
  op_t op;
  CUresult r = exec_node(hGraphExec, hNode, NODE_MEMCPY, &node);
  if (r == CUDA_SUCCESS) {
    r = memcpy_op(copyParams, ctx, &op);
  }
  // Both the node as instantiated and its update must be 1D.
  if (r == CUDA_SUCCESS &&
      (node->ops[0].copy.height != 1 || node->ops[0].copy.depth != 1 ||
       op.copy.height != 1 || op.copy.depth != 1)) {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r == CUDA_SUCCESS) {
    node_set(node, &op, 1);
  }
  return r;
}

CUresult cuGraphExecBatchMemOpNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode,
    const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams) {
  gnode_t *node = NULL;
  op_t ops[MAX_NODE_OPS];
  uint32_t count = 0;
  CUresult r = exec_node(hGraphExec, hNode, NODE_MEMOP, &node);
  if (r == CUDA_SUCCESS) {
    r = memop_ops(nodeParams, ops, &count);
  }
  // Only addresses and values may change: not the count or the kinds.
  for (uint32_t k = 0; r == CUDA_SUCCESS && k < count; ++k) {
    if (count != node->op_count || ops[k].kind != node->ops[k].kind) {
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (r == CUDA_SUCCESS) {
    node_set(node, ops, count);
  }
  return r;
}

CUresult cuGraphExecKernelNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode,
    const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  gnode_t *node = NULL;
  op_t op;
  CUresult r = exec_node(hGraphExec, hNode, NODE_KERNEL, &node);
  if (r == CUDA_SUCCESS) {
    r = kernel_op(nodeParams, &op);
  }
  // The double holds accel to the same kernel (the driver allows another
  // function of the same context; accel never changes it).
  if (r == CUDA_SUCCESS && op.kernel.fn != node->ops[0].kernel.fn) {
    op_free(&op);
    r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r == CUDA_SUCCESS) {
    node_set(node, &op, 1);
  }
  return r;
}

// ---------------------------------------------------------------------------
// cuGetProcAddress: the entries of ACCEL_CUDA_SYMBOLS by their plain names.
// ---------------------------------------------------------------------------

static const struct {
  const char *name;
  void *fn;
} k_symbols[] = {
#define DOUBLE_SYMBOL(name) {#name, (void *)&name},
    ACCEL_CUDA_SYMBOLS(DOUBLE_SYMBOL)
#undef DOUBLE_SYMBOL
};

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version,
                          cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
  if (symbol == NULL || pfn == NULL ||
      (flags != CU_GET_PROC_ADDRESS_DEFAULT &&
       flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
       flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cuda_version > CUDA_VERSION || cuda_version < 12000) {
    // The double implements the 12.0 ABI of each entry, and nothing older.
    if (status != NULL) {
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    }
    *pfn = NULL;
    return CUDA_ERROR_NOT_FOUND;
  }
  for (size_t i = 0; i < sizeof(k_symbols) / sizeof(k_symbols[0]); ++i) {
    if (strcmp(k_symbols[i].name, symbol) == 0) {
      *pfn = k_symbols[i].fn;
      if (status != NULL) {
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
      }
      return CUDA_SUCCESS;
    }
  }
  *pfn = NULL;
  if (status != NULL) {
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return CUDA_ERROR_NOT_FOUND;
}
