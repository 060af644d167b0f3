// Command buffers: creation, recording and finalize. Each recording call
// checks its command (command_buffer_validate.c), then appends it as a
// queue command without references plus the patches each execute fills;
// finalize hands the commands to the backend's recording_create when it has
// one. Replays are in command_buffer_execute.c.
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/command_buffer_impl.h"
#include "abi/launch_impl.h"
#include "core/driver_copy.h"
#include "core/error.h"
#include "stream/event_impl.h"
#include "sync/semaphore_impl.h"

bool accel_cb_vec_grow(void **v, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) {
    return true;
  }
  uint64_t next = *cap ? *cap : 16;
  while (next < need) {
    next *= 2;
  }
  if (next > UINT32_MAX) {
    return false;
  }
  void *p = realloc(*v, next * elem);
  if (p == NULL) {
    return false;
  }
  *v = p;
  *cap = (uint32_t)next;
  return true;
}

static void release_held(const cb_held_t *h) {
  switch (h->kind) {
    case CB_HELD_BUFFER:
      accel_buffer_release(h->object);
      break;
    case CB_HELD_SEMAPHORE:
      accel_semaphore_release(h->object);
      break;
    case CB_HELD_EVENT:
      accel_event_release(h->object);
      break;
    case CB_HELD_KERNEL:
      accel_kernel_release(h->object);
      break;
  }
}

static void cb_destroy(accel_object_t *object) {
  accel_command_buffer_t *cb = (accel_command_buffer_t *)object;  // owner first
  if (cb->recording != NULL) {
    cb->device->driver->queue->recording_destroy(cb->recording);
  }
  free(atomic_load_explicit(&cb->exec_cache, memory_order_acquire));
  for (uint32_t i = 0; i < cb->held.n; ++i) {
    release_held(&cb->held.v[i]);
  }
  for (uint32_t i = 0; i < cb->launches.n; ++i) {
    free(cb->launches.v[i]);
  }
  for (uint32_t i = 0; i < cb->slots.cap; ++i) {  // reserved ones too
    free(cb->slots.v[i].aligns);
  }
  free(cb->commands.v);
  free(cb->kinds.v);
  free(cb->patches.v);
  free(cb->launches.v);
  free(cb->dma_copies.v);
  free(cb->held.v);
  free(cb->slots.v);
  free(cb->events.v);
  free(cb->event_commands.v);
  free(cb->drv_patches);
  free(cb->host_entries);
  free(cb->patch_starts);
  accel_semaphore_release(cb->busy_semaphore);
  free(cb);
}

accel_status_t accel_command_buffer_create(
    accel_device_t *device, const accel_command_buffer_desc_t *desc,
    accel_command_buffer_t **out_command_buffer) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_command_buffer != NULL, "out_command_buffer (NULL)");
  accel_command_buffer_desc_t d = {.struct_size = sizeof(d)};
  if (desc != NULL) {
    if (desc->struct_size < sizeof(d)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "command buffer desc: struct_size %u is too small "
                         "(%zu)",
                         desc->struct_size, sizeof(d));
    }
    d = *desc;
  }
  if ((d.flags & ~(uint32_t)ACCEL_COMMAND_BUFFER_FLAG_REENTRANT) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "command buffer desc: unknown flags 0x%x", d.flags);
  }
  // Aligned: its hot fields sit on cache lines of their own.
  accel_command_buffer_t *cb = aligned_alloc(64, sizeof(*cb));
  if (cb == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "command buffer: cannot allocate %zu bytes",
                       sizeof(*cb));
  }
  memset(cb, 0, sizeof(*cb));
  accel_launch_owner_init(&cb->owner, cb_destroy);
  cb->device = device;
  cb->flags = d.flags;
  if (d.name != NULL && d.name[0] != '\0') {
    snprintf(cb->name, sizeof(cb->name), "%s", d.name);
  } else {
    snprintf(cb->name, sizeof(cb->name), "cb%u",
             atomic_fetch_add_explicit(&device->command_buffer_counter, 1,
                                       memory_order_relaxed));
  }
  *out_command_buffer = cb;
  return ACCEL_OK;
}

void accel_command_buffer_retain(accel_command_buffer_t *cb) {
  if (cb != NULL) {
    accel_launch_owner_retain(&cb->owner);
  }
}

