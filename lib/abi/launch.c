// Kernel launch: checks a launch against the kernel's declared signature at
// enqueue, marshals it into one allocation (binding table, retained buffers,
// constants) owned by a ref-counted launch record, and submits an
// ACCEL_CMD_LAUNCH command. The queue worker runs launch_exec, which runs a
// single work-group inline and spreads larger grids through the dispatch
// table's host_grid (a device thread pool) when the backend has one.
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/executable_impl.h"
#include "abi/launch_impl.h"
#include "abi/numerics.h"
#include "abi/tuning.h"
#include "core/driver_dispatch.h"
#include "core/error.h"
#include "mem/buffer_impl.h"
#include "stream/stream_impl.h"
#include "trace/trace_hooks.h"

#define MAX_GROUPS (1ull << 48)


// The worker reads |kernel|, |driver| and the dispatch's work-group count
// first: they share the record's first cache line (the kernel's function
// and name are on the kernel's read-mostly line), so that a one-group
// launch of a kernel that touches nothing else costs the worker one line
// beyond the command and the kernel.
typedef struct launch {
  const accel_kernel_t *kernel;  // its owner is held by the command's refs[1]
  const accel_driver_t *driver;
  accel_object_t object;
  accel_kernel_dispatch_t dispatch;
  uint32_t buffer_count;
  uint32_t capacity;  // bytes allocated for the record (for the cache)
  accel_buffer_t **buffers;  // one reference each
} launch_t;

// Launch records of up to this many bytes are cached per kernel (one slot)
// instead of freed: the worker frees a record on its thread and the
// submitter allocates the next on another, which glibc serves slowly.
#define CACHED_RECORD_BYTES 512u

static void launch_destroy(accel_object_t *object) {
  launch_t *l = (launch_t *)((uint8_t *)object - offsetof(launch_t, object));
  for (uint32_t i = 0; i < l->buffer_count; ++i) {
    accel_buffer_release(l->buffers[i]);
  }
  if (l->capacity == CACHED_RECORD_BYTES) {
    accel_kernel_t *k = (accel_kernel_t *)l->kernel;
    void *expected = NULL;
    // Release: the next taker must see the record's last writes settled.
    if (atomic_compare_exchange_strong_explicit(&k->record_cache, &expected,
                                                (void *)l,
                                                memory_order_release,
                                                memory_order_relaxed)) {
      return;
    }
  }
  free(l);
}

// Most bytes of one kernel message that are delivered.
#define MESSAGE_MAX_BYTES 1024

// One work-group call. The kernel sees only |wg| (first, so the message
// channel finds the call from the workgroup pointer the kernel passes back);
// the rest records the first assertion it reports. On the caller's stack:
// the happy path costs two stores and one load, no thread-local lookup.
typedef struct group_call {
  accel_kernel_workgroup_t wg;
  const char *kernel;
  // The execution's id for thread scratch: 0 until a work-group asks, then
  // drawn once for the execution (kernel_thread_scratch), so launches whose
  // kernels never ask cost no atomic.
  _Atomic uint64_t *execution;
  bool asserted;
  char text[MESSAGE_MAX_BYTES + 1];  // valid when |asserted|
} group_call_t;

// The message channel (kernel ABI 1.1): to stderr, and an assertion also to
// the work-group's result (finish_group).
_Static_assert(offsetof(group_call_t, wg) == 0,
              "the message channel finds the call from the workgroup");

static int32_t kernel_message(const accel_kernel_dispatch_t *dispatch,
                              const accel_kernel_workgroup_t *wg,
                              uint32_t kind, const char *text) {
  (void)dispatch;
  if ((kind != ACCEL_KERNEL_MESSAGE_PRINT &&
       kind != ACCEL_KERNEL_MESSAGE_ASSERT) ||
      wg == NULL) {
    return -1;
  }
  group_call_t *call = (group_call_t *)wg;  // |wg| is the call's first field
  const uint32_t *id = wg->id;
  text = text != NULL ? text : "";
  bool assert_kind = kind == ACCEL_KERNEL_MESSAGE_ASSERT;
  fprintf(stderr, "accel: kernel \"%s\" work-group (%u, %u, %u)%s: %.*s\n",
          call->kernel, id[0], id[1], id[2],
          assert_kind ? " assertion failed" : "", MESSAGE_MAX_BYTES, text);
  accel_trace_kernel_message(kind, call->kernel, id, text);
  if (assert_kind && !call->asserted) {
    call->asserted = true;
    snprintf(call->text, sizeof(call->text), "%s", text);
  }
  return 0;
}

