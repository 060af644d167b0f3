// The host device: always present, CPU-backed. Device addresses are host
// virtual addresses; physical memory is memfd pages mapped into reserved
// ranges, so that every allocator above runs on the same primitives a GPU
// backend offers.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "drv/host/host_internal.h"

// Backend.

static accel_status_t host_open(const accel_driver_t *driver,
                                const accel_drv_options_t *options,
                                accel_drv_backend_t **out_backend) {
  accel_drv_backend_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host backend: cannot allocate %zu bytes", sizeof(*b));
  }
  b->options = *options;
  b->device_count = options->host_device_count;
  accel_host_fences_init();
  *out_backend = b;
  return ACCEL_OK;
}

static void host_close(accel_drv_backend_t *backend) { free(backend); }

static uint32_t host_device_count(accel_drv_backend_t *backend) {
  return backend->device_count;
}

// Number of NUMA nodes with memory, from sysfs (1 when unknown).
static uint32_t numa_node_count(void) {
  FILE *f = fopen("/sys/devices/system/node/online", "r");
  if (f == NULL) {
    return 1;
  }
  unsigned lo = 0, hi = 0;
  int n = fscanf(f, "%u-%u", &lo, &hi);
  fclose(f);
  if (n == 2 && hi >= lo) {
    return hi - lo + 1;
  }
  return 1;
}

static accel_status_t host_device_open(accel_drv_backend_t *backend,
                                       uint32_t ordinal,
                                       accel_drv_device_t **out_device) {
  accel_drv_device_t *d = calloc(1, sizeof(*d));
  if (d == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host device: cannot allocate %zu bytes", sizeof(*d));
  }
  d->backend = backend;
  d->ordinal = ordinal;
  d->spin_ns = backend->options.spin_ns;
  d->host_thread_count = backend->options.host_thread_count;
  // Host devices are spread over the NUMA nodes round-robin.
  d->numa_node = (int32_t)(ordinal % numa_node_count());
  long page = sysconf(_SC_PAGESIZE);
  d->page_size = page > 0 ? (uint64_t)page : 4096;
  pthread_mutex_init(&d->fault_lock, NULL);
  accel_status_t st =
      accel_host_dma_init(d, backend->options.copy_engine_count);
  if (st != ACCEL_OK) {
    pthread_mutex_destroy(&d->fault_lock);
    free(d);
    return st;
  }
  *out_device = d;
  return ACCEL_OK;
}

static void host_device_close(accel_drv_device_t *device) {
  accel_host_pool_destroy(
      atomic_load_explicit(&device->pool, memory_order_acquire));
  accel_host_dma_fini(device);
  if (device->hang_semaphore != NULL) {
    accel_host_semaphore_destroy(device->hang_semaphore);
  }
  pthread_mutex_destroy(&device->fault_lock);
  free(device);
}

static void host_device_set_affinity(accel_drv_device_t *device,
                                     const cpu_set_t *cpus) {
  device->affinity = *cpus;
  device->has_affinity = true;
}

static void cpu_model(char *out, size_t size) {
  snprintf(out, size, "unknown cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) {
    return;
  }
  char line[256];
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      char *colon = strchr(line, ':');
      if (colon != NULL) {
        colon++;
        while (*colon == ' ') {
          colon++;
        }
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, size, "%s", colon);
      }
      break;
    }
  }
  fclose(f);
}

