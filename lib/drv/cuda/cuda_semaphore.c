// Timeline semaphores on the CUDA device: the value is a 64-bit word in
// pinned host memory mapped for the device. Streams raise it with
// cuStreamWriteValue64 and wait on it with cuStreamWaitValue64 (GEQ), the
// host signals it with a compare-and-swap and waits by polling it (the
// device's writes wake nobody): a bounded spin, then sleeps that grow to
// ACCEL_CUDA_WAIT_SLEEP_MAX_NS, with a health poll of the device between
// them so that a lost device ends the wait.
//
// A failure is stored beside the word (first failure wins); it also raises
// the word by ACCEL_CUDA_FAIL_RELEASE so that device waits on it end (the
// command after such a wait sees the failure: cuda_queue.c).
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "drv/cuda/cuda_internal.h"

// Longest sleep between two polls of a waiting host thread: bounds the
// extra latency a host wait adds once it stopped spinning.
#define ACCEL_CUDA_WAIT_SLEEP_MAX_NS 200000ull
// How far a failure raises the word. cuStreamWaitValue64's GEQ compares
// (int64_t)(*addr - value) >= 0, so this releases every device wait for a
// value up to 2^62 above the current one.
#define ACCEL_CUDA_FAIL_RELEASE (1ull << 62)

accel_status_t accel_cuda_semaphore_create(accel_drv_device_t *device,
                                           uint64_t initial_value,
                                           accel_drv_semaphore_t **out) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  const accel_cuda_api_t *cu = device->cu;
  accel_drv_semaphore_t *sem = calloc(1, sizeof(*sem));
  if (sem == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda semaphore: cannot allocate %zu bytes",
                       sizeof(*sem));
  }
  void *word = NULL;
  CUresult r = cu->cuMemHostAlloc(
      &word, sizeof(uint64_t),
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    free(sem);
    return accel_cuda_check(device, r,
                            "cuda:%u semaphore: pinned host word",
                            device->ordinal);
  }
  r = cu->cuMemHostGetDevicePointer(&sem->word_device, word, 0);
  if (r != CUDA_SUCCESS) {
    (void)cu->cuMemFreeHost(word);
    free(sem);
    return accel_cuda_check(device, r,
                            "cuda:%u semaphore: device address of the word",
                            device->ordinal);
  }
  sem->device = device;
  sem->word = word;
  atomic_init(sem->word, initial_value);
  accel_error_state_init(&sem->error);
  atomic_flag_clear(&sem->failing);
  atomic_init(&sem->value_at_failure, 0);
  pthread_mutex_lock(&device->objects_lock);
  accel_cuda_list_add(&device->semaphores, &sem->link);
  pthread_mutex_unlock(&device->objects_lock);
  // A semaphore created on a device already lost starts failed.
  if (accel_error_state_code(&device->lost) != ACCEL_OK) {
    accel_cuda_semaphore_fail(sem, ACCEL_ERROR_DEVICE_LOST,
                              device->lost.message);
  }
  *out = sem;
  return ACCEL_OK;
}

void accel_cuda_semaphore_destroy(accel_drv_semaphore_t *sem) {
  accel_drv_device_t *device = sem->device;
  pthread_mutex_lock(&device->objects_lock);
  accel_cuda_list_del(&sem->link);
  pthread_mutex_unlock(&device->objects_lock);
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuMemFreeHost((void *)sem->word);
  }
  free(sem);
}

accel_status_t accel_cuda_semaphore_query(accel_drv_semaphore_t *sem,
                                          uint64_t *out_value) {
  if (accel_error_state_code(&sem->error) != ACCEL_OK) {
    // Written before the failure was published (error_state_set releases).
    *out_value =
        atomic_load_explicit(&sem->value_at_failure, memory_order_relaxed);
    return accel_error_state_report(&sem->error);
  }
  // Acquire: a value written by a stream or a host signal publishes the work
  // before it.
  *out_value = atomic_load_explicit(sem->word, memory_order_acquire);
  return ACCEL_OK;
}

accel_status_t accel_cuda_semaphore_signal(accel_drv_semaphore_t *sem,
                                           uint64_t value) {
  if (accel_error_state_code(&sem->error) != ACCEL_OK) {
    return accel_error_state_report(&sem->error);
  }
  uint64_t current = atomic_load_explicit(sem->word, memory_order_relaxed);
  do {
    if (value <= current) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "semaphore signal: value %llu is not above the "
                         "current value %llu",
                         (unsigned long long)value,
                         (unsigned long long)current);
    }
    // Release: the host's writes before the signal are visible to whoever
    // (host thread or device wait) sees the value.
  } while (!atomic_compare_exchange_weak_explicit(
      sem->word, &current, value, memory_order_release, memory_order_relaxed));
  return ACCEL_OK;
}