// Per-thread scratch (kernel ABI 1.3): one grow-only block per thread that
// runs work-groups, tagged with the execution it was last handed to. Freed
// at the thread's exit (a key destructor); the process's main thread keeps
// its block until exit.
typedef struct thread_scratch {
  void *data;
  uint64_t capacity;
  uint64_t execution;  // 0: not handed out since it was (re)allocated
} thread_scratch_t;

static __thread thread_scratch_t tls_scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_key_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;
// Executions of launches, numbered from 1 (0 marks a fresh block).
static _Atomic uint64_t next_execution = 1;

static void scratch_release(void *value) {
  thread_scratch_t *t = value;
  free(t->data);
  *t = (thread_scratch_t){0};
}

static void scratch_key_create(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_release) == 0;
}

// The id of |call|'s execution, drawn by the first work-group that asks.
static uint64_t execution_of(const group_call_t *call) {
  // Relaxed: only distinctness matters, and the compare-and-swap makes
  // every thread of the execution agree on one id.
  uint64_t e = atomic_load_explicit(call->execution, memory_order_relaxed);
  if (e == 0) {
    uint64_t mine =
        atomic_fetch_add_explicit(&next_execution, 1, memory_order_relaxed);
    if (atomic_compare_exchange_strong_explicit(call->execution, &e, mine,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
      e = mine;
    }
  }
  return e;
}

static void *kernel_thread_scratch(const accel_kernel_dispatch_t *dispatch,
                                   const accel_kernel_workgroup_t *wg,
                                   uint64_t bytes, int32_t *fresh) {
  (void)dispatch;
  if (wg == NULL || fresh == NULL || bytes == 0 || bytes > (1ull << 40)) {
    return NULL;
  }
  const group_call_t *call = (const group_call_t *)wg;
  thread_scratch_t *t = &tls_scratch;
  if (bytes > t->capacity) {
    uint64_t capacity = (bytes + 4095) & ~4095ull;
    void *data = aligned_alloc(64, capacity);
    if (data == NULL) {
      return NULL;
    }
    if (t->data == NULL) {
      // The first block of this thread: free it when the thread ends.
      pthread_once(&scratch_key_once, scratch_key_create);
      if (scratch_key_ok) {
        pthread_setspecific(scratch_key, t);
      }
    }
    free(t->data);
    *t = (thread_scratch_t){.data = data, .capacity = capacity};
  }
  uint64_t execution = execution_of(call);
  *fresh = t->execution != execution;
  t->execution = execution;
  return t->data;
}

// A work-group's result: an assertion it reported, else its return value.
static accel_status_t finish_group(const group_call_t *call, int32_t r) {
  const uint32_t *id = call->wg.id;
  if (call->asserted) {
    return accel_error(ACCEL_ERROR_ABORTED,
                       "kernel \"%s\" work-group (%u, %u, %u) assertion "
                       "failed: %s",
                       call->kernel, id[0], id[1], id[2], call->text);
  }
  if (r != 0) {
    return accel_error(ACCEL_ERROR_ABORTED,
                       "kernel \"%s\" work-group (%u, %u, %u) returned %d",
                       call->kernel, id[0], id[1], id[2], r);
  }
  return ACCEL_OK;
}

// What a grid's work-groups share (run_group's context).
typedef struct grid {
  accel_kernel_fn_t fn;
  const char *kernel;
  const accel_kernel_dispatch_t *dispatch;
  _Atomic uint64_t execution;  // see group_call_t
} grid_t;

static accel_status_t run_group(void *ctx, const uint32_t id[3]) {
  grid_t *g = ctx;
  group_call_t call;
  call.wg = (accel_kernel_workgroup_t){.id = {id[0], id[1], id[2]}};
  call.kernel = g->kernel;
  call.execution = &g->execution;
  call.asserted = false;
  int32_t r = g->fn(g->dispatch, &call.wg);
  if (__builtin_expect(r != 0 || call.asserted, 0)) {
    return finish_group(&call, r);
  }
  return ACCEL_OK;
}

void accel_kernel_init_single_dispatch(accel_kernel_t *k) {
  k->single_dispatch = (accel_kernel_dispatch_t){
      .struct_size = sizeof(accel_kernel_dispatch_t),
      .abi_version = ACCEL_KERNEL_ABI_VERSION,
      .workgroup_count = {1, 1, 1},
      .workgroup_size = {k->workgroup_size[0], k->workgroup_size[1],
                         k->workgroup_size[2]},
      .workspace = k->workspace,
      .workspace_size = k->workspace_size,
      .message = kernel_message,
      .thread_scratch = kernel_thread_scratch,
  };
}

// A one-group launch without bindings or constants: the payload is the
// kernel itself (its owner is held by the command).
static accel_status_t launch_exec_single(void *payload,
                                         accel_drv_device_t *device) {
  const accel_kernel_t *k = payload;
  group_call_t call;
  call.wg = (accel_kernel_workgroup_t){.id = {0, 0, 0}};
  call.kernel = k->name;
  _Atomic uint64_t execution = 0;
  call.execution = &execution;
  call.asserted = false;
  accel_trace_launch_begin(k->name, 1, 1, 1);
  int32_t r = k->fn(&k->single_dispatch, &call.wg);
  if (__builtin_expect(r != 0 || call.asserted, 0)) {
    return finish_group(&call, r);
  }
  return ACCEL_OK;
}

static accel_status_t run_grid(const accel_kernel_t *k,
                               const accel_driver_t *driver,
                               const accel_kernel_dispatch_t *dispatch,
                               accel_drv_device_t *device);

// A launch of a kernel with tuned configurations or checks after it: the
// tuning cache may change its constants and grid (tuning_cache.c), then
// the tensor summaries and the numerics check read what it wrote.
static __attribute__((noinline)) accel_status_t run_tuned_or_checked(
    const accel_kernel_t *k, const accel_driver_t *driver,
    const accel_kernel_dispatch_t *dispatch, accel_drv_device_t *device) {
  accel_kernel_dispatch_t tuned;
  _Alignas(16) uint8_t constants[ACCEL_TUNING_MAX_CONSTANTS];
  if (k->tuning != NULL &&
      accel_tuning_apply(k, dispatch, &tuned, constants)) {
    dispatch = &tuned;
  }
  ACCEL_RETURN_IF_ERROR(run_grid(k, driver, dispatch, device));
  if ((k->checks & ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES) != 0) {
    accel_numerics_summarize(k, dispatch);
  }
  if ((k->checks & ACCEL_RUNTIME_FLAG_CHECK_NUMERICS) != 0) {
    return accel_numerics_check(k, dispatch);
  }
  return ACCEL_OK;
}

accel_status_t accel_launch_run(const accel_kernel_t *k,
                                const accel_driver_t *driver,
                                const accel_kernel_dispatch_t *dispatch,
                                accel_drv_device_t *device) {
  if (__builtin_expect(k->tuning != NULL || k->checks != 0, 0)) {
    return run_tuned_or_checked(k, driver, dispatch, device);
  }
  return run_grid(k, driver, dispatch, device);
}

static accel_status_t run_grid(const accel_kernel_t *k,
                               const accel_driver_t *driver,
                               const accel_kernel_dispatch_t *dispatch,
                               accel_drv_device_t *device) {
  const uint32_t *n = dispatch->workgroup_count;
  accel_trace_launch_begin(k->name, n[0], n[1], n[2]);
  grid_t g = {.fn = k->fn, .kernel = k->name, .dispatch = dispatch,
              .execution = 0};
  if (n[0] == 1 && n[1] == 1 && n[2] == 1) {
    // One work-group: run it here, no handoff (the empty-launch round trip).
    static const uint32_t zero[3] = {0, 0, 0};
    return run_group(&g, zero);
  }
  if (driver->dispatch != NULL && driver->dispatch->host_grid != NULL) {
    return driver->dispatch->host_grid(device, n, run_group, &g);
  }
  // A host-visible backend without a thread pool runs the grid on the queue
  // worker, in order.
  uint32_t id[3];
  for (id[2] = 0; id[2] < n[2]; ++id[2]) {
    for (id[1] = 0; id[1] < n[1]; ++id[1]) {
      for (id[0] = 0; id[0] < n[0]; ++id[0]) {
        ACCEL_RETURN_IF_ERROR(run_group(&g, id));
      }
    }
  }
  return ACCEL_OK;
}

static accel_status_t launch_exec(void *payload, accel_drv_device_t *device) {
  const launch_t *l = payload;
  return accel_launch_run(l->kernel, l->driver, &l->dispatch, device);
}

void accel_launch_dispatch_init(const accel_kernel_t *k, const uint32_t n[3],
                                uint32_t binding_count,
                                const accel_kernel_binding_t *bindings,
                                uint32_t constants_size, const void *constants,
                                accel_kernel_dispatch_t *out) {
  *out = (accel_kernel_dispatch_t){
      .struct_size = sizeof(accel_kernel_dispatch_t),
      .abi_version = ACCEL_KERNEL_ABI_VERSION,
      .workgroup_count = {n[0], n[1], n[2]},
      .workgroup_size = {k->workgroup_size[0], k->workgroup_size[1],
                         k->workgroup_size[2]},
      .binding_count = binding_count,
      .constants_size = constants_size,
      .bindings = binding_count ? bindings : NULL,
      .constants = constants_size ? constants : NULL,
      .workspace = k->workspace,
      .workspace_size = k->workspace_size,
      .message = kernel_message,
      .thread_scratch = kernel_thread_scratch,
  };
}

accel_status_t accel_launch_check_binding(const accel_device_t *device,
                                          const accel_kernel_t *k, uint32_t i,
                                          const accel_buffer_t *buffer,
                                          uint64_t offset, uint64_t length,
                                          const char *prefix,
                                          uint64_t *out_length) {
  const accel_kernel_binding_decl_t *d = &k->bindings[i];
  const char *bn = d->name ? d->name : "";
  if (buffer == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": binding %u (%s) has no buffer",
                       prefix, k->name, i, bn);
  }
  if (buffer->device != device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": binding %u (%s) is a buffer on "
                       "%s, the stream is on %s",
                       prefix, k->name, i, bn, buffer->device->info.id,
                       device->info.id);
  }
  uint64_t size = buffer->size_bytes;
  if (offset > size) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": binding %u (%s) offset %llu is "
                       "beyond the buffer's %llu bytes",
                       prefix, k->name, i, bn, (unsigned long long)offset,
                       (unsigned long long)size);
  }
  if (length == 0) {
    length = size - offset;
  }
  char what[320];
  snprintf(what, sizeof(what), "%slaunch of \"%s\": binding %u (%s)", prefix,
           k->name, i, bn);
  uint32_t use = (d->access & ACCEL_KERNEL_ACCESS_WRITE) != 0
                     ? ACCEL_BUFFER_USE_WRITE
                     : ACCEL_BUFFER_USE_READ;
  ACCEL_RETURN_IF_ERROR(
      accel_buffer_check_use(buffer, offset, length, use, what));
  if (length < d->min_size_bytes) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: %llu bytes bound, the kernel declares at least "
                       "%llu",
                       what, (unsigned long long)length,
                       (unsigned long long)d->min_size_bytes);
  }
  uint64_t address = buffer->address + offset;
  if (d->alignment > 1 && address % d->alignment != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: address 0x%llx is not %u-byte aligned", what,
                       (unsigned long long)address, d->alignment);
  }
  *out_length = length;
  return ACCEL_OK;
}

