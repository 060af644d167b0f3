// CUresult to accel_status_t: the one place the driver's error space meets
// ours (STYLE.md: foreign error spaces are converted in one place).
#include <stdio.h>

#include "drv/cuda/cuda_internal.h"

bool accel_cuda_result_is_sticky(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

accel_status_t accel_cuda_status(CUresult result) {
  if (accel_cuda_result_is_sticky(result)) {
    return ACCEL_ERROR_DEVICE_LOST;
  }
  switch (result) {
    case CUDA_SUCCESS:
      return ACCEL_OK;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_ILLEGAL_STATE:
      return ACCEL_ERROR_INVALID_ARGUMENT;
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_TOO_MANY_PEERS:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return ACCEL_ERROR_OUT_OF_MEMORY;
    case CUDA_ERROR_NOT_READY:
      return ACCEL_ERROR_NOT_READY;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
      return ACCEL_ERROR_UNAVAILABLE;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return ACCEL_ERROR_UNSUPPORTED;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
      return ACCEL_ERROR_FORMAT;
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_FILE_NOT_FOUND:
      return ACCEL_ERROR_NOT_FOUND;
    case CUDA_ERROR_TIMEOUT:
      return ACCEL_ERROR_TIMEOUT;
    case CUDA_ERROR_ALREADY_MAPPED:
    case CUDA_ERROR_ALREADY_ACQUIRED:
    case CUDA_ERROR_CONTEXT_ALREADY_IN_USE:
      return ACCEL_ERROR_BUSY;
    default:
      return ACCEL_ERROR_INTERNAL;
  }
}

accel_status_t accel_cuda_error(const accel_cuda_api_t *api, CUresult result,
                                const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  const char *name = NULL, *text = NULL;
  if (api->cuGetErrorName == NULL ||
      api->cuGetErrorName(result, &name) != CUDA_SUCCESS || name == NULL) {
    name = "unknown CUresult";
  }
  if (api->cuGetErrorString == NULL ||
      api->cuGetErrorString(result, &text) != CUDA_SUCCESS || text == NULL) {
    text = "no description";
  }
  accel_status_t st = accel_cuda_status(result);
  if (st == ACCEL_OK) {
    st = ACCEL_ERROR_INTERNAL;  // a caller converts only failures
  }
  return accel_error(st, "%s: %s %d (%s)", what, name, (int)result, text);
}