static void host_device_info(accel_drv_device_t *device,
                             accel_device_info_t *info) {
  char model[96];
  cpu_model(model, sizeof(model));
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(info->name, sizeof(info->name), "host cpu: %s, %ld threads", model,
           cpus);
  snprintf(info->backend, sizeof(info->backend), "host");
#if defined(__x86_64__)
  snprintf(info->target, sizeof(info->target), "host-x86_64");
#elif defined(__aarch64__)
  snprintf(info->target, sizeof(info->target), "host-aarch64");
#else
  snprintf(info->target, sizeof(info->target), "host-unknown");
#endif
  info->pci_bus_id[0] = '\0';
  struct sysinfo si;
  info->memory_bytes =
      sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
  info->page_size = device->page_size;
  info->numa_node = device->numa_node;
  info->compute_queue_count = cpus > 0 ? (uint32_t)cpus : 1;
  info->copy_queue_count = accel_host_copy_engine_count(device);
  info->caps = ACCEL_DEVICE_CAP_HOST_VISIBLE | ACCEL_DEVICE_CAP_VIRTUAL_MEMORY |
               ACCEL_DEVICE_CAP_SEMAPHORE_FD | ACCEL_DEVICE_CAP_IPC |
               ACCEL_DEVICE_CAP_HOST_KERNELS |
               ACCEL_DEVICE_CAP_STREAM_PRIORITY | ACCEL_DEVICE_CAP_TIMESTAMPS;
}

static void host_clock_pair(accel_drv_device_t *device, uint64_t *out_host_ns,
                            uint64_t *out_device_ns) {
  // The host device's clock is the host's monotonic clock.
  uint64_t now = accel_host_now_ns();
  *out_host_ns = now;
  *out_device_ns = now;
}

// Memory.

static accel_status_t host_va_reserve(accel_drv_device_t *device,
                                      uint64_t size_bytes, uint64_t alignment,
                                      uint64_t *out_address) {
  if (alignment < device->page_size) {
    alignment = device->page_size;
  }
  if (size_bytes > UINT64_MAX - alignment) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host va reserve: %llu bytes with alignment %llu "
                       "overflows the address space",
                       (unsigned long long)size_bytes,
                       (unsigned long long)alignment);
  }
  uint64_t span = size_bytes + alignment - device->page_size;
  void *p = mmap(NULL, span, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host va reserve: mmap of %llu bytes failed: %s",
                       (unsigned long long)span, strerror(errno));
  }
  uint64_t base = (uint64_t)(uintptr_t)p;
  uint64_t aligned = (base + alignment - 1) & ~(alignment - 1);
  if (aligned > base) {
    munmap(p, aligned - base);
  }
  uint64_t end = aligned + size_bytes;
  if (base + span > end) {
    munmap((void *)(uintptr_t)end, base + span - end);
  }
  *out_address = aligned;
  return ACCEL_OK;
}

static void host_va_release(accel_drv_device_t *device, uint64_t address,
                            uint64_t size_bytes) {
  munmap((void *)(uintptr_t)address, size_bytes);
}

// The name and seals of every host physical memory object (see
// host_phys_is_ours).
#define HOST_PHYS_NAME "accel-host-phys"
#define HOST_PHYS_SEALS (F_SEAL_GROW | F_SEAL_SHRINK)

static accel_status_t host_phys_create(accel_drv_device_t *device,
                                       uint64_t size_bytes, uint32_t flags,
                                       accel_drv_phys_t **out_phys) {
  accel_drv_phys_t *phys = calloc(1, sizeof(*phys));
  if (phys == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys: cannot allocate %zu bytes", sizeof(*phys));
  }
  // Sealable: once sized it is sealed against resizing, which together
  // with its name marks it as memory this backend made (phys_import_fd).
  phys->fd = memfd_create(HOST_PHYS_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (phys->fd < 0) {
    int e = errno;
    free(phys);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys: memfd_create failed: %s", strerror(e));
  }
  if (ftruncate(phys->fd, (off_t)size_bytes) != 0) {
    int e = errno;
    close(phys->fd);
    free(phys);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys: cannot size %llu bytes: %s",
                       (unsigned long long)size_bytes, strerror(e));
  }
  if (fcntl(phys->fd, F_ADD_SEALS, HOST_PHYS_SEALS) != 0) {
    int e = errno;
    close(phys->fd);
    free(phys);
    return accel_error(ACCEL_ERROR_INTERNAL, "host phys: cannot seal: %s",
                       strerror(e));
  }
  phys->size_bytes = size_bytes;
  *out_phys = phys;
  return ACCEL_OK;
}