accel_status_t accel_launch_check_shape(const accel_kernel_t *k,
                                        const uint32_t n[3],
                                        uint32_t binding_count,
                                        uint32_t constants_size,
                                        bool bindings_given,
                                        bool constants_given,
                                        const char *prefix) {
  if (n[0] == 0 || n[1] == 0 || n[2] == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": work-group count %ux%ux%u has a "
                       "zero dim",
                       prefix, k->name, n[0], n[1], n[2]);
  }
  if ((uint64_t)n[0] * n[1] > MAX_GROUPS ||
      (uint64_t)n[0] * n[1] * n[2] > MAX_GROUPS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": %ux%ux%u work-groups exceed 2^48",
                       prefix, k->name, n[0], n[1], n[2]);
  }
  if (binding_count != k->binding_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": %u bindings given, the kernel "
                       "declares %u",
                       prefix, k->name, binding_count, k->binding_count);
  }
  if (constants_size != k->constants_size) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": %u constant bytes given, the "
                       "kernel declares %u",
                       prefix, k->name, constants_size, k->constants_size);
  }
  if ((binding_count > 0 && !bindings_given) ||
      (constants_size > 0 && !constants_given)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch of \"%s\": bindings or constants pointer "
                       "is NULL",
                       prefix, k->name);
  }
  return ACCEL_OK;
}

