// The CUDA backend: devices on their primary contexts, and the memory table
// on the driver's virtual memory management (cuMemAddressReserve,
// cuMemCreate, cuMemMap, cuMemSetAccess) with the granularity the device
// reports, so that the slab, paged and stream-ordered allocators run on it
// unchanged. Device memory is not host-visible (host_pointer is NULL): data
// moves through copies.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drv/cuda/cuda_internal.h"

// How often a waiting thread asks the driver whether the context died.
#define ACCEL_CUDA_HEALTH_POLL_NS 1000000ull

uint64_t accel_cuda_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Backend.

static accel_status_t cuda_open(const accel_driver_t *driver,
                                const accel_drv_options_t *options,
                                accel_drv_backend_t **out_backend) {
  accel_drv_backend_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda backend: cannot allocate %zu bytes", sizeof(*b));
  }
  accel_status_t st = accel_cuda_api_load(&b->api);
  if (st != ACCEL_OK) {
    free(b);
    return st;
  }
  int count = 0;
  CUresult r = b->api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_error(&b->api, r, "cuda backend: cuDeviceGetCount");
    accel_cuda_api_unload(&b->api);
    free(b);
    return st;
  }
  b->options = *options;
  // The driver applies CUDA_VISIBLE_DEVICES itself: its ordinals are ours,
  // in its order; ACCEL_VISIBLE_DEVICES then picks among "cuda:N".
  b->device_count = (uint32_t)count;
  *out_backend = b;
  return ACCEL_OK;
}

static void cuda_close(accel_drv_backend_t *backend) {
  accel_cuda_api_unload(&backend->api);
  free(backend);
}

static uint32_t cuda_device_count(accel_drv_backend_t *backend) {
  return backend->device_count;
}

// The NUMA node of the PCI device |bus_id| from sysfs, -1 when unknown.
static int32_t pci_numa_node(const char *bus_id) {
  char path[128], lower[32];
  size_t i = 0;
  for (; bus_id[i] != '\0' && i + 1 < sizeof(lower); ++i) {
    char c = bus_id[i];
    lower[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  lower[i] = '\0';
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", lower);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return -1;
  }
  int node = -1;
  if (fscanf(f, "%d", &node) != 1) {
    node = -1;
  }
  fclose(f);
  return node;
}

static accel_status_t device_attributes(accel_drv_device_t *d) {
  const accel_cuda_api_t *cu = d->cu;
  struct {
    CUdevice_attribute attr;
    int *out;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &d->sm_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &d->sm_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->sm_count},
      {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, &d->copy_engines},
  };
  for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); ++i) {
    CUresult r = cu->cuDeviceGetAttribute(attrs[i].out, attrs[i].attr, d->dev);
    if (r != CUDA_SUCCESS) {
      return accel_cuda_error(cu, r, "cuda:%u: cuDeviceGetAttribute(%d)",
                              d->ordinal, (int)attrs[i].attr);
    }
  }
  int vmm = 0, mem_ops = 0, posix_fd = 0;
  (void)cu->cuDeviceGetAttribute(
      &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d->dev);
  if (!vmm) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "cuda:%u: the device has no virtual memory management "
                       "(cuMemCreate/cuMemMap), which every accel allocator "
                       "runs on",
                       d->ordinal);
  }
  (void)cu->cuDeviceGetAttribute(
      &mem_ops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, d->dev);
  (void)cu->cuDeviceGetAttribute(
      &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
      d->dev);
  d->stream_mem_ops = mem_ops != 0;
  d->posix_fd = posix_fd != 0;
  return ACCEL_OK;
}

static accel_status_t device_granularity(accel_drv_device_t *d) {
  CUmemAllocationProp prop = {
      .type = CU_MEM_ALLOCATION_TYPE_PINNED,
      .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d->dev},
  };
  size_t g = 0;
  CUresult r = d->cu->cuMemGetAllocationGranularity(
      &g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_error(d->cu, r,
                            "cuda:%u: cuMemGetAllocationGranularity",
                            d->ordinal);
  }
  if (g == 0 || (g & (g - 1)) != 0) {
    return accel_error(ACCEL_ERROR_INTERNAL,
                       "cuda:%u: allocation granularity %zu is not a power "
                       "of two",
                       d->ordinal, g);
  }
  d->granularity = g;
  return ACCEL_OK;
}

