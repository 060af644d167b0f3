// Command-buffer validation, in one place: at record time one checker per
// command kind (each calling the check of the module that owns the concept:
// lib/mem's accel_buffer_check_use, lib/stream's fill rules, lib/abi's
// launch checks), and at execute time the check of a binding table and
// constants block against every use recorded.
#include <stdio.h>
#include <string.h>

#include "abi/command_buffer_impl.h"
#include "abi/launch_impl.h"
#include "core/error.h"
#include "stream/event_impl.h"
#include "stream/stream_impl.h"
#include "sync/semaphore_impl.h"

const char *accel_cb_kind_name(uint32_t kind) {
  return kind == CB_EVENT_RECORD ? "event_record"
         : kind == CB_EVENT_WAIT ? "wait_event"
                                 : accel_cmd_kind_name(kind);
}

// "command #I (KIND): " for messages.
static void prefix(char *buf, size_t size, uint32_t index, uint32_t kind) {
  snprintf(buf, size, "command #%u (%s): ", index, accel_cb_kind_name(kind));
}

// What every ref must be, buffer or slot: reserved0 zero, a slot in range.
static accel_status_t check_ref_shape(const char *pre, const char *what,
                                      const accel_command_buffer_ref_t *ref) {
  if (ref->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s%s: reserved0 is %u, must be 0", pre, what,
                       ref->reserved0);
  }
  if (ref->buffer == NULL && ref->slot >= ACCEL_CB_MAX_SLOTS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s%s: binding slot %u is beyond the %u slots a "
                       "buffer may use",
                       pre, what, ref->slot, ACCEL_CB_MAX_SLOTS);
  }
  return ACCEL_OK;
}

// A buffer range a fill or copy names: a slot (checked at execute) or a
// buffer of the buffer's device, through lib/mem's one check of a use.
static accel_status_t check_ref(const accel_command_buffer_t *cb,
                                const char *pre,
                                const accel_command_buffer_ref_t *ref,
                                uint64_t size, uint32_t use,
                                const char *what) {
  ACCEL_RETURN_IF_ERROR(check_ref_shape(pre, what, ref));
  if (ref->buffer == NULL) {
    if (ref->offset + size < ref->offset) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s%s: offset %llu + size %llu overflows", pre, what,
                         (unsigned long long)ref->offset,
                         (unsigned long long)size);
    }
    return ACCEL_OK;
  }
  if (ref->buffer->device != cb->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s%s buffer is on %s but the command buffer is on %s",
                       pre, what, ref->buffer->device->info.id,
                       cb->device->info.id);
  }
  char w[128];
  snprintf(w, sizeof(w), "%s%s", pre, what);
  return accel_buffer_check_use(ref->buffer, ref->offset, size, use, w);
}

static accel_status_t check_host_call(const accel_command_buffer_t *cb,
                                      const char *pre, const cb_args_t *a) {
  (void)cb;
  if (a->fn == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%sfn is NULL", pre);
  }
  return ACCEL_OK;
}

static accel_status_t check_fill(const accel_command_buffer_t *cb,
                                 const char *pre, const cb_args_t *a) {
  if (a->dst == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%sdst is NULL", pre);
  }
  ACCEL_RETURN_IF_ERROR(check_ref(cb, pre, a->dst, a->size_bytes,
                                  ACCEL_BUFFER_USE_WRITE, "fill"));
  return accel_stream_check_fill(a->dst->offset, a->size_bytes, a->pattern,
                                 a->pattern_size, pre);
}

static accel_status_t check_copy(const accel_command_buffer_t *cb,
                                 const char *pre, const cb_args_t *a) {
  if (a->dst != NULL) {
    ACCEL_RETURN_IF_ERROR(check_ref(cb, pre, a->dst, a->size_bytes,
                                    ACCEL_BUFFER_USE_WRITE,
                                    "copy destination"));
  }
  if (a->src != NULL) {
    ACCEL_RETURN_IF_ERROR(check_ref(cb, pre, a->src, a->size_bytes,
                                    ACCEL_BUFFER_USE_READ, "copy source"));
  }
  return ACCEL_OK;
}

static accel_status_t check_semaphore(const accel_command_buffer_t *cb,
                                      const char *pre, const cb_args_t *a) {
  if (a->semaphore == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%ssemaphore is NULL",
                       pre);
  }
  if (a->semaphore->device != cb->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%ssemaphore is on %s but the command buffer is on %s",
                       pre, a->semaphore->device->info.id, cb->device->info.id);
  }
  return ACCEL_OK;
}

