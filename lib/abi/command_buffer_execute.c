// Replays of command buffers: accel_stream_execute checks the binding table
// and constants, fills one execute record (its bases, the slots' buffers,
// the event records' values) and submits the buffer as EXECUTE commands of
// the backend's recording, split where a copy goes to the copy engines; a
// backend without recordings gets the recorded commands through ordinary
// submits instead. Recorded launches run through accel_cb_launch_exec.
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/command_buffer_impl.h"
#include "abi/launch_impl.h"
#include "core/driver_sync.h"
#include "core/error.h"
#include "core/lock.h"
#include "stream/event_impl.h"
#include "stream/stream_copy.h"
#include "stream/stream_impl.h"
#include "sync/semaphore_impl.h"

// Commands handed to the queue at once by the replay through submit.
#define FALLBACK_BATCH 256u

// ---- launches -------------------------------------------------------------------

// A recorded launch replayed through ordinary submits failed with |st|:
// names the buffer and the command (the backend's replay does it itself).
static __attribute__((noinline)) accel_status_t launch_failed(
    const cb_launch_t *l, accel_status_t st) {
  char why[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof(why), "%s", accel_last_error());
  return accel_error(st, "command buffer \"%s\" command #%u (launch) failed: "
                     "%s",
                     l->cb->name, l->index, why);
}

accel_status_t accel_cb_launch_exec(void *payload, accel_drv_device_t *device) {
  const cb_entry_t *e = payload;
  const cb_launch_t *l = e->launch;
  if (l->prebuilt) {
    accel_status_t st = accel_launch_run(l->kernel, l->driver, &l->dispatch,
                                         device);
    if (__builtin_expect(st != ACCEL_OK && e->exec->fallback, 0)) {
      return launch_failed(l, st);
    }
    return st;
  }
  const cb_exec_t *x = e->exec;
  accel_kernel_binding_t table[AXE_MAX_BINDINGS];
  for (uint32_t i = 0; i < l->binding_count; ++i) {
    const cb_binding_t *b = &l->bindings[i];
    uint64_t address = b->address;
    uint64_t length = b->length;
    if (b->slot != UINT32_MAX) {
      address += x->bases[b->slot];
      if (length == 0) {
        length = x->lengths[b->slot] - b->address;
      }
    }
    table[i] = (accel_kernel_binding_t){.data = (void *)(uintptr_t)address,
                                        .size_bytes = length,
                                        .access = b->access};
  }
  const void *constants = l->constants_from_execute
                              ? x->constants + l->constants_offset
                              : l->constants;
  accel_kernel_dispatch_t dispatch;
  accel_launch_dispatch_init(l->kernel, l->workgroup_count, l->binding_count,
                             table, l->constants_size, constants, &dispatch);
  accel_status_t st = accel_launch_run(l->kernel, l->driver, &dispatch, device);
  if (__builtin_expect(st == ACCEL_OK || !x->fallback, 1)) {
    return st;  // the backend's replay names the command itself
  }
  return launch_failed(l, st);
}

// ---- execute records ------------------------------------------------------------

// Where each array of an execute record starts (see exec_bytes).
static void exec_layout(const accel_command_buffer_t *cb, cb_exec_t *x) {
  uint8_t *p = (uint8_t *)x + ((sizeof(cb_exec_t) + 15) & ~(size_t)15);
  x->bases = (uint64_t *)p;
  p += cb->base_count * sizeof(uint64_t);
  x->lengths = x->bases + (cb->base_count - cb->slots.n);
  x->buffers = (accel_buffer_t **)p;
  p += cb->slots.n * sizeof(accel_buffer_t *);
  x->event_semaphores = (accel_semaphore_t **)p;
  p += cb->events.n * sizeof(accel_semaphore_t *);
  p = (uint8_t *)(((uintptr_t)p + 15) & ~(uintptr_t)15);
  x->entries = (cb_entry_t *)p;
  p += cb->launches.n * sizeof(cb_entry_t);
  x->constants = p;
}

// The last command of an execute completed (or was skipped or refused):
// drops what the execute held and keeps the record for the next one.
static void exec_destroy(accel_object_t *object) {
  cb_exec_t *x = (cb_exec_t *)object;
  accel_command_buffer_t *cb = x->cb;
  for (uint32_t i = 0; i < cb->slots.n; ++i) {
    accel_buffer_release(x->buffers[i]);
    x->buffers[i] = NULL;
  }
  for (uint32_t i = 0; i < cb->events.n; ++i) {
    accel_semaphore_release(x->event_semaphores[i]);
    x->event_semaphores[i] = NULL;
  }
  cb_exec_t *expected = NULL;
  // Release: the next taker must see the record's last writes settled.
  if (!atomic_compare_exchange_strong_explicit(&cb->exec_cache, &expected, x,
                                               memory_order_release,
                                               memory_order_relaxed)) {
    free(x);
  }
  // The execute's unit of the buffer's lifetime (launch_owner.h).
  accel_object_release(&cb->owner.object);
}