static accel_status_t cuda_device_open(accel_drv_backend_t *backend,
                                       uint32_t ordinal,
                                       accel_drv_device_t **out_device) {
  const accel_cuda_api_t *cu = &backend->api;
  accel_drv_device_t *d = calloc(1, sizeof(*d));
  if (d == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda device: cannot allocate %zu bytes", sizeof(*d));
  }
  d->backend = backend;
  d->cu = cu;
  d->ordinal = ordinal;
  d->spin_ns = backend->options.spin_ns;
  accel_error_state_init(&d->lost);
  pthread_mutex_init(&d->objects_lock, NULL);
  pthread_mutex_init(&d->internal_lock, NULL);
  accel_cuda_list_init(&d->semaphores);
  accel_cuda_list_init(&d->queues);
  accel_status_t st = ACCEL_OK;
  CUresult r = cu->cuDeviceGet(&d->dev, (int)ordinal);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_error(cu, r, "cuda:%u: cuDeviceGet", ordinal);
    goto err_free_device;
  }
  st = device_attributes(d);
  if (st != ACCEL_OK) {
    goto err_free_device;
  }
  r = cu->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_error(cu, r, "cuda:%u: cuDevicePrimaryCtxRetain",
                          ordinal);
    goto err_free_device;
  }
  r = cu->cuCtxSetCurrent(d->ctx);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_error(cu, r, "cuda:%u: cuCtxSetCurrent", ordinal);
    goto err_release_context;
  }
  st = device_granularity(d);
  if (st != ACCEL_OK) {
    goto err_release_context;
  }
  r = cu->cuCtxGetStreamPriorityRange(&d->priority_least,
                                      &d->priority_greatest);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_error(cu, r, "cuda:%u: cuCtxGetStreamPriorityRange",
                          ordinal);
    goto err_release_context;
  }
  r = cu->cuStreamCreateWithPriority(&d->internal, CU_STREAM_NON_BLOCKING,
                                     d->priority_least);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_error(cu, r, "cuda:%u: creating the internal stream",
                          ordinal);
    goto err_release_context;
  }
  st = accel_cuda_reaper_start(d);
  if (st != ACCEL_OK) {
    goto err_destroy_stream;
  }
  char bus_id[32] = "";
  if (cu->cuDeviceGetPCIBusId(bus_id, sizeof(bus_id), d->dev) ==
      CUDA_SUCCESS) {
    d->numa_node = pci_numa_node(bus_id);
  } else {
    d->numa_node = -1;
  }
  *out_device = d;
  return ACCEL_OK;

err_destroy_stream:
  (void)cu->cuStreamDestroy(d->internal);
err_release_context:
  cu->cuDevicePrimaryCtxRelease(d->dev);
err_free_device:
  pthread_mutex_destroy(&d->internal_lock);
  pthread_mutex_destroy(&d->objects_lock);
  free(d);
  return st;
}

static void cuda_device_close(accel_drv_device_t *device) {
  const accel_cuda_api_t *cu = device->cu;
  accel_cuda_reaper_stop(device);
  if (cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)cu->cuStreamSynchronize(device->internal);
    (void)cu->cuStreamDestroy(device->internal);
  }
  (void)cu->cuDevicePrimaryCtxRelease(device->dev);
  pthread_mutex_destroy(&device->internal_lock);
  pthread_mutex_destroy(&device->objects_lock);
  free(device);
}