void accel_command_buffer_release(accel_command_buffer_t *cb) {
  if (cb != NULL) {
    accel_launch_owner_release(&cb->owner);
  }
}

accel_status_t accel_command_buffer_info(const accel_command_buffer_t *cb,
                                         accel_command_buffer_info_t *out) {
  ACCEL_CHECK_ARG(cb != NULL, "command_buffer (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out_info (NULL)");
  if (out->struct_size < sizeof(*out)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "command buffer info: struct_size %u is too small "
                       "(%zu)",
                       out->struct_size, sizeof(*out));
  }
  *out = (accel_command_buffer_info_t){
      .struct_size = sizeof(*out),
      .flags = cb->flags,
      .command_count = cb->commands.n,
      .binding_count = cb->slots.n,
      .constants_size = cb->constants_size,
      .finalized = cb->finalized ? 1u : 0u,
      .execute_count = atomic_load_explicit(&cb->execute_count,
                                            memory_order_relaxed)};
  return ACCEL_OK;
}

// ---- appending ---------------------------------------------------------------

static accel_status_t out_of_memory(const accel_command_buffer_t *cb) {
  return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "command buffer \"%s\": cannot grow past %u commands",
                     cb->name, cb->commands.n);
}

// Recording is two steps: every array a command needs grows first (the
// reserve functions, which may fail and change nothing a reader sees), then
// the command is applied, which cannot fail. A command is recorded whole or
// not at all.
static bool reserve(accel_command_buffer_t *cb, uint32_t patches,
                    uint32_t held) {
  return accel_cb_vec_grow((void **)&cb->commands.v, &cb->commands.cap,
                           cb->commands.n + 1, sizeof(accel_cmd_t)) &&
         accel_cb_vec_grow((void **)&cb->kinds.v, &cb->kinds.cap,
                           cb->kinds.n + 1, sizeof(uint8_t)) &&
         accel_cb_vec_grow((void **)&cb->patches.v, &cb->patches.cap,
                           cb->patches.n + patches, sizeof(cb_patch_t)) &&
         accel_cb_vec_grow((void **)&cb->held.v, &cb->held.cap,
                           cb->held.n + held, sizeof(cb_held_t));
}

static void add_patch(accel_command_buffer_t *cb, uint16_t word,
                      uint32_t base_class, uint32_t base_index,
                      uint64_t offset) {
  cb->patches.v[cb->patches.n++] = (cb_patch_t){
      .patch = {.command = cb->commands.n, .word = word, .offset = offset},
      .base_class = base_class,
      .base_index = base_index};
}

static void hold(accel_command_buffer_t *cb, int kind, void *object) {
  cb->held.v[cb->held.n++] = (cb_held_t){.kind = kind, .object = object};
}

static void push_command(accel_command_buffer_t *cb, const accel_cmd_t *cmd,
                         uint32_t kind) {
  cb->commands.v[cb->commands.n++] = *cmd;
  cb->kinds.v[cb->kinds.n++] = (uint8_t)kind;
}

// Makes room for a use of |slot| (its record, and |aligns| more alignment
// needs) without changing the binding count: records past it are zero.
static bool slot_reserve(accel_command_buffer_t *cb, uint32_t slot,
                         uint32_t aligns) {
  uint32_t old_cap = cb->slots.cap;
  if (!accel_cb_vec_grow((void **)&cb->slots.v, &cb->slots.cap, slot + 1,
                         sizeof(cb_slot_req_t))) {
    return false;
  }
  memset(&cb->slots.v[old_cap], 0,
         (cb->slots.cap - old_cap) * sizeof(cb_slot_req_t));
  cb_slot_req_t *r = &cb->slots.v[slot];
  return aligns == 0 ||
         accel_cb_vec_grow((void **)&r->aligns, &r->align_cap,
                           r->align_count + aligns, sizeof(cb_slot_align_t));
}