// An execute record for |cb| (the cached one, or a new one), holding a
// reference to |cb|.
static cb_exec_t *exec_get(accel_command_buffer_t *cb) {
  // Acquire: pairs with the release in exec_destroy.
  cb_exec_t *x = atomic_exchange_explicit(&cb->exec_cache, NULL,
                                          memory_order_acquire);
  if (x == NULL) {
    x = calloc(1, cb->exec_bytes);
    if (x == NULL) {
      return NULL;
    }
    x->cb = cb;
    x->fallback = cb->recording == NULL;
    exec_layout(cb, x);
    for (uint32_t i = 0; i < cb->launches.n; ++i) {
      x->entries[i] = (cb_entry_t){.launch = cb->launches.v[i], .exec = x};
    }
    uint32_t slots = cb->slots.n;
    x->bases[slots] = (uint64_t)(uintptr_t)x->constants;
    x->bases[slots + 1] = (uint64_t)(uintptr_t)x->entries;
  }
  accel_object_init(&x->object, exec_destroy);
  accel_launch_owner_take(&cb->owner);  // dropped by exec_destroy
  return x;
}

static void busy_lock(accel_command_buffer_t *cb) {
  uint32_t spins = 0;
  // Acquire: the last holder's notes are visible once we hold it.
  while (atomic_exchange_explicit(&cb->busy_lock, 1, memory_order_acquire)) {
    if (++spins >= 64) {
      sched_yield();  // the holder was preempted (more threads than cores)
    }
  }
}

static void busy_unlock(accel_command_buffer_t *cb) {
  // Release: publishes the notes to the next holder (a plain store).
  atomic_store_explicit(&cb->busy_lock, 0, memory_order_release);
}

// A buffer without FLAG_REENTRANT may execute on |stream| unless its last
// execute, on another stream, has not completed: that stream's completion
// semaphore has not reached the seq noted after it (a failed stream runs
// nothing more). Reads nothing the queue worker writes per execute when the
// stream is the last one's.
static accel_status_t busy_check_locked(accel_command_buffer_t *cb,
                                        accel_stream_t *stream) {
  ACCEL_ASSERT_SPIN_HELD(atomic_load_explicit(&cb->busy_lock,
                                              memory_order_relaxed) != 0);
  if (cb->busy_semaphore == NULL || cb->busy_stream == stream) {
    return ACCEL_OK;
  }
  uint64_t value = 0;
  const accel_drv_sync_ops_t *sync = cb->device->driver->sync;
  if (sync->query(cb->busy_semaphore->drv, &value) != ACCEL_OK ||
      value >= cb->busy_seq) {
    return ACCEL_OK;
  }
  return accel_error(ACCEL_ERROR_BUSY,
                     "execute of \"%s\" on stream \"%s\": still executing "
                     "on stream \"%s\" and not created reentrant",
                     cb->name, stream->name, cb->busy_name);
}

// Notes that the buffer's last execute went to |stream|, up to its last
// command so far.
static void busy_note_locked(accel_command_buffer_t *cb,
                             accel_stream_t *stream) {
  ACCEL_ASSERT_SPIN_HELD(atomic_load_explicit(&cb->busy_lock,
                                              memory_order_relaxed) != 0);
  if (cb->busy_stream != stream || cb->busy_semaphore == NULL) {
    accel_semaphore_release(cb->busy_semaphore);
    accel_semaphore_retain(stream->completion);
    cb->busy_semaphore = stream->completion;
    cb->busy_stream = stream;
    snprintf(cb->busy_name, sizeof(cb->busy_name), "%s", stream->name);
  }
  // Relaxed: written by this thread's submits (the queue stores it under
  // its submit ordering).
  cb->busy_seq = atomic_load_explicit(&stream->last_seq, memory_order_relaxed);
}