static void cuda_device_info(accel_drv_device_t *device,
                             accel_device_info_t *info) {
  const accel_cuda_api_t *cu = device->cu;
  char name[96] = "unknown CUDA device";
  (void)cu->cuDeviceGetName(name, sizeof(name), device->dev);
  snprintf(info->name, sizeof(info->name), "%s, sm_%d%d, %d SMs", name,
           device->sm_major, device->sm_minor, device->sm_count);
  snprintf(info->backend, sizeof(info->backend), "cuda");
  snprintf(info->target, sizeof(info->target), "cuda-sm_%d%d",
           device->sm_major, device->sm_minor);
  if (cu->cuDeviceGetPCIBusId(info->pci_bus_id, sizeof(info->pci_bus_id),
                              device->dev) != CUDA_SUCCESS) {
    info->pci_bus_id[0] = '\0';
  }
  size_t total = 0;
  info->memory_bytes =
      cu->cuDeviceTotalMem(&total, device->dev) == CUDA_SUCCESS ? total : 0;
  info->page_size = device->granularity;
  info->numa_node = device->numa_node;
  // Hardware work queues a context feeds concurrently: the driver's default
  // CUDA_DEVICE_MAX_CONNECTIONS.
  info->compute_queue_count = 8;
  info->copy_queue_count = accel_cuda_copy_engine_count(device);
  info->caps = ACCEL_DEVICE_CAP_VIRTUAL_MEMORY |
               ACCEL_DEVICE_CAP_STREAM_PRIORITY | ACCEL_DEVICE_CAP_TIMESTAMPS |
               (device->posix_fd ? ACCEL_DEVICE_CAP_IPC : 0);
}

static void cuda_clock_pair(accel_drv_device_t *device, uint64_t *out_host_ns,
                            uint64_t *out_device_ns) {
  // Stream timestamps are taken on the host's monotonic clock when the
  // stream reaches them (cuda_queue.c), so the two clocks are one.
  uint64_t now = accel_cuda_now_ns();
  *out_host_ns = now;
  *out_device_ns = now;
}

// Health and loss.

accel_status_t accel_cuda_enter(accel_drv_device_t *device) {
  if (accel_error_state_code(&device->lost) != ACCEL_OK) {
    return accel_error_state_report(&device->lost);
  }
  CUresult r = device->cu->cuCtxSetCurrent(device->ctx);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r, "cuda:%u: cuCtxSetCurrent",
                            device->ordinal);
  }
  return ACCEL_OK;
}

void accel_cuda_device_lose(accel_drv_device_t *device, const char *message) {
  if (!accel_error_state_set(&device->lost, ACCEL_ERROR_DEVICE_LOST, "%s",
                             message)) {
    return;
  }
  pthread_mutex_lock(&device->objects_lock);
  for (accel_cuda_list_t *n = device->semaphores.next;
       n != &device->semaphores; n = n->next) {
    accel_drv_semaphore_t *sem =
        (accel_drv_semaphore_t *)((char *)n -
                                  offsetof(accel_drv_semaphore_t, link));
    accel_cuda_semaphore_fail(sem, ACCEL_ERROR_DEVICE_LOST, message);
  }
  for (accel_cuda_list_t *n = device->queues.next; n != &device->queues;
       n = n->next) {
    accel_cuda_queue_lose_locked((accel_drv_queue_t *)n, message);
  }
  pthread_mutex_unlock(&device->objects_lock);
}

accel_status_t accel_cuda_check(accel_drv_device_t *device, CUresult result,
                                const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  accel_status_t st = accel_cuda_error(device->cu, result, "%s", what);
  if (accel_cuda_result_is_sticky(result)) {
    char message[ACCEL_ERROR_MESSAGE_MAX];
    snprintf(message, sizeof(message), "cuda:%u lost: %s", device->ordinal,
             accel_last_error());
    accel_cuda_device_lose(device, message);
    return accel_error_state_report(&device->lost);
  }
  return st;
}

accel_status_t accel_cuda_device_poll(accel_drv_device_t *device) {
  if (accel_error_state_code(&device->lost) != ACCEL_OK) {
    return accel_error_state_report(&device->lost);
  }
  uint64_t now = accel_cuda_now_ns();
  // Relaxed: a hint that spaces the polls; two threads polling at once is
  // harmless.
  uint64_t last = __atomic_load_n(&device->last_health_ns, __ATOMIC_RELAXED);
  if (now - last < ACCEL_CUDA_HEALTH_POLL_NS) {
    return ACCEL_OK;
  }
  __atomic_store_n(&device->last_health_ns, now, __ATOMIC_RELAXED);
  if (device->cu->cuCtxSetCurrent(device->ctx) != CUDA_SUCCESS) {
    return ACCEL_OK;  // reported by the next call that needs the context
  }
  pthread_mutex_lock(&device->internal_lock);
  CUresult r = device->cu->cuStreamQuery(device->internal);
  pthread_mutex_unlock(&device->internal_lock);
  if (accel_cuda_result_is_sticky(r)) {
    return accel_cuda_check(device, r, "cuda:%u: health poll",
                            device->ordinal);
  }
  return ACCEL_OK;
}