accel_status_t accel_launch_check_target(const accel_device_t *device,
                                         const accel_kernel_t *k) {
  if (k->device != device) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "launch of \"%s\": the kernel was loaded for %s, the "
                       "stream is on %s",
                       k->name, k->device->info.id, device->info.id);
  }
  if ((device->info.caps & ACCEL_DEVICE_CAP_HOST_KERNELS) == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "launch of \"%s\": %s does not run host kernels and "
                       "the executable's code for %s has no such kernel",
                       k->name, device->info.id, device->info.target);
  }
  return ACCEL_OK;
}

static accel_status_t launch_checked(accel_stream_t *stream,
                                     accel_kernel_t *kernel,
                                     const accel_launch_desc_t *desc);

// Checks a launch's grid and arguments against the kernel's declaration;
// |lengths| receives each binding's bound length.
static accel_status_t check_args(const accel_stream_t *stream,
                                 const accel_kernel_t *k,
                                 const accel_launch_desc_t *desc,
                                 uint64_t lengths[AXE_MAX_BINDINGS]) {
  ACCEL_RETURN_IF_ERROR(accel_launch_check_shape(
      k, desc->workgroup_count, desc->binding_count, desc->constants_size,
      desc->bindings != NULL, desc->constants != NULL, ""));
  for (uint32_t i = 0; i < desc->binding_count; ++i) {
    const accel_launch_binding_t *b = &desc->bindings[i];
    ACCEL_RETURN_IF_ERROR(accel_launch_check_binding(
        stream->device, k, i, b->buffer, b->offset, b->length, "",
        &lengths[i]));
  }
  return ACCEL_OK;
}
static accel_status_t launch_device(accel_stream_t *stream,
                                    accel_kernel_t *kernel,
                                    const accel_launch_desc_t *desc);