// Notes a use of |slot| (reserved) by command |index|: [offset, offset +
// min_length) of the slot's range, written or read, at an address aligned
// to |alignment| (0 or 1: any).
static void slot_use(accel_command_buffer_t *cb, uint32_t slot, uint32_t index,
                     bool write, uint64_t offset, uint64_t min_length,
                     uint32_t alignment) {
  if (cb->slots.n <= slot) {
    cb->slots.n = slot + 1;
  }
  cb_slot_req_t *r = &cb->slots.v[slot];
  if (!r->used) {
    r->used = true;
    r->first_command = index;
  }
  if (write && !r->written) {
    r->written = true;
    r->write_command = index;
  }
  if (offset + min_length > r->min_length) {
    r->min_length = offset + min_length;
    r->min_length_command = index;
  }
  if (alignment <= 1) {
    return;
  }
  for (uint32_t i = 0; i < r->align_count; ++i) {
    if (r->aligns[i].alignment == alignment &&
        r->aligns[i].offset % alignment == offset % alignment) {
      return;
    }
  }
  assert(r->align_count < r->align_cap);
  r->aligns[r->align_count++] = (cb_slot_align_t){
      .alignment = alignment, .command = index, .offset = offset};
}

// Reserves what put_ref needs for |ref| (NULL: a host pointer).
static bool ref_reserve(accel_command_buffer_t *cb,
                        const accel_command_buffer_ref_t *ref) {
  return ref == NULL || ref->buffer != NULL || slot_reserve(cb, ref->slot, 0);
}

// The word a ref puts in a command: the direct buffer's address (the
// buffer held), or 0 and a patch from the slot (its use noted).
static uint64_t put_ref(accel_command_buffer_t *cb,
                        const accel_command_buffer_ref_t *ref, uint16_t word,
                        bool write, uint64_t size) {
  if (ref->buffer != NULL) {
    accel_buffer_retain(ref->buffer);
    hold(cb, CB_HELD_BUFFER, ref->buffer);
    return ref->buffer->address + ref->offset;
  }
  add_patch(cb, word, CB_BASE_SLOT, ref->slot, ref->offset);
  slot_use(cb, ref->slot, cb->commands.n, write, ref->offset, size, 0);
  return 0;
}

// Checks command |a| and returns the error, or OK when it may be appended.
static accel_status_t begin(accel_command_buffer_t *cb, const cb_args_t *a) {
  ACCEL_CHECK_ARG(cb != NULL, "command_buffer (NULL)");
  if (cb->finalized) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "command buffer \"%s\" is finalized: command #%u (%s) "
                       "cannot be recorded",
                       cb->name, cb->commands.n, accel_cb_kind_name(a->kind));
  }
  return accel_cb_check(cb, cb->commands.n, a);
}

accel_status_t accel_command_buffer_host_call(accel_command_buffer_t *cb,
                                              accel_host_fn_t fn,
                                              void *user_data) {
  cb_args_t a = {.kind = CB_HOST_CALL, .fn = fn, .user_data = user_data};
  ACCEL_RETURN_IF_ERROR(begin(cb, &a));
  if (!reserve(cb, 0, 0)) {
    return out_of_memory(cb);
  }
  accel_cmd_t cmd = {.kind = ACCEL_CMD_HOST_CALL};
  cmd.host_call.fn = fn;
  cmd.host_call.user_data = user_data;
  push_command(cb, &cmd, CB_HOST_CALL);
  return ACCEL_OK;
}

accel_status_t accel_command_buffer_fill(accel_command_buffer_t *cb,
                                         const accel_command_buffer_ref_t *dst,
                                         uint64_t size_bytes, uint64_t pattern,
                                         uint32_t pattern_size) {
  cb_args_t a = {.kind = CB_FILL,
                 .dst = dst,
                 .size_bytes = size_bytes,
                 .pattern = pattern,
                 .pattern_size = pattern_size};
  ACCEL_RETURN_IF_ERROR(begin(cb, &a));
  if (!reserve(cb, 1, 1) || !ref_reserve(cb, dst)) {
    return out_of_memory(cb);
  }
  accel_cmd_t cmd = {.kind = ACCEL_CMD_FILL};
  cmd.fill.dst = put_ref(cb, dst, 2, true, size_bytes);
  cmd.fill.size_bytes = size_bytes;
  cmd.fill.pattern = pattern;
  cmd.fill.pattern_size = pattern_size;
  push_command(cb, &cmd, CB_FILL);
  return ACCEL_OK;
}