void accel_cuda_semaphore_fail(accel_drv_semaphore_t *sem,
                               accel_status_t status, const char *message) {
  if (atomic_flag_test_and_set_explicit(&sem->failing,
                                        memory_order_acq_rel)) {
    return;  // the first failure wins
  }
  atomic_store_explicit(&sem->value_at_failure,
                        atomic_load_explicit(sem->word, memory_order_acquire),
                        memory_order_relaxed);
  accel_error_state_set(&sem->error, status, "%s", message);
  // Release: a waiter that sees the raised word also sees the failure.
  atomic_fetch_add_explicit(sem->word, ACCEL_CUDA_FAIL_RELEASE,
                            memory_order_release);
}

// One pass over the semaphores: OK when the wait is decided (|*out_index|
// set for ANY), the failure that decided it, or NOT_READY.
static accel_status_t wait_pass(uint32_t count,
                                accel_drv_semaphore_t *const *sems,
                                const uint64_t *values, accel_wait_mode_t mode,
                                uint32_t *out_index) {
  bool all = true;
  for (uint32_t i = 0; i < count; ++i) {
    if (accel_error_state_code(&sems[i]->error) != ACCEL_OK) {
      if (out_index != NULL) {
        *out_index = i;
      }
      return accel_error_state_report(&sems[i]->error);
    }
    // Acquire: pairs with the signaller's release.
    bool reached =
        atomic_load_explicit(sems[i]->word, memory_order_acquire) >= values[i];
    if (reached && mode == ACCEL_WAIT_ANY) {
      if (out_index != NULL) {
        *out_index = i;
      }
      return ACCEL_OK;
    }
    all = all && reached;
  }
  if (all && mode != ACCEL_WAIT_ANY) {
    if (out_index != NULL) {
      *out_index = 0;
    }
    return ACCEL_OK;
  }
  return ACCEL_ERROR_NOT_READY;
}

accel_status_t accel_cuda_semaphore_wait_ex(
    uint32_t count, accel_drv_semaphore_t *const *sems, const uint64_t *values,
    accel_wait_mode_t mode, uint64_t timeout_ns, uint32_t *out_index,
    bool poll_health) {
  uint64_t start = accel_cuda_now_ns();
  uint64_t spin_ns = count > 0 ? sems[0]->device->spin_ns : 0;
  uint64_t sleep_ns = 1000;
  for (;;) {
    accel_status_t st = wait_pass(count, sems, values, mode, out_index);
    if (st != ACCEL_ERROR_NOT_READY) {
      return st;
    }
    uint64_t elapsed = accel_cuda_now_ns() - start;
    if (timeout_ns != ACCEL_TIMEOUT_INFINITE && elapsed >= timeout_ns) {
      return accel_error(ACCEL_ERROR_TIMEOUT,
                         "semaphore wait: %u semaphore(s) not reached within "
                         "%llu ns",
                         count, (unsigned long long)timeout_ns);
    }
    for (uint32_t i = 0; i < count && poll_health; ++i) {
      // A lost device fails its semaphores, which the next pass reports.
      (void)accel_cuda_device_poll(sems[i]->device);
    }
    if (elapsed < spin_ns) {
      sched_yield();
      continue;
    }
    uint64_t left = timeout_ns == ACCEL_TIMEOUT_INFINITE
                        ? UINT64_MAX
                        : timeout_ns - elapsed;
    uint64_t nap = sleep_ns < left ? sleep_ns : left;
    struct timespec ts = {.tv_sec = (time_t)(nap / 1000000000ull),
                          .tv_nsec = (long)(nap % 1000000000ull)};
    nanosleep(&ts, NULL);
    if (sleep_ns < ACCEL_CUDA_WAIT_SLEEP_MAX_NS) {
      sleep_ns *= 2;
    }
  }
}

accel_status_t accel_cuda_semaphore_wait(
    uint32_t count, accel_drv_semaphore_t *const *sems, const uint64_t *values,
    accel_wait_mode_t mode, uint64_t timeout_ns, uint32_t *out_index) {
  return accel_cuda_semaphore_wait_ex(count, sems, values, mode, timeout_ns,
                                      out_index, true);
}