static accel_status_t check_event_record(const accel_command_buffer_t *cb,
                                         const char *pre, const cb_args_t *a) {
  if (a->event == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%sevent is NULL", pre);
  }
  const accel_device_t *dev = accel_event_device_of(a->event);
  if (dev != cb->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sevent is on %s but the command buffer is on %s", pre,
                       dev->info.id, cb->device->info.id);
  }
  if (cb->events.n >= ACCEL_CB_MAX_EVENTS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sa command buffer records at most %u event records "
                       "and waits",
                       pre, ACCEL_CB_MAX_EVENTS);
  }
  return ACCEL_OK;
}

// A recorded launch runs a host kernel on a device that runs them, or a
// kernel of the device's own code objects (CUDA) on a backend that keeps
// recordings (recording_create: the commands become graph nodes).
accel_status_t accel_cb_check_launch_target(const accel_command_buffer_t *cb,
                                            const char *pre,
                                            const accel_kernel_t *k) {
  const accel_device_t *dev = cb->device;
  if (!accel_cb_launch_is_device(dev, k)) {
    return accel_launch_check_target(dev, k);
  }
  if (dev->driver->queue->recording_create == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "%slaunch of \"%s\": %s keeps no recordings, so its "
                       "kernels cannot be recorded",
                       pre, k->name, dev->info.id);
  }
  return ACCEL_OK;
}

static accel_status_t check_launch(const accel_command_buffer_t *cb,
                                   const char *pre, const cb_args_t *a) {
  const accel_command_buffer_launch_desc_t *d = a->launch;
  const accel_kernel_t *k = a->kernel;
  if (k == NULL || d == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%s%s is NULL", pre,
                       k == NULL ? "kernel" : "desc");
  }
  if (d->struct_size < sizeof(*d)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%slaunch desc: struct_size %u is too small (%zu)", pre,
                       d->struct_size, sizeof(*d));
  }
  ACCEL_RETURN_IF_ERROR(accel_cb_check_launch_target(cb, pre, k));
  bool from_execute =
      (d->flags & ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE) != 0;
  if ((d->flags & ~(uint32_t)ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE) !=
      0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sunknown launch flags 0x%x", pre, d->flags);
  }
  if (from_execute ? d->constants_offset % 4 != 0 : d->constants_offset != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sconstants_offset %u must be a multiple of 4 with "
                       "constants from the execute, else 0",
                       pre, d->constants_offset);
  }
  ACCEL_RETURN_IF_ERROR(accel_launch_check_shape(
      k, d->workgroup_count, d->binding_count, d->constants_size,
      d->bindings != NULL, from_execute || d->constants != NULL, pre));
  for (uint32_t i = 0; i < d->binding_count; ++i) {
    const accel_command_buffer_ref_t *r = &d->bindings[i];
    char what[32];
    snprintf(what, sizeof(what), "binding %u", i);
    ACCEL_RETURN_IF_ERROR(check_ref_shape(pre, what, r));
    if (r->buffer == NULL) {
      if (r->length != 0 && r->length < k->bindings[i].min_size_bytes) {
        return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                           "%slaunch of \"%s\": binding %u: %llu bytes bound, "
                           "the kernel declares at least %llu",
                           pre, k->name, i, (unsigned long long)r->length,
                           (unsigned long long)k->bindings[i].min_size_bytes);
      }
      continue;
    }
    uint64_t length = 0;
    ACCEL_RETURN_IF_ERROR(accel_launch_check_binding(
        cb->device, k, i, r->buffer, r->offset, r->length, pre, &length));
  }
  return ACCEL_OK;
}

typedef accel_status_t (*cb_checker_t)(const accel_command_buffer_t *cb,
                                       const char *prefix, const cb_args_t *a);

static const cb_checker_t k_checkers[CB_KIND_COUNT] = {
    [CB_HOST_CALL] = check_host_call, [CB_FILL] = check_fill,
    [CB_COPY] = check_copy,           [CB_SIGNAL] = check_semaphore,
    [CB_WAIT] = check_semaphore,      [CB_LAUNCH] = check_launch,
    [CB_EVENT_RECORD] = check_event_record,
    [CB_EVENT_WAIT] = check_event_record,
};

accel_status_t accel_cb_check(const accel_command_buffer_t *cb, uint32_t index,
                              const cb_args_t *a) {
  char pre[64];
  prefix(pre, sizeof(pre), index, a->kind);
  if (index == UINT32_MAX) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "%scommand buffer \"%s\" is full", pre, cb->name);
  }
  return k_checkers[a->kind](cb, pre, a);
}