// Memory.

static accel_status_t cuda_va_reserve(accel_drv_device_t *device,
                                      uint64_t size_bytes, uint64_t alignment,
                                      uint64_t *out_address) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  if (alignment < device->granularity) {
    alignment = device->granularity;
  }
  CUdeviceptr p = 0;
  CUresult r =
      device->cu->cuMemAddressReserve(&p, size_bytes, alignment, 0, 0);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r,
                            "cuda:%u va reserve: %llu bytes aligned to %llu",
                            device->ordinal, (unsigned long long)size_bytes,
                            (unsigned long long)alignment);
  }
  *out_address = (uint64_t)p;
  return ACCEL_OK;
}

static void cuda_va_release(accel_drv_device_t *device, uint64_t address,
                            uint64_t size_bytes) {
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuMemAddressFree((CUdeviceptr)address, size_bytes);
  }
}

static CUmemAccessDesc access_desc(accel_drv_device_t *device, uint32_t access) {
  return (CUmemAccessDesc){
      .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device->dev},
      .flags = access == ACCEL_DRV_ACCESS_READ_WRITE
                   ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
               : access == ACCEL_DRV_ACCESS_READ ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                                 : CU_MEM_ACCESS_FLAGS_PROT_NONE,
  };
}

static accel_status_t cuda_va_set_access(accel_drv_device_t *device,
                                         uint64_t address, uint64_t size_bytes,
                                         uint32_t access) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  CUmemAccessDesc desc = access_desc(device, access);
  CUresult r = device->cu->cuMemSetAccess((CUdeviceptr)address, size_bytes,
                                          &desc, 1);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r,
                            "cuda:%u set access %u on %llu bytes at 0x%llx",
                            device->ordinal, access,
                            (unsigned long long)size_bytes,
                            (unsigned long long)address);
  }
  return ACCEL_OK;
}

// Fresh physical memory is zeroed (the driver interface's rule; cuMemCreate
// does not promise it) through a temporary mapping.
static accel_status_t zero_phys(accel_drv_device_t *device,
                                CUmemGenericAllocationHandle handle,
                                uint64_t size_bytes) {
  const accel_cuda_api_t *cu = device->cu;
  CUdeviceptr va = 0;
  CUresult r = cu->cuMemAddressReserve(&va, size_bytes, device->granularity,
                                       0, 0);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r, "cuda:%u phys zero: va reserve",
                            device->ordinal);
  }
  accel_status_t st = ACCEL_OK;
  r = cu->cuMemMap(va, size_bytes, 0, handle, 0);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_check(device, r, "cuda:%u phys zero: map",
                          device->ordinal);
    goto err_free_va;
  }
  CUmemAccessDesc desc = access_desc(device, ACCEL_DRV_ACCESS_READ_WRITE);
  r = cu->cuMemSetAccess(va, size_bytes, &desc, 1);
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&device->internal_lock);
    r = cu->cuMemsetD8Async(va, 0, size_bytes, device->internal);
    if (r == CUDA_SUCCESS) {
      r = cu->cuStreamSynchronize(device->internal);
    }
    pthread_mutex_unlock(&device->internal_lock);
  }
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_check(device, r, "cuda:%u phys zero: %llu bytes",
                          device->ordinal, (unsigned long long)size_bytes);
  }
  (void)cu->cuMemUnmap(va, size_bytes);
err_free_va:
  (void)cu->cuMemAddressFree(va, size_bytes);
  return st;
}