// Whether a copy of |size| goes to the copy engines (as stream copies do).
static bool copy_on_engines(const accel_command_buffer_t *cb, uint64_t size) {
  const accel_driver_t *drv = cb->device->driver;
  return size >= cb->device->runtime->stream_copy_dma_min_bytes &&
         drv->copy != NULL && drv->copy->engine_count(cb->device->drv) > 0;
}

// Appends a copy; |dst| or |src| NULL means the host pointer.
static accel_status_t record_copy(accel_command_buffer_t *cb,
                                  const cb_args_t *a) {
  ACCEL_RETURN_IF_ERROR(begin(cb, a));
  if (a->size_bytes == 0) {
    return ACCEL_OK;  // as the stream: nothing to run
  }
  if (!reserve(cb, 2, 2) || !ref_reserve(cb, a->dst) ||
      !ref_reserve(cb, a->src) ||
      !accel_cb_vec_grow((void **)&cb->dma_copies.v, &cb->dma_copies.cap,
                         cb->dma_copies.n + 1, sizeof(cb_dma_copy_t))) {
    return out_of_memory(cb);
  }
  uint32_t direction = a->dst == NULL   ? ACCEL_COPY_DEVICE_TO_HOST
                       : a->src == NULL ? ACCEL_COPY_HOST_TO_DEVICE
                                        : ACCEL_COPY_DEVICE_TO_DEVICE;
  accel_cmd_t cmd = {.kind = ACCEL_CMD_COPY, .flags = direction};
  cmd.copy.dst = (uint64_t)(uintptr_t)a->host_dst;
  cmd.copy.src = (uint64_t)(uintptr_t)a->host_src;
  cmd.copy.size_bytes = a->size_bytes;
  if (a->dst != NULL) {
    cmd.copy.dst = put_ref(cb, a->dst, 2, true, a->size_bytes);
  }
  if (a->src != NULL) {
    cmd.copy.src = put_ref(cb, a->src, 3, false, a->size_bytes);
  }
  if (copy_on_engines(cb, a->size_bytes)) {
    static const accel_command_buffer_ref_t host = {.slot = UINT32_MAX};
    cb->dma_copies.v[cb->dma_copies.n++] = (cb_dma_copy_t){
        .index = cb->commands.n,
        .dst = a->dst != NULL ? *a->dst : host,
        .src = a->src != NULL ? *a->src : host,
        .host_dst = a->host_dst,
        .host_src = a->host_src,
        .size_bytes = a->size_bytes};
  }
  push_command(cb, &cmd, CB_COPY);
  return ACCEL_OK;
}

accel_status_t accel_command_buffer_copy(accel_command_buffer_t *cb,
                                         const accel_command_buffer_ref_t *dst,
                                         const accel_command_buffer_ref_t *src,
                                         uint64_t size_bytes) {
  ACCEL_CHECK_ARG(dst != NULL, "dst (NULL)");
  ACCEL_CHECK_ARG(src != NULL, "src (NULL)");
  return record_copy(cb, &(cb_args_t){.kind = CB_COPY,
                                      .dst = dst,
                                      .src = src,
                                      .size_bytes = size_bytes});
}

accel_status_t accel_command_buffer_copy_from_host(
    accel_command_buffer_t *cb, const accel_command_buffer_ref_t *dst,
    const void *src, uint64_t size_bytes) {
  ACCEL_CHECK_ARG(dst != NULL, "dst (NULL)");
  ACCEL_CHECK_ARG(src != NULL || size_bytes == 0, "src (NULL)");
  return record_copy(cb, &(cb_args_t){.kind = CB_COPY,
                                      .dst = dst,
                                      .host_src = src,
                                      .size_bytes = size_bytes});
}

accel_status_t accel_command_buffer_copy_to_host(
    accel_command_buffer_t *cb, void *dst,
    const accel_command_buffer_ref_t *src, uint64_t size_bytes) {
  ACCEL_CHECK_ARG(dst != NULL || size_bytes == 0, "dst (NULL)");
  ACCEL_CHECK_ARG(src != NULL, "src (NULL)");
  return record_copy(cb, &(cb_args_t){.kind = CB_COPY,
                                      .src = src,
                                      .host_dst = dst,
                                      .size_bytes = size_bytes});
}