// True if |fd| is memory this backend made (and so may have exported): a
// memfd named HOST_PHYS_NAME and sealed against resizing. A memfd of
// another program, a file or a socket is refused by accel_buffer_import.
static bool host_phys_is_ours(int fd) {
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & HOST_PHYS_SEALS) != HOST_PHYS_SEALS) {
    return false;
  }
  char link[64], target[128];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) {
    return false;
  }
  target[n] = '\0';
  return strncmp(target, "/memfd:" HOST_PHYS_NAME " ",
                 strlen("/memfd:" HOST_PHYS_NAME " ")) == 0;
}

static void host_phys_release(accel_drv_phys_t *phys) {
  close(phys->fd);
  free(phys);
}

static accel_status_t host_phys_clear(accel_drv_phys_t *phys) {
  // A hole reads as zeros in every mapping of the memfd and frees its pages.
  if (fallocate(phys->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                (off_t)phys->size_bytes) != 0) {
    return accel_error(ACCEL_ERROR_INTERNAL,
                       "host phys: cannot clear %llu bytes: %s",
                       (unsigned long long)phys->size_bytes, strerror(errno));
  }
  return ACCEL_OK;
}

static accel_status_t host_phys_map(accel_drv_device_t *device,
                                    uint64_t address, accel_drv_phys_t *phys,
                                    uint64_t phys_offset, uint64_t size_bytes) {
  void *p = mmap((void *)(uintptr_t)address, size_bytes,
                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, phys->fd,
                 (off_t)phys_offset);
  if (p == MAP_FAILED) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys map: %llu bytes at 0x%llx failed: %s",
                       (unsigned long long)size_bytes,
                       (unsigned long long)address, strerror(errno));
  }
  return ACCEL_OK;
}

static void host_phys_unmap(accel_drv_device_t *device, uint64_t address,
                            uint64_t size_bytes) {
  // Replace with an inaccessible reservation so the range stays ours.
  mmap((void *)(uintptr_t)address, size_bytes, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

static void *host_host_pointer(accel_drv_device_t *device, uint64_t address) {
  return (void *)(uintptr_t)address;
}

static accel_status_t host_va_set_access(accel_drv_device_t *device,
                                         uint64_t address, uint64_t size_bytes,
                                         uint32_t access) {
  int prot = access == ACCEL_DRV_ACCESS_READ_WRITE ? PROT_READ | PROT_WRITE
             : access == ACCEL_DRV_ACCESS_READ     ? PROT_READ
                                                   : PROT_NONE;
  if (mprotect((void *)(uintptr_t)address, size_bytes, prot) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "host set access: mprotect of %llu bytes at 0x%llx "
                       "failed: %s",
                       (unsigned long long)size_bytes,
                       (unsigned long long)address, strerror(errno));
  }
  return ACCEL_OK;
}

// Pinning on the host device is mlock: the pages stay resident, which is
// what a copy engine reading them needs.
static accel_status_t host_host_register(accel_drv_device_t *device,
                                         void *host_ptr, uint64_t size_bytes,
                                         uint64_t *out_address) {
  if (mlock(host_ptr, size_bytes) != 0) {
    int e = errno;
    struct rlimit rl = {0};
    getrlimit(RLIMIT_MEMLOCK, &rl);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host register: mlock of %llu bytes failed: %s "
                       "(RLIMIT_MEMLOCK %llu bytes)",
                       (unsigned long long)size_bytes, strerror(e),
                       (unsigned long long)rl.rlim_cur);
  }
  *out_address = (uint64_t)(uintptr_t)host_ptr;
  return ACCEL_OK;
}

static void host_host_unregister(accel_drv_device_t *device, void *host_ptr,
                                 uint64_t size_bytes) {
  munlock(host_ptr, size_bytes);
}

static accel_status_t host_phys_export_fd(accel_drv_phys_t *phys,
                                          int *out_fd) {
  int fd = fcntl(phys->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys export: dup failed: %s", strerror(errno));
  }
  *out_fd = fd;
  return ACCEL_OK;
}