// ---- execute time ---------------------------------------------------------------

// Slot |s| bound to |b|: checked against what the recorded uses need.
static accel_status_t check_slot(const accel_command_buffer_t *cb,
                                 const accel_stream_t *stream, uint32_t s,
                                 const accel_command_buffer_binding_t *b,
                                 uint64_t *out_length) {
  const cb_slot_req_t *r = &cb->slots.v[s];
  if (!r->used) {
    *out_length = 0;
    return ACCEL_OK;  // a slot no command names: anything goes
  }
  if (b->buffer == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": binding slot %u has no buffer "
                       "(command #%u uses it)",
                       cb->name, s, r->first_command);
  }
  if (b->buffer->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": binding slot %u is a buffer on %s, "
                       "the stream is on %s",
                       cb->name, s, b->buffer->device->info.id,
                       stream->device->info.id);
  }
  if (b->offset > b->buffer->size_bytes) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": binding slot %u offset %llu is "
                       "beyond the buffer's %llu bytes",
                       cb->name, s, (unsigned long long)b->offset,
                       (unsigned long long)b->buffer->size_bytes);
  }
  uint64_t length =
      b->length != 0 ? b->length : b->buffer->size_bytes - b->offset;
  uint32_t use = r->written ? ACCEL_BUFFER_USE_WRITE : ACCEL_BUFFER_USE_READ;
  if (!accel_buffer_use_allowed(b->buffer, b->offset, length, use)) {
    // The message is formatted only for a refusal: on every execute it
    // would cost more than the check.
    char what[160];
    int n = snprintf(what, sizeof(what), "execute of \"%s\": binding slot %u",
                     cb->name, s);
    if (r->written && n > 0 && (size_t)n < sizeof(what)) {
      snprintf(what + n, sizeof(what) - (size_t)n, " (written by command #%u)",
               r->write_command);
    }
    return accel_buffer_check_use(b->buffer, b->offset, length, use, what);
  }
  if (length < r->min_length) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": binding slot %u has %llu bytes, "
                       "command #%u needs %llu",
                       cb->name, s, (unsigned long long)length,
                       r->min_length_command,
                       (unsigned long long)r->min_length);
  }
  uint64_t address = b->buffer->address + b->offset;
  for (uint32_t i = 0; i < r->align_count; ++i) {
    const cb_slot_align_t *a = &r->aligns[i];
    if ((address + a->offset) % a->alignment != 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "execute of \"%s\": binding slot %u at 0x%llx: "
                         "command #%u needs offset %llu of it %u-byte "
                         "aligned",
                         cb->name, s, (unsigned long long)address, a->command,
                         (unsigned long long)a->offset, a->alignment);
    }
  }
  *out_length = length;
  return ACCEL_OK;
}

accel_status_t accel_cb_check_execute(
    const accel_command_buffer_t *cb, const accel_stream_t *stream,
    const accel_command_buffer_execute_desc_t *desc, uint64_t *out_lengths) {
  uint32_t slots = cb->slots.n;
  if (desc == NULL) {
    if (slots > 0 || cb->constants_size > 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "execute of \"%s\": no desc, the buffer needs %u "
                         "binding slots and %u constant bytes",
                         cb->name, slots, cb->constants_size);
    }
    return ACCEL_OK;
  }
  if (desc->struct_size < sizeof(*desc) || desc->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": desc struct_size %u (needs %zu) or "
                       "reserved0 %u (must be 0)",
                       cb->name, desc->struct_size, sizeof(*desc),
                       desc->reserved0);
  }
  if (desc->binding_count < slots ||
      (slots > 0 && desc->bindings == NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": %u bindings given, the buffer "
                       "uses %u slots",
                       cb->name, desc->bindings ? desc->binding_count : 0,
                       slots);
  }
  if (desc->constants_size < cb->constants_size ||
      (cb->constants_size > 0 && desc->constants == NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "execute of \"%s\": %u constant bytes given, the "
                       "buffer's launches read %u",
                       cb->name, desc->constants ? desc->constants_size : 0,
                       cb->constants_size);
  }
  for (uint32_t s = 0; s < slots; ++s) {
    ACCEL_RETURN_IF_ERROR(
        check_slot(cb, stream, s, &desc->bindings[s], &out_lengths[s]));
  }
  return ACCEL_OK;
}
