// Explicit pools (accel_mempool_*) and the stream-ordered entry points.
#include <stdio.h>
#include <stdlib.h>

#include "mem/mem_internal.h"
#include "stream/semaphore_impl.h"

accel_status_t accel_mempool_create(accel_device_t *device,
                                    const accel_mempool_desc_t *desc,
                                    accel_mempool_t **out_pool) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_pool != NULL, "out_pool (NULL)");
  if (desc->struct_size < sizeof(accel_mempool_desc_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool desc: struct_size %u is below %zu",
                       desc->struct_size, sizeof(accel_mempool_desc_t));
  }
  accel_mempool_desc_t d = *desc;
  if (d.type > ACCEL_MEMPOOL_TYPE_STREAM_ORDERED) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool desc: unknown type %u", d.type);
  }
  if (d.type != ACCEL_MEMPOOL_TYPE_PAGED &&
      (d.page_size_bytes != 0 || d.block_size_bytes != 0)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool desc: page and block sizes apply to paged "
                       "pools only");
  }
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  char name[48];
  pthread_mutex_lock(&mem->lock);
  uint32_t n = mem->pool_counter++;
  pthread_mutex_unlock(&mem->lock);
  static const char *const k_prefix[] = {"slab", "paged", "stream-ordered"};
  if (d.name == NULL || d.name[0] == '\0') {
    snprintf(name, sizeof(name), "%s%u", k_prefix[d.type], n);
    d.name = name;
  }
  accel_mem_allocator_t *a = NULL;
  accel_status_t st;
  switch (d.type) {
    case ACCEL_MEMPOOL_TYPE_SLAB:
      st = accel_mem_slab_create(mem, &d, &a);
      break;
    case ACCEL_MEMPOOL_TYPE_PAGED:
      st = accel_mem_paged_create(mem, &d, &a);
      break;
    default:
      st = accel_mem_async_create(mem, &d, &a);
      break;
  }
  if (st != ACCEL_OK) {
    return st;
  }
  a->is_pool = true;
  *out_pool = (accel_mempool_t *)a;
  return ACCEL_OK;
}

accel_status_t accel_mempool_destroy(accel_mempool_t *pool) {
  if (pool == NULL) {
    return ACCEL_OK;
  }
  accel_mem_allocator_t *a = &pool->base;
  if (!a->is_pool) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool destroy: \"%s\" is a device default "
                       "allocator, not a pool you created",
                       a->name);
  }
  if (a->vt->busy != NULL && a->vt->busy(a)) {
    accel_mem_stats_t s = {.struct_size = sizeof(s)};
    accel_mempool_stats(pool, &s);
    return accel_error(ACCEL_ERROR_BUSY,
                       "mempool destroy: \"%s\" still has %llu live buffers "
                       "(%llu bytes)",
                       a->name, (unsigned long long)s.live_count,
                       (unsigned long long)s.bytes_in_use);
  }
  accel_mem_unregister(a->mem, a);
  a->vt->destroy(a);
  return ACCEL_OK;
}

accel_status_t accel_mempool_trim(accel_device_t *device,
                                  accel_mempool_t *pool, uint64_t keep_bytes) {
  if (pool != NULL) {
    if (pool->base.vt->trim != NULL) {
      pool->base.vt->trim(&pool->base, keep_bytes);
    }
    return ACCEL_OK;
  }
  ACCEL_CHECK_ARG(device != NULL, "device and pool (both NULL)");
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  // Stream-ordered pools first: what they give back lands in the others.
  for (int pass = 0; pass < 2; ++pass) {
    pthread_mutex_lock(&mem->lock);
    for (accel_mem_allocator_t *a = mem->allocators; a != NULL; a = a->next) {
      bool async = a->type == ACCEL_MEMPOOL_TYPE_STREAM_ORDERED;
      if (a->vt->trim != NULL && async == (pass == 0)) {
        a->vt->trim(a, keep_bytes);
      }
    }
    pthread_mutex_unlock(&mem->lock);
  }
  accel_mem_pages_trim(mem, keep_bytes);
  return ACCEL_OK;
}

accel_status_t accel_buffer_alloc_async(accel_stream_t *stream,
                                        const accel_buffer_desc_t *desc,
                                        accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  uint64_t done = 0;
  ACCEL_RETURN_IF_ERROR(stream->device->driver->semaphore_query(
      stream->completion->drv, &done));
  // Fast path: a plain device buffer from the default pool with a current
  // descriptor (the same checks as the general path for this case).
  accel_mem_device_t *mem =
      atomic_load_explicit(&stream->device->mem, memory_order_acquire);
  if (mem != NULL && desc->struct_size >= sizeof(*desc) &&
      desc->size_bytes - 1 < (1ull << 56) && desc->alignment <= 256 &&
      (desc->alignment & (desc->alignment - 1)) == 0 &&
      (desc->kind | desc->flags | desc->reserved0 | desc->reserved1) == 0 &&
      desc->pool == NULL && desc->tag == NULL && desc->max_size_bytes == 0) {
    accel_status_t st =
        accel_mem_async_alloc(mem->async, stream, desc, 256, 0, out_buffer);
    if (__builtin_expect(st != ACCEL_OK, 0)) {
      return accel_error_context(st, "alloc async on %s",
                                 stream->device->info.id);
    }
    return ACCEL_OK;
  }
  return accel_mem_alloc_async_checked(stream->device, stream, desc,
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
  // Relaxed: last_seq is a target on the completion timeline; the retained
  // semaphore is queried (acquire) before any other stream reuses the block.
  buffer->free_seq =
      atomic_load_explicit(&stream->last_seq, memory_order_relaxed);
  accel_object_t *mine = &stream->completion->object;
  if (buffer->free_timeline != mine) {
    accel_object_retain(mine);
    accel_object_release(buffer->free_timeline);
    buffer->free_timeline = mine;
  }
  // Sole holder: drop without a locked instruction (nobody can retain).
  // Acquire: pairs with the release of the last other holder's drop.
  if (atomic_load_explicit(&buffer->object.ref_count, memory_order_acquire) ==
      1) {
    atomic_store_explicit(&buffer->object.ref_count, 0, memory_order_relaxed);
    buffer->object.destroy(&buffer->object);
    return ACCEL_OK;
  }
  accel_object_release(&buffer->object);
  return ACCEL_OK;
}