static accel_status_t host_phys_import_fd(accel_drv_device_t *device, int fd,
                                          uint64_t size_bytes,
                                          accel_drv_phys_t **out_phys) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "host phys import: fd %d: %s", fd, strerror(errno));
  }
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < size_bytes) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "host phys import: fd %d is not device memory of at "
                       "least %llu bytes (%lld bytes)",
                       fd, (unsigned long long)size_bytes,
                       (long long)st.st_size);
  }
  if (!host_phys_is_ours(fd)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "host phys import: fd %d is not memory that accel "
                       "exported (a memfd named \"%s\", sealed against "
                       "resizing); pass the fd of accel_buffer_export",
                       fd, HOST_PHYS_NAME);
  }
  accel_drv_phys_t *phys = calloc(1, sizeof(*phys));
  if (phys == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys: cannot allocate %zu bytes", sizeof(*phys));
  }
  phys->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (phys->fd < 0) {
    int e = errno;
    free(phys);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host phys import: dup failed: %s", strerror(e));
  }
  phys->size_bytes = size_bytes;
  *out_phys = phys;
  return ACCEL_OK;
}

static const accel_drv_device_ops_t k_host_device_ops = {
    .backend_open = host_open,
    .backend_close = host_close,
    .count = host_device_count,
    .open = host_device_open,
    .close = host_device_close,
    .info = host_device_info,
    .clock_pair = host_clock_pair,
    .set_affinity = host_device_set_affinity,
};

static const accel_drv_memory_ops_t k_host_memory_ops = {
    .va_reserve = host_va_reserve,
    .va_release = host_va_release,
    .va_set_access = host_va_set_access,
    .phys_create = host_phys_create,
    .phys_release = host_phys_release,
    .phys_clear = host_phys_clear,
    .phys_map = host_phys_map,
    .phys_unmap = host_phys_unmap,
    .phys_export_fd = host_phys_export_fd,
    .phys_import_fd = host_phys_import_fd,
    .host_pointer = host_host_pointer,
    .host_register = host_host_register,
    .host_unregister = host_host_unregister,
};

static const accel_drv_sync_ops_t k_host_sync_ops = {
    .create = accel_host_semaphore_create,
    .destroy = accel_host_semaphore_destroy,
    .query = accel_host_semaphore_query,
    .signal = accel_host_semaphore_signal,
    .fail = accel_host_semaphore_fail,
    .wait = accel_host_semaphore_wait,
    .export_fd = accel_host_semaphore_fd,
};

static const accel_drv_queue_ops_t k_host_queue_ops = {
    .create = accel_host_queue_create,
    .destroy = accel_host_queue_destroy,
    .submit = accel_host_queue_submit,
    .host_call = accel_host_queue_host_call,
    .launch = accel_host_queue_launch,
    .recording_create = accel_host_recording_create,
    .recording_destroy = accel_host_recording_destroy,
};

static const accel_drv_copy_ops_t k_host_copy_ops = {
    .engine_count = accel_host_copy_engine_count,
    .ring_create = accel_host_dma_ring_create,
    .ring_destroy = accel_host_dma_ring_destroy,
    .ring_doorbell = accel_host_dma_ring_doorbell,
    .ring_wait = accel_host_dma_ring_wait,
    .ring_abort = accel_host_dma_ring_abort,
    .ring_execute_now = accel_host_dma_ring_execute_now,
};

static const accel_drv_dispatch_ops_t k_host_dispatch_ops = {
    .host_grid = accel_host_dispatch,
};

static const accel_drv_health_ops_t k_host_health_ops = {
    .set_sink = accel_host_health_set_sink,
    .inject_fault = accel_host_inject_fault,
    .queue_abort = accel_host_queue_abort,
    .reset = accel_host_health_reset,
};

const accel_driver_t accel_host_driver = {
    .name = "host",
    .device = &k_host_device_ops,
    .memory = &k_host_memory_ops,
    .sync = &k_host_sync_ops,
    .queue = &k_host_queue_ops,
    .copy = &k_host_copy_ops,
    .dispatch = &k_host_dispatch_ops,
    .health = &k_host_health_ops,
};