// Fills |x| for one execute of |desc| (checked): the slots' addresses and
// buffers, the constants, the event records' next values.
static accel_status_t exec_fill(accel_command_buffer_t *cb, cb_exec_t *x,
                                const accel_command_buffer_execute_desc_t *desc) {
  for (uint32_t s = 0; s < cb->slots.n; ++s) {
    const accel_command_buffer_binding_t *b = &desc->bindings[s];
    if (!cb->slots.v[s].used || b->buffer == NULL) {
      continue;
    }
    accel_buffer_retain(b->buffer);
    x->buffers[s] = b->buffer;
    x->bases[s] = b->buffer->address + b->offset;
  }
  if (cb->constants_size > 0) {
    memcpy(x->constants, desc->constants, cb->constants_size);
  }
  uint64_t *ev = &x->bases[cb->slots.n + 2];
  for (uint32_t e = 0; e < cb->events.n; ++e) {
    accel_semaphore_t *sem = NULL;
    uint64_t value = 0;
    _Atomic uint64_t *timestamp = NULL;
    if (cb->kinds.v[cb->event_commands.v[e]] == CB_EVENT_WAIT) {
      // The event's last record as of this execute (value 0: never
      // recorded, nothing to wait for).
      accel_event_wait_target(cb->events.v[e], &sem, &value);
    } else {
      ACCEL_RETURN_IF_ERROR(
          accel_event_record_take(cb->events.v[e], &sem, &value, &timestamp));
    }
    x->event_semaphores[e] = sem;
    ev[3 * e] = (uint64_t)(uintptr_t)sem->drv;
    ev[3 * e + 1] = value;
    ev[3 * e + 2] = (uint64_t)(uintptr_t)timestamp;
  }
  return ACCEL_OK;
}

// ---- submission -----------------------------------------------------------------

// A reference for one submitted command to hold: to the execute record
// |x|, or, for a buffer whose commands take nothing from an execute (no
// record), a unit of the buffer's own lifetime (launch_owner.h).
static accel_object_t *hold_ref(accel_command_buffer_t *cb, cb_exec_t *x) {
  if (x != NULL) {
    accel_object_retain(&x->object);
    return &x->object;
  }
  return accel_launch_owner_take(&cb->owner);
}

// Submits commands [first, first + count) of |cb| as one EXECUTE of its
// recording, holding |x| (or the buffer).
static accel_status_t submit_recorded(accel_stream_t *stream,
                                      accel_command_buffer_t *cb, cb_exec_t *x,
                                      uint32_t first, uint32_t count) {
  accel_cmd_t cmd = {.kind = ACCEL_CMD_EXECUTE};
  cmd.execute.recording = cb->recording;
  cmd.execute.bases = x != NULL ? x->bases : NULL;
  cmd.execute.first = first;
  cmd.execute.count = count;
  cmd.refs[0] = hold_ref(cb, x);
  return accel_stream_submit(stream, &cmd);
}

// The same range through ordinary submits (a backend without recordings):
// each command rebuilt with its patches applied, the last of each batch
// holding |x| or the buffer (launches read their entries in |x|; a batch
// the queue refuses leaves the earlier ones holding it).
static accel_status_t submit_fallback(accel_stream_t *stream,
                                      accel_command_buffer_t *cb, cb_exec_t *x,
                                      uint32_t first, uint32_t count) {
  accel_cmd_t batch[FALLBACK_BATCH];
  uint32_t end = first + count;
  const accel_drv_patch_t *p = cb->drv_patches + cb->patch_starts[first];
  const accel_drv_patch_t *pend = cb->drv_patches + cb->patch_starts[end];
  for (uint32_t i = first; i < end;) {
    uint32_t n = end - i < FALLBACK_BATCH ? end - i : FALLBACK_BATCH;
    for (uint32_t j = 0; j < n; ++j, ++i) {
      batch[j] = cb->commands.v[i];
      uint64_t *words = (uint64_t *)&batch[j];
      for (; p < pend && p->command == i; ++p) {
        words[p->word] = x->bases[p->base] + p->offset;
      }
    }
    batch[n - 1].refs[0] = hold_ref(cb, x);
    ACCEL_RETURN_IF_ERROR(
        stream->qops->submit(stream->queue, batch, n, NULL));
  }
  return ACCEL_OK;
}

static accel_status_t submit_range(accel_stream_t *stream,
                                   accel_command_buffer_t *cb, cb_exec_t *x,
                                   uint32_t first, uint32_t end) {
  if (end == first) {
    return ACCEL_OK;
  }
  return cb->recording != NULL
             ? submit_recorded(stream, cb, x, first, end - first)
             : submit_fallback(stream, cb, x, first, end - first);
}

// A ref of a copy on the copy engines, resolved for this execute.
static accel_dma_ref_t dma_ref(const cb_exec_t *x,
                               const accel_command_buffer_ref_t *r,
                               const void *host) {
  if (r->buffer != NULL) {
    return (accel_dma_ref_t){.buffer = r->buffer, .offset = r->offset};
  }
  if (r->slot == UINT32_MAX) {
    return (accel_dma_ref_t){.host = (void *)(uintptr_t)host};
  }
  const accel_buffer_t *b = x->buffers[r->slot];
  return (accel_dma_ref_t){
      .buffer = x->buffers[r->slot],
      .offset = x->bases[r->slot] - b->address + r->offset};
}