static accel_status_t record_semaphore(accel_command_buffer_t *cb,
                                       uint32_t kind, accel_semaphore_t *sem,
                                       uint64_t value) {
  cb_args_t a = {.kind = kind, .semaphore = sem, .value = value};
  ACCEL_RETURN_IF_ERROR(begin(cb, &a));
  if (!reserve(cb, 0, 1)) {
    return out_of_memory(cb);
  }
  accel_semaphore_retain(sem);
  hold(cb, CB_HELD_SEMAPHORE, sem);
  accel_cmd_t cmd = {.kind = (uint8_t)kind};
  if (kind == CB_SIGNAL) {
    cmd.signal.semaphore = sem->drv;
    cmd.signal.value = value;
  } else {
    cmd.wait.semaphore = sem->drv;
    cmd.wait.value = value;
  }
  push_command(cb, &cmd, kind);
  return ACCEL_OK;
}

accel_status_t accel_command_buffer_signal(accel_command_buffer_t *cb,
                                           accel_semaphore_t *semaphore,
                                           uint64_t value) {
  return record_semaphore(cb, CB_SIGNAL, semaphore, value);
}

accel_status_t accel_command_buffer_wait(accel_command_buffer_t *cb,
                                         accel_semaphore_t *semaphore,
                                         uint64_t value) {
  return record_semaphore(cb, CB_WAIT, semaphore, value);
}

// Appends an event record or wait: a SIGNAL or WAIT whose semaphore and
// value (and a record's timestamp slot) each execute takes from the event.
static accel_status_t record_event(accel_command_buffer_t *cb, uint32_t kind,
                                   accel_event_t *event) {
  cb_args_t a = {.kind = kind, .event = event};
  ACCEL_RETURN_IF_ERROR(begin(cb, &a));
  if (!reserve(cb, 3, 1) ||
      !accel_cb_vec_grow((void **)&cb->events.v, &cb->events.cap,
                         cb->events.n + 1, sizeof(accel_event_t *)) ||
      !accel_cb_vec_grow((void **)&cb->event_commands.v,
                         &cb->event_commands.cap, cb->event_commands.n + 1,
                         sizeof(uint32_t))) {
    return out_of_memory(cb);
  }
  accel_event_retain(event);
  hold(cb, CB_HELD_EVENT, event);
  uint32_t e = cb->events.n;
  cb->events.v[cb->events.n++] = event;
  cb->event_commands.v[cb->event_commands.n++] = cb->commands.n;
  bool wait = kind == CB_EVENT_WAIT;
  for (uint16_t w = 0; w < (wait ? 2 : 3); ++w) {
    add_patch(cb, (uint16_t)(2 + w), CB_BASE_EVENT, e * 3 + w, 0);
  }
  accel_cmd_t cmd = {.kind = wait ? ACCEL_CMD_WAIT : ACCEL_CMD_SIGNAL};
  push_command(cb, &cmd, kind);
  return ACCEL_OK;
}

accel_status_t accel_command_buffer_event_record(accel_command_buffer_t *cb,
                                                 accel_event_t *event) {
  return record_event(cb, CB_EVENT_RECORD, event);
}

accel_status_t accel_command_buffer_wait_event(accel_command_buffer_t *cb,
                                               accel_event_t *event) {
  return record_event(cb, CB_EVENT_WAIT, event);
}

// Reserves the slots the bindings of |desc| name (each may add an
// alignment need per binding).
static bool launch_reserve(accel_command_buffer_t *cb,
                           const accel_command_buffer_launch_desc_t *desc) {
  for (uint32_t i = 0; i < desc->binding_count; ++i) {
    const accel_command_buffer_ref_t *r = &desc->bindings[i];
    if (r->buffer == NULL &&
        !slot_reserve(cb, r->slot, desc->binding_count)) {
      return false;
    }
  }
  return true;
}

