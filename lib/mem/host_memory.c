// Pinned host memory: page-aligned anonymous memory placed on a NUMA node
// (libnuma when the build has it) and pinned through the driver's
// host_register (mlock on the host device, cuMemHostRegister on CUDA); and
// registration of memory the caller already owns.
#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "accel_config.h"
#include "mem/mem_internal.h"

#if ACCEL_HAVE_NUMA
#include <numa.h>
#endif

typedef struct host_alloc {
  accel_mempool_t pool;  // first
  uint64_t page_size;
} host_alloc_t;

// Binds [p, p + size) to |node| before first touch. -1 leaves the kernel's
// default policy.
static accel_status_t place_on_node(void *p, uint64_t size, int32_t node) {
  if (node < 0) {
    return ACCEL_OK;
  }
#if ACCEL_HAVE_NUMA
  if (numa_available() < 0) {
    if (node == 0) {
      return ACCEL_OK;  // no NUMA support: everything is node 0
    }
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "pinned host memory: NUMA node %d requested but the "
                       "kernel has no NUMA support",
                       node);
  }
  if (node > numa_max_node() || !numa_bitmask_isbitset(numa_all_nodes_ptr,
                                                       (unsigned)node)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "pinned host memory: NUMA node %d does not exist "
                       "(nodes 0-%d)",
                       node, numa_max_node());
  }
  numa_tonode_memory(p, size, node);
  return ACCEL_OK;
#else
  long nodes = 1;
  if (node >= nodes) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "pinned host memory: NUMA node %d requested but accel "
                       "was built without libnuma",
                       node);
  }
  return ACCEL_OK;
#endif
}

accel_status_t accel_mem_host_alloc(accel_mem_allocator_t *a, uint64_t size,
                                    int32_t numa_node, uint32_t tag,
                                    accel_buffer_t **out) {
  host_alloc_t *h = (host_alloc_t *)a;
  accel_device_t *dev = a->device;
  if (dev->driver->memory->host_register == NULL) {
    accel_mem_counters_fail(&a->counters);
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "pinned host memory: backend \"%s\" cannot register "
                       "host memory",
                       dev->driver->name);
  }
  uint64_t mapped = accel_mem_round_up(size, h->page_size);
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &buf));
  accel_status_t st = ACCEL_OK;
  void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "pinned host memory: mmap of %llu bytes failed: %s",
                     (unsigned long long)mapped, strerror(errno));
    goto err_free_record;
  }
  st = place_on_node(p, mapped, numa_node);
  if (st != ACCEL_OK) {
    goto err_unmap;
  }
  uint64_t address = 0;
  // Registration pins (and so faults in) the pages: after placement.
  st = dev->driver->memory->host_register(dev->drv, p, mapped, &address);
  if (st != ACCEL_OK) {
    goto err_unmap;
  }
  accel_mem_record_init(buf, a, address, size, ACCEL_MEMORY_KIND_HOST_PINNED);
  memset(&buf->u, 0, sizeof(buf->u));
  buf->u.host.host_ptr = p;
  buf->u.host.mapped_bytes = mapped;
  buf->u.host.user_owned = false;
  buf->reserved_bytes = mapped;
  buf->tag_index = tag;
  accel_mem_counters_alloc(&a->counters, size);
  accel_mem_counters_reserve(&a->counters, (int64_t)mapped);
  *out = buf;
  return ACCEL_OK;

err_unmap:
  munmap(p, mapped);
err_free_record:
  accel_mem_record_free(a->mem, buf);
  accel_mem_counters_fail(&a->counters);
  return accel_error_context(st, "pinned host alloc of %llu bytes on node %d",
                             (unsigned long long)size, numa_node);
}

accel_status_t accel_mem_host_register(accel_mem_allocator_t *a, void *ptr,
                                       uint64_t size, accel_buffer_t **out) {
  accel_device_t *dev = a->device;
  if (dev->driver->memory->host_register == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "host register: backend \"%s\" cannot register host "
                       "memory",
                       dev->driver->name);
  }
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &buf));
  uint64_t address = 0;
  accel_status_t st = dev->driver->memory->host_register(dev->drv, ptr, size, &address);
  if (st != ACCEL_OK) {
    accel_mem_record_free(a->mem, buf);
    accel_mem_counters_fail(&a->counters);
    return st;
  }
  accel_mem_record_init(buf, a, address, size, ACCEL_MEMORY_KIND_HOST_PINNED);
  memset(&buf->u, 0, sizeof(buf->u));
  buf->u.host.host_ptr = ptr;
  buf->u.host.mapped_bytes = size;
  buf->u.host.user_owned = true;
  buf->reserved_bytes = size;
  accel_mem_counters_alloc(&a->counters, size);
  accel_mem_counters_reserve(&a->counters, (int64_t)size);
  *out = buf;
  return ACCEL_OK;
}