static accel_status_t cuda_phys_create(accel_drv_device_t *device,
                                       uint64_t size_bytes, uint32_t flags,
                                       accel_drv_phys_t **out_phys) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  accel_drv_phys_t *phys = calloc(1, sizeof(*phys));
  if (phys == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda phys: cannot allocate %zu bytes", sizeof(*phys));
  }
  CUmemAllocationProp prop = {
      .type = CU_MEM_ALLOCATION_TYPE_PINNED,
      .requestedHandleTypes = device->posix_fd
                                  ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                  : CU_MEM_HANDLE_TYPE_NONE,
      .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device->dev},
  };
  CUresult r = device->cu->cuMemCreate(&phys->handle, size_bytes, &prop, 0);
  if (r != CUDA_SUCCESS) {
    accel_status_t st = accel_cuda_check(
        device, r, "cuda:%u phys create: %llu bytes", device->ordinal,
        (unsigned long long)size_bytes);
    free(phys);
    return st;
  }
  accel_status_t st = zero_phys(device, phys->handle, size_bytes);
  if (st != ACCEL_OK) {
    (void)device->cu->cuMemRelease(phys->handle);
    free(phys);
    return st;
  }
  phys->device = device;
  phys->size_bytes = size_bytes;
  *out_phys = phys;
  return ACCEL_OK;
}

static void cuda_phys_release(accel_drv_phys_t *phys) {
  accel_drv_device_t *device = phys->device;
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuMemRelease(phys->handle);
  }
  free(phys);
}

static accel_status_t cuda_phys_map(accel_drv_device_t *device,
                                    uint64_t address, accel_drv_phys_t *phys,
                                    uint64_t phys_offset, uint64_t size_bytes) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  const accel_cuda_api_t *cu = device->cu;
  CUresult r = cu->cuMemMap((CUdeviceptr)address, size_bytes, phys_offset,
                            phys->handle, 0);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r,
                            "cuda:%u phys map: %llu bytes at 0x%llx",
                            device->ordinal, (unsigned long long)size_bytes,
                            (unsigned long long)address);
  }
  CUmemAccessDesc desc = access_desc(device, ACCEL_DRV_ACCESS_READ_WRITE);
  r = cu->cuMemSetAccess((CUdeviceptr)address, size_bytes, &desc, 1);
  if (r != CUDA_SUCCESS) {
    accel_status_t st = accel_cuda_check(
        device, r, "cuda:%u phys map: access to %llu bytes at 0x%llx",
        device->ordinal, (unsigned long long)size_bytes,
        (unsigned long long)address);
    (void)cu->cuMemUnmap((CUdeviceptr)address, size_bytes);
    return st;
  }
  return ACCEL_OK;
}

static void cuda_phys_unmap(accel_drv_device_t *device, uint64_t address,
                            uint64_t size_bytes) {
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuMemUnmap((CUdeviceptr)address, size_bytes);
  }
}

static accel_status_t cuda_zero(accel_drv_device_t *device, uint64_t address,
                                uint64_t size_bytes) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  pthread_mutex_lock(&device->internal_lock);
  CUresult r = device->cu->cuMemsetD8Async((CUdeviceptr)address, 0,
                                           size_bytes, device->internal);
  if (r == CUDA_SUCCESS) {
    r = device->cu->cuStreamSynchronize(device->internal);
  }
  pthread_mutex_unlock(&device->internal_lock);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r, "cuda:%u zero: %llu bytes at 0x%llx",
                            device->ordinal, (unsigned long long)size_bytes,
                            (unsigned long long)address);
  }
  return ACCEL_OK;
}

static void *cuda_host_pointer(accel_drv_device_t *device, uint64_t address) {
  return NULL;  // device memory is reached through copies only
}

static accel_status_t cuda_phys_export_fd(accel_drv_phys_t *phys,
                                          int *out_fd) {
  accel_drv_device_t *device = phys->device;
  if (!device->posix_fd) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "cuda:%u phys export: the device cannot export memory "
                       "as a POSIX file descriptor",
                       device->ordinal);
  }
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  int fd = -1;
  CUresult r = device->cu->cuMemExportToShareableHandle(
      &fd, phys->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r, "cuda:%u phys export",
                            device->ordinal);
  }
  *out_fd = fd;
  return ACCEL_OK;
}

static accel_status_t cuda_phys_import_fd(accel_drv_device_t *device, int fd,
                                          uint64_t size_bytes,
                                          accel_drv_phys_t **out_phys) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  accel_drv_phys_t *phys = calloc(1, sizeof(*phys));
  if (phys == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda phys: cannot allocate %zu bytes", sizeof(*phys));
  }
  CUresult r = device->cu->cuMemImportFromShareableHandle(
      &phys->handle, (void *)(intptr_t)fd,
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) {
    free(phys);
    return accel_cuda_check(device, r,
                            "cuda:%u phys import: fd %d is not CUDA memory "
                            "exported by accel",
                            device->ordinal, fd);
  }
  phys->device = device;
  phys->size_bytes = size_bytes;
  *out_phys = phys;
  return ACCEL_OK;
}