// Fills |l|'s bindings from |desc| (reserved), noting the slots' uses, and
// prebuilds its dispatch when nothing comes from the execute.
static void launch_bindings(accel_command_buffer_t *cb, cb_launch_t *l,
                            const accel_command_buffer_launch_desc_t *desc) {
  const accel_kernel_t *k = l->kernel;
  bool direct = !l->constants_from_execute;
  for (uint32_t i = 0; i < l->binding_count; ++i) {
    const accel_command_buffer_ref_t *r = &desc->bindings[i];
    const accel_kernel_binding_decl_t *d = &k->bindings[i];
    cb_binding_t *b = &l->bindings[i];
    b->access = d->access;
    if (r->buffer != NULL) {
      uint64_t length = 0;
      // Checked by accel_cb_check: this only computes the length.
      (void)accel_launch_check_binding(cb->device, k, i, r->buffer, r->offset,
                                       r->length, "", &length);
      accel_buffer_retain(r->buffer);
      hold(cb, CB_HELD_BUFFER, r->buffer);
      *b = (cb_binding_t){.slot = UINT32_MAX,
                          .access = d->access,
                          .address = r->buffer->address + r->offset,
                          .length = length};
      l->table[i] = (accel_kernel_binding_t){
          .data = (void *)(uintptr_t)b->address,
          .size_bytes = length,
          .access = d->access};
      continue;
    }
    direct = false;
    *b = (cb_binding_t){.slot = r->slot,
                        .access = d->access,
                        .address = r->offset,
                        .length = r->length};
    uint64_t need = r->length != 0 ? r->length : d->min_size_bytes;
    slot_use(cb, r->slot, l->index,
             (d->access & ACCEL_KERNEL_ACCESS_WRITE) != 0, r->offset, need,
             d->alignment);
  }
  l->prebuilt = direct;
  if (direct) {
    accel_launch_dispatch_init(k, l->workgroup_count, l->binding_count,
                               l->table, l->constants_size, l->constants,
                               &l->dispatch);
  }
}

// Describes the recorded launch |l| of a device kernel for the backend
// (accel_drv_recorded_launch_t): the kernel ABI's parameters as
// accel_launch gives them, with slot bindings and execute constants named
// by base (the indexes that depend on the slot count are set at finalize).
static void device_launch_init(accel_command_buffer_t *cb, cb_launch_t *l) {
  const accel_kernel_t *k = l->kernel;
  for (uint32_t i = 0; i < l->binding_count; ++i) {
    const cb_binding_t *b = &l->bindings[i];
    bool slot = b->slot != UINT32_MAX;
    l->drv_bindings[i] = (accel_drv_recorded_binding_t){
        .address_base = slot ? b->slot : ACCEL_DRV_BASE_NONE,
        // To the slot's end: fixed at finalize (see finalize_device_launch).
        .length_base = ACCEL_DRV_BASE_NONE,
        .address = b->address,
        .length = b->length};
    cb->exec_needed = cb->exec_needed || slot;
  }
  l->drv = (accel_drv_recorded_launch_t){
      .kernel = k->drv_kernel,
      .grid = {l->workgroup_count[0], l->workgroup_count[1],
               l->workgroup_count[2]},
      .block = {k->workgroup_size[0], k->workgroup_size[1],
                k->workgroup_size[2]},
      .binding_count = l->binding_count,
      .bindings = l->drv_bindings,
      .workspace_address = k->workspace_address,
      .workspace_bytes = k->workspace_address != 0 ? k->workspace_size : 0,
      .constants_size = l->constants_size,
      .constants_base = ACCEL_DRV_BASE_NONE,
      .constants_offset = l->constants_offset,
      .constants = l->constants};
  l->device = true;
  cb->exec_needed = cb->exec_needed || l->constants_from_execute;
}

// Sets the bases of a recorded device launch that depend on the slot count:
// the execute's constants block, and each slot's length, which the bases
// carry after the event records' (command_buffer_impl.h).
static void finalize_device_launch(const accel_command_buffer_t *cb,
                                   cb_launch_t *l, uint32_t lengths_at) {
  for (uint32_t i = 0; i < l->binding_count; ++i) {
    const cb_binding_t *b = &l->bindings[i];
    if (b->slot != UINT32_MAX && b->length == 0) {
      l->drv_bindings[i].length_base = lengths_at + b->slot;
    }
  }
  if (l->constants_from_execute && l->constants_size > 0) {
    l->drv.constants_base = cb->slots.n;
  }
}