accel_status_t accel_launch(accel_stream_t *stream, accel_kernel_t *kernel,
                            const accel_launch_desc_t *desc) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(kernel != NULL, "kernel (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  if (desc->struct_size < sizeof(*desc)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "launch desc: struct_size %u is too small",
                       desc->struct_size);
  }
  const accel_kernel_t *k = kernel;
  if (__builtin_expect(k->device != stream->device ||
                           (stream->device->info.caps &
                            ACCEL_DEVICE_CAP_HOST_KERNELS) == 0,
                       0)) {
    if (k->drv_kernel != NULL && k->device == stream->device) {
      return launch_device(stream, kernel, desc);
    }
    return accel_launch_check_target(stream->device, k);
  }
  const uint32_t *n = desc->workgroup_count;
  // The commonest shape first: one work-group and no arguments, as the
  // kernel declares (every check of launch_checked passes for it).
  if (n[0] == 1 && n[1] == 1 && n[2] == 1 && desc->binding_count == 0 &&
      desc->constants_size == 0 && k->binding_count == 0 &&
      k->constants_size == 0) {
    return accel_stream_submit_launch(stream, launch_exec_single, kernel, NULL,
                                      accel_launch_owner_take(k->owner));
  }
  return launch_checked(stream, kernel, desc);
}

