// Stream-ordered allocation (accel_buffer_alloc_async/free_async): the
// stream's checks and its free point; the pool itself (lib/mem/pool.c) knows
// only (semaphore, value) timepoints, here the stream's completion timeline.
#include "mem/mem_internal.h"
#include "stream/stream_impl.h"

accel_status_t accel_buffer_alloc_async(accel_stream_t *stream,
                                        const accel_buffer_desc_t *desc,
                                        accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  uint64_t done = 0;
  ACCEL_RETURN_IF_ERROR(stream->device->driver->sync->query(
      stream->completion->drv, &done));
  // Fast path: a plain device buffer from the default pool.
  accel_mem_device_t *mem =
      atomic_load_explicit(&stream->device->mem, memory_order_acquire);
  if (mem != NULL && accel_buffer_desc_is_plain(desc, ACCEL_MEM_MAX_BYTES)) {
    accel_status_t st =
        accel_mem_async_alloc(mem->async, stream->completion, desc, 256, 0,
                              out_buffer);
    if (__builtin_expect(st != ACCEL_OK, 0)) {
      return accel_error_context(st, "alloc async on %s",
                                 stream->device->info.id);
    }
    return ACCEL_OK;
  }
  return accel_mem_alloc_async_checked(stream->device, stream->completion, desc,
                                       out_buffer);
}

// Runs when the stream reaches a deferred free: nothing to do, the command
// drops the buffer's reference as it completes.
static accel_status_t deferred_free_fn(void *user_data) { return ACCEL_OK; }

accel_status_t accel_buffer_free_async(accel_stream_t *stream,
                                       accel_buffer_t *buffer) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  if (buffer->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "free async: buffer is on %s but the stream is on %s",
                       buffer->device->info.id, stream->device->info.id);
  }
  if (buffer->allocator == NULL ||
      buffer->allocator->type != ACCEL_MEMPOOL_TYPE_STREAM_ORDERED) {
    // Not pool memory: defer the owner's reference behind the stream's
    // work with a command that holds it.
    if (buffer->allocator != NULL) {
      ACCEL_RETURN_IF_ERROR(accel_mem_owner_free(buffer, "free async"));
    }
    accel_cmd_t cmd = {.kind = ACCEL_CMD_HOST_CALL};
    cmd.host_call.fn = deferred_free_fn;
    cmd.refs[0] = &buffer->object;
    return accel_stream_submit(stream, &cmd);
  }
  ACCEL_RETURN_IF_ERROR(accel_mem_owner_free(buffer, "free async"));
  // Pending commands hold the record: move the memory to a fresh record that
  // the pool can hand out at once (stream order protects the commands on
  // this stream), and leave the old record to them.
  // Acquire: pairs with the releases of commands that dropped their refs.
  if (atomic_load_explicit(&buffer->object.ref_count, memory_order_acquire) >
      1) {
    accel_buffer_t *held = buffer;
    accel_status_t st = accel_mem_async_detach(held, &buffer);
    if (st == ACCEL_OK) {
      accel_object_release(&held->object);  // the owner's reference
    } else {
      // Keep the owner's reference as a plain deferred free.
      accel_cmd_t cmd = {.kind = ACCEL_CMD_HOST_CALL};
      cmd.host_call.fn = deferred_free_fn;
      cmd.refs[0] = &buffer->object;
      return accel_stream_submit(stream, &cmd);
    }
  }
  // The free point: the last command submitted to the stream so far.
  // Relaxed: last_seq is a target on the completion timeline; the pool
  // queries the semaphore (acquire) before any other stream reuses the block.
  accel_mem_async_free_at(
      buffer, stream->completion,
      atomic_load_explicit(&stream->last_seq, memory_order_relaxed));
  return ACCEL_OK;
}