accel_status_t accel_command_buffer_launch(
    accel_command_buffer_t *cb, accel_kernel_t *kernel,
    const accel_command_buffer_launch_desc_t *desc) {
  cb_args_t a = {.kind = CB_LAUNCH, .kernel = kernel, .launch = desc};
  ACCEL_RETURN_IF_ERROR(begin(cb, &a));
  const accel_kernel_t *k = kernel;
  uint32_t nb = desc->binding_count;
  size_t table_at = sizeof(cb_launch_t) + nb * sizeof(cb_binding_t);
  table_at = (table_at + 15) & ~(size_t)15;
  size_t drv_at = table_at + nb * sizeof(accel_kernel_binding_t);
  bool device = accel_cb_launch_is_device(cb->device, k);
  size_t constants_at =
      drv_at + (device ? nb * sizeof(accel_drv_recorded_binding_t) : 0);
  bool from_execute =
      (desc->flags & ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE) != 0;
  size_t total = constants_at + (from_execute ? 0 : desc->constants_size);
  cb_launch_t *l = calloc(1, total);
  if (l == NULL || !reserve(cb, 1, nb + 1) || !launch_reserve(cb, desc) ||
      !accel_cb_vec_grow((void **)&cb->launches.v, &cb->launches.cap,
                         cb->launches.n + 1, sizeof(cb_launch_t *))) {
    free(l);
    return out_of_memory(cb);
  }
  l->kernel = k;
  l->driver = cb->device->driver;
  l->cb = cb;
  l->index = cb->commands.n;
  l->binding_count = nb;
  l->constants_size = desc->constants_size;
  l->constants_from_execute = from_execute;
  l->constants_offset = from_execute ? desc->constants_offset : 0;
  memcpy(l->workgroup_count, desc->workgroup_count, sizeof(l->workgroup_count));
  l->table = (accel_kernel_binding_t *)((uint8_t *)l + table_at);
  if (!from_execute && desc->constants_size > 0) {
    l->constants = (uint8_t *)l + constants_at;
    memcpy(l->constants, desc->constants, desc->constants_size);
  }
  launch_bindings(cb, l, desc);
  accel_kernel_retain(kernel);
  hold(cb, CB_HELD_KERNEL, kernel);
  if (from_execute &&
      desc->constants_offset + desc->constants_size > cb->constants_size) {
    cb->constants_size = desc->constants_offset + desc->constants_size;
  }
  uint32_t launch_index = cb->launches.n;
  cb->launches.v[cb->launches.n++] = l;
  accel_cmd_t cmd = {.kind = ACCEL_CMD_LAUNCH};
  if (device) {
    l->drv_bindings = (accel_drv_recorded_binding_t *)((uint8_t *)l + drv_at);
    device_launch_init(cb, l);
    cmd.flags = ACCEL_CMD_LAUNCH_DEVICE;
    cmd.launch.payload = &l->drv;
  } else {
    cmd.launch.exec = accel_cb_launch_exec;
    add_patch(cb, 3, CB_BASE_ENTRIES, 0,
              (uint64_t)launch_index * sizeof(cb_entry_t));
  }
  push_command(cb, &cmd, CB_LAUNCH);
  return ACCEL_OK;
}

// ---- finalize -----------------------------------------------------------------

// The host calls of a buffer replayed through ordinary submits run through
// this, so that a failure names the buffer and the command as the backend's
// replay does.
static accel_status_t host_call_trampoline(void *user_data) {
  const cb_host_entry_t *e = user_data;
  accel_status_t st = e->fn(e->user_data);
  if (__builtin_expect(st == ACCEL_OK, 1)) {
    return ACCEL_OK;
  }
  char why[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof(why), "%s", accel_last_error());
  return accel_error(st, "command buffer \"%s\" command #%u (host_call) "
                     "failed%s%s",
                     e->cb->name, e->index, why[0] ? ": " : "", why);
}

// Points the host calls of |cb| at the trampoline (no recording: the
// commands are submitted as they are). Returns false when out of memory.
static bool route_host_calls(accel_command_buffer_t *cb) {
  uint32_t calls = 0;
  for (uint32_t i = 0; i < cb->commands.n; ++i) {
    calls += cb->kinds.v[i] == CB_HOST_CALL;
  }
  if (calls == 0) {
    return true;
  }
  cb->host_entries = malloc(calls * sizeof(cb_host_entry_t));
  if (cb->host_entries == NULL) {
    return false;
  }
  uint32_t j = 0;
  for (uint32_t i = 0; i < cb->commands.n; ++i) {
    if (cb->kinds.v[i] != CB_HOST_CALL) {
      continue;
    }
    accel_cmd_t *c = &cb->commands.v[i];
    cb->host_entries[j] = (cb_host_entry_t){.fn = c->host_call.fn,
                                            .user_data = c->host_call.user_data,
                                            .cb = cb,
                                            .index = i};
    c->host_call.fn = host_call_trampoline;
    c->host_call.user_data = &cb->host_entries[j++];
  }
  return true;
}