// Submits the whole buffer: ranges the backend replays, split at each copy
// that goes to the copy engines (unless it overlaps itself in one buffer,
// which the stream then copies as memmove would). Stores in |*out_done| the
// first command not handed over.
static accel_status_t submit_all(accel_stream_t *stream,
                                 accel_command_buffer_t *cb, cb_exec_t *x,
                                 uint32_t *out_done) {
  uint32_t pos = 0;
  *out_done = 0;
  for (uint32_t i = 0; i < cb->dma_copies.n; ++i) {
    const cb_dma_copy_t *c = &cb->dma_copies.v[i];
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_1D,
                          .dst = dma_ref(x, &c->dst, c->host_dst),
                          .src = dma_ref(x, &c->src, c->host_src),
                          .width_bytes = c->size_bytes};
    if (d.dst.buffer != NULL && d.dst.buffer == d.src.buffer &&
        d.dst.offset < d.src.offset + c->size_bytes &&
        d.src.offset < d.dst.offset + c->size_bytes) {
      continue;
    }
    ACCEL_RETURN_IF_ERROR(submit_range(stream, cb, x, pos, c->index));
    *out_done = c->index;
    ACCEL_RETURN_IF_ERROR(
        accel_stream_copy_submit(stream, &stream->dma_link, &d));
    pos = c->index + 1;
    *out_done = pos;
  }
  ACCEL_RETURN_IF_ERROR(submit_range(stream, cb, x, pos, cb->commands.n));
  *out_done = cb->commands.n;
  return ACCEL_OK;
}

// The execute failed after taking its event records' values: those whose
// SIGNAL was not handed over fail with |st| and its message, so that no
// waiter on the event waits for them.
static void fail_events(const accel_command_buffer_t *cb, const cb_exec_t *x,
                        uint32_t done, accel_status_t st) {
  const accel_drv_sync_ops_t *sync = cb->device->driver->sync;
  for (uint32_t e = 0; e < cb->events.n; ++e) {
    uint32_t c = cb->event_commands.v[e];
    if (x->event_semaphores[e] != NULL && c >= done &&
        cb->kinds.v[c] == CB_EVENT_RECORD) {
      sync->fail(x->event_semaphores[e]->drv, st, accel_last_error());
    }
  }
}

// Adds |delta| to the buffer's execute count: without a locked instruction
// while the busy lock serializes executes (|serial|).
static void count_execute(accel_command_buffer_t *cb, bool serial,
                          int64_t delta) {
  if (serial) {
    atomic_store_explicit(
        &cb->execute_count,
        atomic_load_explicit(&cb->execute_count, memory_order_relaxed) +
            (uint64_t)delta,
        memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&cb->execute_count, (uint64_t)delta,
                              memory_order_relaxed);
  }
}

accel_status_t accel_stream_execute(
    accel_stream_t *stream, accel_command_buffer_t *cb,
    const accel_command_buffer_execute_desc_t *desc) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(cb != NULL, "command_buffer (NULL)");
  if (!cb->finalized) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": the command buffer is not "
                       "finalized",
                       cb->name);
  }
  if (cb->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": the command buffer is on %s, the "
                       "stream is on %s",
                       cb->name, cb->device->info.id, stream->device->info.id);
  }
  // Buffers whose commands take nothing from an execute (no slot, launch
  // or event record) need no execute record: their commands hold the buffer.
  cb_exec_t *x = NULL;
  if (cb->drv_patches_count > 0 || cb->exec_needed) {
    x = exec_get(cb);
    if (x == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "execute of \"%s\": cannot allocate %zu bytes",
                         cb->name, cb->exec_bytes);
    }
  }
  // Checked into the record, which exec_destroy gives back on failure.
  accel_status_t st =
      accel_cb_check_execute(cb, stream, desc, x != NULL ? x->lengths : NULL);
  bool serial = (cb->flags & ACCEL_COMMAND_BUFFER_FLAG_REENTRANT) == 0;
  if (serial) {
    // Held across the submit: two executes on two streams must not both
    // pass the check.
    busy_lock(cb);
    if (st == ACCEL_OK) {
      st = busy_check_locked(cb, stream);
    }
  }
  uint32_t done = 0;
  if (st == ACCEL_OK) {
    count_execute(cb, serial, 1);  // before the submit: see execute_count
    if (x != NULL) {
      st = exec_fill(cb, x, desc);
    }
    if (st == ACCEL_OK) {
      st = submit_all(stream, cb, x, &done);
    }
    if (st != ACCEL_OK) {
      if (x != NULL) {
        fail_events(cb, x, done, st);
      }
      count_execute(cb, serial, -1);
    }
  }
  if (serial) {
    if (st == ACCEL_OK || done > 0) {
      busy_note_locked(cb, stream);
    }
    busy_unlock(cb);
  }
  // The commands handed over hold their own references.
  if (x != NULL) {
    accel_object_release(&x->object);
  }
  return st;
}