static accel_status_t cuda_host_register(accel_drv_device_t *device,
                                         void *host_ptr, uint64_t size_bytes,
                                         uint64_t *out_address) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  const accel_cuda_api_t *cu = device->cu;
  CUresult r = cu->cuMemHostRegister(
      host_ptr, size_bytes,
      CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r,
                            "cuda:%u host register: %llu bytes at %p",
                            device->ordinal, (unsigned long long)size_bytes,
                            host_ptr);
  }
  CUdeviceptr dptr = 0;
  r = cu->cuMemHostGetDevicePointer(&dptr, host_ptr, 0);
  if (r != CUDA_SUCCESS) {
    accel_status_t st = accel_cuda_check(
        device, r, "cuda:%u host register: device pointer of %p",
        device->ordinal, host_ptr);
    (void)cu->cuMemHostUnregister(host_ptr);
    return st;
  }
  *out_address = (uint64_t)dptr;
  return ACCEL_OK;
}

static void cuda_host_unregister(accel_drv_device_t *device, void *host_ptr,
                                 uint64_t size_bytes) {
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuMemHostUnregister(host_ptr);
  }
}

static const accel_drv_device_ops_t k_cuda_device_ops = {
    .backend_open = cuda_open,
    .backend_close = cuda_close,
    .count = cuda_device_count,
    .open = cuda_device_open,
    .close = cuda_device_close,
    .info = cuda_device_info,
    .clock_pair = cuda_clock_pair,
};

static const accel_drv_memory_ops_t k_cuda_memory_ops = {
    .va_reserve = cuda_va_reserve,
    .va_release = cuda_va_release,
    .va_set_access = cuda_va_set_access,
    .phys_create = cuda_phys_create,
    .phys_release = cuda_phys_release,
    .phys_map = cuda_phys_map,
    .phys_unmap = cuda_phys_unmap,
    .phys_export_fd = cuda_phys_export_fd,
    .phys_import_fd = cuda_phys_import_fd,
    .host_pointer = cuda_host_pointer,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .zero = cuda_zero,
};

static const accel_drv_sync_ops_t k_cuda_sync_ops = {
    .create = accel_cuda_semaphore_create,
    .destroy = accel_cuda_semaphore_destroy,
    .query = accel_cuda_semaphore_query,
    .signal = accel_cuda_semaphore_signal,
    .fail = accel_cuda_semaphore_fail,
    .wait = accel_cuda_semaphore_wait,
};

static const accel_drv_queue_ops_t k_cuda_queue_ops = {
    .create = accel_cuda_queue_create,
    .destroy = accel_cuda_queue_destroy,
    .submit = accel_cuda_queue_submit,
    .recording_create = accel_cuda_recording_create,
    .recording_destroy = accel_cuda_recording_destroy,
};

static const accel_drv_copy_ops_t k_cuda_copy_ops = {
    .engine_count = accel_cuda_copy_engine_count,
    .ring_create = accel_cuda_dma_ring_create,
    .ring_destroy = accel_cuda_dma_ring_destroy,
    .ring_doorbell = accel_cuda_dma_ring_doorbell,
    .ring_wait = accel_cuda_dma_ring_wait,
    .ring_abort = accel_cuda_dma_ring_abort,
};

static const accel_drv_dispatch_ops_t k_cuda_dispatch_ops = {
    .module_load = accel_cuda_module_load,
    .module_unload = accel_cuda_module_unload,
    .kernel_get = accel_cuda_kernel_get,
    .kernel_launch = accel_cuda_kernel_launch,
};

const accel_driver_t accel_cuda_driver = {
    .name = "cuda",
    .device = &k_cuda_device_ops,
    .memory = &k_cuda_memory_ops,
    .sync = &k_cuda_sync_ops,
    .queue = &k_cuda_queue_ops,
    .copy = &k_cuda_copy_ops,
    .dispatch = &k_cuda_dispatch_ops,
};
