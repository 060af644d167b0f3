// Code objects on the CUDA device: PTX text or cubin images loaded with
// cuLibraryLoadData (the driver's JIT compiles PTX; its error log goes into
// the message), kernels found with cuLibraryGetKernel, and launches with
// cuLaunchKernel whose parameters follow docs/kernel-abi.md: one device
// pointer per binding, one uint64_t length per binding, the workspace
// pointer and size when there is a workspace, then the constants by value.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv/cuda/cuda_internal.h"

// Bytes of the JIT's error log kept for the message.
#define ACCEL_CUDA_JIT_LOG_BYTES 2048

accel_status_t accel_cuda_module_load(accel_drv_device_t *device,
                                      const void *image, uint64_t size_bytes,
                                      accel_drv_module_t **out_module) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  accel_drv_module_t *m = calloc(1, sizeof(*m));
  if (m == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda module: cannot allocate %zu bytes", sizeof(*m));
  }
  // PTX must reach the driver NUL-terminated; the image may not be.
  const uint8_t *bytes = image;
  bool elf = size_bytes >= 4 && memcmp(bytes, "\177ELF", 4) == 0;
  char *text = NULL;
  if (!elf && (size_bytes == 0 || bytes[size_bytes - 1] != '\0')) {
    text = malloc(size_bytes + 1);
    if (text == NULL) {
      free(m);
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "cuda module: cannot copy %llu bytes of PTX",
                         (unsigned long long)size_bytes);
    }
    memcpy(text, image, size_bytes);
    text[size_bytes] = '\0';
  }
  char log[ACCEL_CUDA_JIT_LOG_BYTES] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, (void *)(uintptr_t)sizeof(log)};
  CUresult r = device->cu->cuLibraryLoadData(
      &m->library, text != NULL ? text : image, options, values, 2, NULL,
      NULL, 0);
  free(text);
  if (r != CUDA_SUCCESS) {
    log[sizeof(log) - 1] = '\0';
    accel_status_t st = accel_cuda_check(
        device, r, "cuda:%u: loading a %s code object of %llu bytes%s%s",
        device->ordinal, elf ? "cubin" : "PTX", (unsigned long long)size_bytes,
        log[0] != '\0' ? ": JIT log: " : "", log);
    free(m);
    return st;
  }
  m->device = device;
  *out_module = m;
  return ACCEL_OK;
}

void accel_cuda_module_unload(accel_drv_module_t *module) {
  accel_drv_device_t *device = module->device;
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuLibraryUnload(module->library);
  }
  free(module);
}

accel_status_t accel_cuda_kernel_get(accel_drv_module_t *module,
                                     const char *name,
                                     accel_drv_kernel_t **out_kernel) {
  accel_drv_device_t *device = module->device;
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  CUkernel k = NULL;
  CUresult r = device->cu->cuLibraryGetKernel(&k, module->library, name);
  if (r == CUDA_ERROR_NOT_FOUND) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "cuda:%u: the code object has no kernel \"%s\"",
                       device->ordinal, name);
  }
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(device, r, "cuda:%u: kernel \"%s\"",
                            device->ordinal, name);
  }
  accel_drv_kernel_t *kernel = calloc(1, sizeof(*kernel));
  if (kernel == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda kernel: cannot allocate %zu bytes",
                       sizeof(*kernel));
  }
  r = device->cu->cuKernelGetFunction(&kernel->function, k);
  if (r != CUDA_SUCCESS) {
    free(kernel);
    return accel_cuda_check(device, r, "cuda:%u: kernel \"%s\" function",
                            device->ordinal, name);
  }
  kernel->module = module;
  snprintf(kernel->name, sizeof(kernel->name), "%s", name);
  *out_kernel = kernel;
  return ACCEL_OK;
}

// The parameters of the kernel ABI's CUDA layout, at most this many.
#define ACCEL_CUDA_MAX_PARAMS 259

CUresult accel_cuda_enqueue_launch(accel_drv_kernel_t *kernel,
                                   const accel_drv_launch_t *l,
                                   CUstream stream) {
  uint32_t n = l->binding_count;
  if (2 * n + 3 > ACCEL_CUDA_MAX_PARAMS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // cuLaunchKernel copies the values the pointers point at before it
  // returns, so they may live on this stack.
  void *params[ACCEL_CUDA_MAX_PARAMS];
  uint32_t p = 0;
  for (uint32_t i = 0; i < n; ++i) {
    params[p++] = (void *)&l->binding_addresses[i];
  }
  for (uint32_t i = 0; i < n; ++i) {
    params[p++] = (void *)&l->binding_lengths[i];
  }
  if (l->workspace_bytes > 0) {
    params[p++] = (void *)&l->workspace_address;
    params[p++] = (void *)&l->workspace_bytes;
  }
  if (l->constants_size > 0) {
    params[p++] = (void *)l->constants;
  }
  return kernel->module->device->cu->cuLaunchKernel(
      kernel->function, l->grid[0], l->grid[1], l->grid[2], l->block[0],
      l->block[1], l->block[2], l->shared_bytes, stream,
      p > 0 ? params : NULL, NULL);
}

accel_status_t accel_cuda_launch_marker(void *payload,
                                        accel_drv_device_t *device) {
  // Never called: cuda_queue.c recognizes the marker and enqueues the
  // launch itself.
  return accel_error(ACCEL_ERROR_INTERNAL,
                     "cuda:%u: a device launch reached a host executor",
                     device->ordinal);
}

accel_status_t accel_cuda_kernel_launch(accel_drv_queue_t *queue,
                                        accel_drv_kernel_t *kernel,
                                        const accel_drv_launch_t *launch,
                                        accel_object_t *ref0,
                                        accel_object_t *ref1,
                                        uint64_t *out_last_seq) {
  accel_cuda_launch_cmd_t payload = {kernel, launch};
  accel_cmd_t cmd = {.kind = ACCEL_CMD_LAUNCH};
  cmd.launch.exec = accel_cuda_launch_marker;
  cmd.launch.payload = &payload;  // read during the submit only
  cmd.refs[0] = ref0;
  cmd.refs[1] = ref1;
  return accel_cuda_queue_submit(queue, &cmd, 1, out_last_seq);
}