// accel_launch past the checks of the stream, kernel and device: validates
// the grid and the arguments, then submits.
static __attribute__((noinline)) accel_status_t launch_checked(
    accel_stream_t *stream, accel_kernel_t *kernel,
    const accel_launch_desc_t *desc) {
  const accel_kernel_t *k = kernel;
  const uint32_t *n = desc->workgroup_count;
  uint64_t lengths[AXE_MAX_BINDINGS];
  ACCEL_RETURN_IF_ERROR(check_args(stream, k, desc, lengths));

  if (desc->binding_count == 0 && desc->constants_size == 0 && n[0] == 1 &&
      n[1] == 1 && n[2] == 1) {
    return accel_stream_submit_launch(stream, launch_exec_single, kernel, NULL,
                                      accel_launch_owner_take(k->owner));
  }

  // One allocation: record, binding table, buffer references, constants.
  uint32_t nb = desc->binding_count;
  size_t bindings_at = (sizeof(launch_t) + 15) & ~(size_t)15;
  size_t buffers_at = bindings_at + nb * sizeof(accel_kernel_binding_t);
  size_t constants_at =
      (buffers_at + nb * sizeof(accel_buffer_t *) + 15) & ~(size_t)15;
  size_t total = constants_at + desc->constants_size;
  uint32_t capacity = CACHED_RECORD_BYTES;
  uint8_t *mem = NULL;
  if (total <= CACHED_RECORD_BYTES) {
    // Acquire: pairs with the release in launch_destroy.
    mem = atomic_exchange_explicit(&kernel->record_cache, NULL,
                                   memory_order_acquire);
    if (mem == NULL) {
      mem = aligned_alloc(64, CACHED_RECORD_BYTES);
    }
  } else {
    capacity = (uint32_t)((total + 63) & ~(size_t)63);
    mem = aligned_alloc(64, capacity);
  }
  if (mem == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "launch of \"%s\": cannot allocate %zu bytes", k->name,
                       total);
  }
  launch_t *l = (launch_t *)mem;
  accel_kernel_binding_t *table = (accel_kernel_binding_t *)(mem + bindings_at);
  accel_object_init(&l->object, launch_destroy);
  l->kernel = k;
  l->capacity = capacity;
  l->driver = stream->device->driver;
  l->buffers = (accel_buffer_t **)(mem + buffers_at);
  l->buffer_count = nb;
  for (uint32_t i = 0; i < nb; ++i) {
    const accel_launch_binding_t *b = &desc->bindings[i];
    accel_buffer_retain(b->buffer);
    l->buffers[i] = b->buffer;
    table[i] = (accel_kernel_binding_t){
        .data = (void *)(uintptr_t)(b->buffer->address + b->offset),
        .size_bytes = lengths[i],
        .access = k->bindings[i].access};
  }
  if (desc->constants_size > 0) {
    memcpy(mem + constants_at, desc->constants, desc->constants_size);
  }
  accel_launch_dispatch_init(k, n, nb, table, desc->constants_size,
                             mem + constants_at, &l->dispatch);
  return accel_stream_submit_launch(stream, launch_exec, l, &l->object,
                                    accel_launch_owner_take(k->owner));
}

// The buffers a device launch holds until it completes (the queue's ref0).
typedef struct device_launch_refs {
  accel_object_t object;
  uint32_t count;
  accel_buffer_t *buffers[AXE_MAX_BINDINGS];
} device_launch_refs_t;

static void device_launch_refs_destroy(accel_object_t *object) {
  device_launch_refs_t *r = (device_launch_refs_t *)object;
  for (uint32_t i = 0; i < r->count; ++i) {
    accel_buffer_release(r->buffers[i]);
  }
  free(r);
}

// accel_launch of a kernel of a device code object (CUDA): the same checks
// as a host launch, then the driver's kernel_launch on the stream's queue
// with the kernel ABI's device parameters (docs/kernel-abi.md): the grid,
// the kernel's declared workgroup size as the block, each binding's device
// address and bound length, the workspace and the constants.
static __attribute__((noinline)) accel_status_t launch_device(
    accel_stream_t *stream, accel_kernel_t *kernel,
    const accel_launch_desc_t *desc) {
  const accel_kernel_t *k = kernel;
  const uint32_t *n = desc->workgroup_count;
  uint64_t lengths[AXE_MAX_BINDINGS], addresses[AXE_MAX_BINDINGS];
  ACCEL_RETURN_IF_ERROR(check_args(stream, k, desc, lengths));
  for (uint32_t i = 0; i < desc->binding_count; ++i) {
    addresses[i] = desc->bindings[i].buffer->address + desc->bindings[i].offset;
  }
  device_launch_refs_t *refs = malloc(sizeof(*refs));
  if (refs == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "launch of \"%s\": cannot allocate its references",
                       k->name);
  }
  accel_object_init(&refs->object, device_launch_refs_destroy);
  refs->count = desc->binding_count;
  for (uint32_t i = 0; i < desc->binding_count; ++i) {
    accel_buffer_retain(desc->bindings[i].buffer);
    refs->buffers[i] = desc->bindings[i].buffer;
  }
  accel_drv_launch_t l = {
      .grid = {n[0], n[1], n[2]},
      .block = {k->workgroup_size[0], k->workgroup_size[1],
                k->workgroup_size[2]},
      .binding_count = desc->binding_count,
      .binding_addresses = addresses,
      .binding_lengths = lengths,
      .workspace_address = k->workspace_address,
      .workspace_bytes = k->workspace_address != 0 ? k->workspace_size : 0,
      .constants = desc->constants_size ? desc->constants : NULL,
      .constants_size = desc->constants_size};
  // The queue owns both references from here, also on failure.
  return stream->device->driver->dispatch->kernel_launch(
      stream->queue, k->drv_kernel, &l, &refs->object,
      accel_launch_owner_take(k->owner), NULL);
}