static void host_free(accel_mem_allocator_t *a, accel_buffer_t *buf) {
  accel_device_t *dev = a->device;
  dev->driver->memory->host_unregister(dev->drv, buf->u.host.host_ptr,
                               buf->u.host.mapped_bytes);
  if (!buf->u.host.user_owned) {
    // Anonymous pages go back to the kernel, which zeroes them for the next
    // owner.
    munmap(buf->u.host.host_ptr, buf->u.host.mapped_bytes);
  }
  accel_mem_counters_reserve(&a->counters,
                             -(int64_t)buf->u.host.mapped_bytes);
  uint64_t size = buf->size_bytes;
  accel_mem_record_free(a->mem, buf);
  accel_mem_counters_free(&a->counters, size);  // last: see its comment
}

static void host_destroy(accel_mem_allocator_t *a) { free(a); }

static bool host_busy(accel_mem_allocator_t *a) {
  // Acquire: pairs with the release in accel_mem_counters_free.
  return atomic_load_explicit(&a->counters.live_count,
                              memory_order_acquire) > 0;
}

static const accel_mem_allocator_vtable_t k_host_vtable = {
    .destroy = host_destroy,
    .free = host_free,
    .busy = host_busy,
};

accel_status_t accel_mem_host_create(accel_mem_device_t *mem,
                                     accel_mem_allocator_t **out) {
  host_alloc_t *h = calloc(1, sizeof(*h));
  if (h == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "pinned host allocator: cannot allocate %zu bytes",
                       sizeof(*h));
  }
  long page = sysconf(_SC_PAGESIZE);
  h->page_size = page > 0 ? (uint64_t)page : 4096;
  accel_mem_allocator_t *a = &h->pool.base;
  a->vt = &k_host_vtable;
  a->mem = mem;
  a->device = mem->device;
  a->type = ACCEL_MEM_TYPE_HOST_PINNED;
  snprintf(a->name, sizeof(a->name), "host-pinned");
  accel_mem_register(mem, a);
  *out = a;
  return ACCEL_OK;
}

// Checks that every page of [ptr, ptr + size) is mapped, with mincore
// (ENOMEM for a page that is not), in batches of a stack vector; it never
// faults pages in. A registration of memory that is not there must fail
// here, not only when mlock does (sanitizer builds make mlock a no-op).
static accel_status_t check_mapped(void *ptr, uint64_t size, uint64_t ps) {
  unsigned char vec[4096];
  uint64_t batch = sizeof(vec) * ps;
  for (uint64_t off = 0; off < size; off += batch) {
    uint64_t n = size - off < batch ? size - off : batch;
    if (mincore((char *)ptr + off, n, vec) != 0) {
      int e = errno;
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "host register: [%p, +%llu) is not all mapped "
                         "memory (%s in the %llu bytes from offset %llu)",
                         ptr, (unsigned long long)size, strerror(e),
                         (unsigned long long)n, (unsigned long long)off);
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_host_register(accel_device_t *device, void *host_ptr,
                                   uint64_t size_bytes,
                                   accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(host_ptr != NULL, "host_ptr (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  long page = sysconf(_SC_PAGESIZE);
  uint64_t ps = page > 0 ? (uint64_t)page : 4096;
  if (size_bytes == 0 || size_bytes % ps != 0 ||
      (uintptr_t)host_ptr % ps != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "host register: pointer %p and size %llu must be "
                       "non-zero multiples of the page size %llu",
                       host_ptr, (unsigned long long)size_bytes,
                       (unsigned long long)ps);
  }
  ACCEL_RETURN_IF_ERROR(check_mapped(host_ptr, size_bytes, ps));
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  accel_status_t st =
      accel_mem_host_register(mem->host, host_ptr, size_bytes, out_buffer);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "host register of %llu bytes on %s",
                               (unsigned long long)size_bytes,
                               device->info.id);
  }
  return ACCEL_OK;
}