// The base index of patch |p| once the slot count is known.
static uint16_t base_of(const accel_command_buffer_t *cb, const cb_patch_t *p) {
  uint32_t slots = cb->slots.n;
  switch (p->base_class) {
    case CB_BASE_SLOT:
      return (uint16_t)p->base_index;
    case CB_BASE_CONSTANTS:
      return (uint16_t)slots;
    case CB_BASE_ENTRIES:
      return (uint16_t)(slots + 1);
    default:
      return (uint16_t)(slots + 2 + p->base_index);
  }
}

// Bytes of one execute record: the record, then its arrays (see cb_exec_t).
static size_t exec_bytes(const accel_command_buffer_t *cb) {
  size_t n = (sizeof(cb_exec_t) + 15) & ~(size_t)15;
  n += cb->base_count * sizeof(uint64_t);  // the slots' lengths included
  n += cb->slots.n * sizeof(accel_buffer_t *);
  n += cb->events.n * sizeof(accel_semaphore_t *);
  n = (n + 15) & ~(size_t)15;
  n += cb->launches.n * sizeof(cb_entry_t);
  return n + cb->constants_size;
}

accel_status_t accel_command_buffer_finalize(accel_command_buffer_t *cb) {
  ACCEL_CHECK_ARG(cb != NULL, "command_buffer (NULL)");
  if (cb->finalized) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "command buffer \"%s\" is already finalized", cb->name);
  }
  uint32_t n = cb->commands.n;
  accel_drv_patch_t *patches =
      malloc((cb->patches.n + 1) * sizeof(accel_drv_patch_t));
  uint32_t *starts = malloc((n + 1) * sizeof(uint32_t));
  if (patches == NULL || starts == NULL) {
    free(patches);
    free(starts);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "command buffer \"%s\": cannot finalize %u commands",
                       cb->name, n);
  }
  uint32_t p = 0;
  for (uint32_t i = 0; i < n; ++i) {
    starts[i] = p;
    for (; p < cb->patches.n && cb->patches.v[p].patch.command == i; ++p) {
      patches[p] = cb->patches.v[p].patch;
      patches[p].base = base_of(cb, &cb->patches.v[p]);
    }
  }
  starts[n] = p;
  // Bases: slots, constants, launch entries, three per event, then each
  // slot's length (read by recorded device launches only).
  uint32_t lengths_at = cb->slots.n + 2 + 3 * cb->events.n;
  uint32_t base_count = lengths_at + cb->slots.n;
  for (uint32_t i = 0; i < cb->launches.n; ++i) {
    if (cb->launches.v[i]->device) {
      finalize_device_launch(cb, cb->launches.v[i], lengths_at);
    }
  }
  const accel_drv_queue_ops_t *qops = cb->device->driver->queue;
  accel_drv_recording_t *recording = NULL;
  if (qops->recording_create == NULL && !route_host_calls(cb)) {
    free(patches);
    free(starts);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "command buffer \"%s\": cannot finalize %u commands",
                       cb->name, n);
  }
  if (qops->recording_create != NULL && n > 0) {
    // Event records are SIGNALs to the queue.
    accel_drv_recording_params_t params = {
        .commands = cb->commands.v,
        .command_count = n,
        .patch_count = cb->patches.n,
        .patches = patches,
        .base_count = base_count,
        .name = cb->name};
    accel_status_t st =
        qops->recording_create(cb->device->drv, &params, &recording);
    if (st != ACCEL_OK) {
      free(patches);
      free(starts);
      return accel_error_context(st, "finalizing command buffer \"%s\"",
                                 cb->name);
    }
  }
  cb->drv_patches = patches;
  cb->drv_patches_count = cb->patches.n;
  cb->patch_starts = starts;
  cb->recording = recording;
  cb->base_count = base_count;
  cb->exec_bytes = exec_bytes(cb);
  cb->finalized = true;
  return ACCEL_OK;
}
