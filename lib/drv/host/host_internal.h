// Internals of the host device: a CPU-backed accelerator whose memory is
// mmap'ed memfd pages, whose queues are worker threads and whose semaphores
// are futex-based.
#ifndef ACCEL_DRV_HOST_INTERNAL_H_
#define ACCEL_DRV_HOST_INTERNAL_H_

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/driver.h"
#include "core/driver_copy.h"
#include "core/driver_device.h"
#include "core/driver_dispatch.h"
#include "core/driver_health.h"
#include "core/driver_memory.h"
#include "core/driver_queue.h"
#include "core/driver_sync.h"
#include "core/error.h"

struct accel_drv_backend {
  accel_drv_options_t options;
  uint32_t device_count;
};

typedef struct accel_host_pool accel_host_pool_t;
typedef struct accel_host_dma accel_host_dma_t;

// An armed fault (host_fault.c).
#define ACCEL_HOST_MAX_FAULTS 16
typedef struct accel_host_fault {
  uint32_t kind;           // accel_fault_kind_t
  uint64_t command_index;  // hits the command_index-th eligible one
  uint64_t not_before_ns;  // 0: at once
  uint64_t seen;           // eligible commands seen so far
  char queue[64];          // "": every queue
} accel_host_fault_t;

struct accel_drv_device {
  accel_drv_backend_t *backend;
  uint32_t ordinal;
  uint64_t spin_ns;
  // Threads per grid, worker included (ACCEL_HOST_THREADS); 0: per CPU.
  uint32_t host_thread_count;
  int32_t numa_node;
  uint64_t page_size;
  // CPUs the device's worker threads run on (device_set_affinity); set
  // before any queue exists, read-only afterwards.
  bool has_affinity;
  cpu_set_t affinity;
  // Work-group thread pool (host_dispatch.c), created on first use.
  accel_host_pool_t *_Atomic pool;
  accel_host_dma_t *dma;  // copy engines (host_dma.c)
  // Fault injection (host_fault.c). |faults_armed| is the number of armed
  // faults, read by workers and engines per command (relaxed); the table is
  // guarded by |fault_lock|.
  _Atomic uint32_t faults_armed;
  pthread_mutex_t fault_lock;
  uint32_t fault_count;
  accel_host_fault_t faults[ACCEL_HOST_MAX_FAULTS];
  // Never signalled: what a hung DMA descriptor's ring stalls on.
  accel_drv_semaphore_t *hang_semaphore;
  accel_drv_fault_sink_fn_t fault_sink;  // lib/core's, set once after open
  void *fault_sink_ctx;
};

struct accel_drv_phys {
  int fd;  // memfd
  uint64_t size_bytes;
};

// ---------------------------------------------------------------------------
// Time and futexes.
// ---------------------------------------------------------------------------

static inline uint64_t accel_host_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void accel_host_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// Spinning threads give their core away this often: when a spinner shares a
// core with the thread it waits for (an oversubscribed machine), the other
// thread runs within this time instead of after the spin or a time slice.
#define ACCEL_HOST_SPIN_YIELD_NS 20000ull

// A bounded spin that gives its CPU away, for the host's waits and idle
// engines. The clock is first read after 64 polls and then every 64 (a clock
// read costs more than a poll, and the common short wait sees its value
// before the first read); that first read starts the spin's |budget_ns| and
// schedules the first yield |first_yield_ns| later (then one every
// ACCEL_HOST_SPIN_YIELD_NS).
typedef struct accel_host_spin {
  uint32_t iter;
  uint64_t budget_ns;
  uint64_t first_yield_ns;
  uint64_t start;  // absolute ns of the first clock read; 0 before it
  uint64_t until;
  uint64_t yield_at;
} accel_host_spin_t;

static inline accel_host_spin_t accel_host_spin_start(uint64_t budget_ns,
                                                      uint64_t first_yield_ns) {
  return (accel_host_spin_t){.budget_ns = budget_ns,
                             .first_yield_ns = first_yield_ns};
}

// Call after each poll that found nothing: yields when due, and returns false
// once the spin is over.
static inline bool accel_host_spin_continue(accel_host_spin_t *spin) {
  if ((++spin->iter & 63) != 0) {
    return true;
  }
  uint64_t now = accel_host_now_ns();
  if (spin->start == 0) {
    spin->start = now;
    spin->until = spin->budget_ns > UINT64_MAX - now ? UINT64_MAX
                                                     : now + spin->budget_ns;
    spin->yield_at = now + spin->first_yield_ns;
  }
  if (now >= spin->until) {
    return false;
  }
  if (now >= spin->yield_at) {
    sched_yield();
    spin->yield_at = now + ACCEL_HOST_SPIN_YIELD_NS;
  }
  return true;
}

// Waits while *|word| == |expected|, at most until |deadline_ns| (absolute
// CLOCK_MONOTONIC; UINT64_MAX for none). Spurious returns are allowed.
static inline void accel_host_futex_wait(_Atomic uint32_t *word,
                                         uint32_t expected,
                                         uint64_t deadline_ns) {
  if (deadline_ns == UINT64_MAX) {
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, expected, NULL, NULL,
            FUTEX_BITSET_MATCH_ANY);
    return;
  }
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                        .tv_nsec = (long)(deadline_ns % 1000000000ull)};
  syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, expected, &ts, NULL,
          FUTEX_BITSET_MATCH_ANY);
}

static inline void accel_host_futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

// Deadline for a relative timeout (saturating).
static inline uint64_t accel_host_deadline(uint64_t timeout_ns) {
  if (timeout_ns == ACCEL_TIMEOUT_INFINITE) {
    return UINT64_MAX;
  }
  uint64_t now = accel_host_now_ns();
  return timeout_ns > UINT64_MAX - now ? UINT64_MAX - 1 : now + timeout_ns;
}

// ---------------------------------------------------------------------------
// Fault injection (host_fault.c).
// ---------------------------------------------------------------------------

// Takes the fault, if any, that the next command of |queue| (a stream's
// name, or a DMA ring's "queue/ringN") hits: its accel_fault_kind_t, or -1.
int accel_host_fault_take_slow(accel_drv_device_t *device, const char *queue);

static inline int accel_host_fault_take(accel_drv_device_t *device,
                                        const char *queue) {
  if (__builtin_expect(atomic_load_explicit(&device->faults_armed,
                                            memory_order_relaxed) == 0,
                       1)) {
    return -1;
  }
  return accel_host_fault_take_slow(device, queue);
}

// Hands a RAS fault to lib/core's sink (any thread, no lock held).
void accel_host_fault_report(accel_drv_device_t *device, uint32_t ras_class,
                             accel_status_t status, const char *message);

void accel_host_health_set_sink(accel_drv_device_t *device,
                                accel_drv_fault_sink_fn_t fn, void *ctx);
accel_status_t accel_host_inject_fault(accel_drv_device_t *device,
                                       const accel_drv_fault_t *fault);
accel_status_t accel_host_health_reset(accel_drv_device_t *device,
                                       uint32_t scope);
void accel_host_queue_abort(accel_drv_queue_t *queue, accel_status_t status,
                            const char *message);

// ---------------------------------------------------------------------------
// Semaphores (host_semaphore.c).
// ---------------------------------------------------------------------------

// Who is parked on a wait: one per waiting thread, shared by the nodes it
// registers on each semaphore.
typedef struct accel_host_waiter {
  _Atomic uint32_t word;  // futex: set to 1 by a signaller
  // If not NULL, a non-zero value cancels the wait (queue abort).
  _Atomic uint32_t *cancel;
} accel_host_waiter_t;

// Waits like semaphore_wait; returns ACCEL_ERROR_ABORTED if *cancel becomes
// non-zero (the canceller sets it, then calls accel_host_waiter_wake).
accel_status_t accel_host_semaphore_wait_ex(
    uint32_t count, accel_drv_semaphore_t *const *semaphores,
    const uint64_t *values, accel_wait_mode_t mode, uint64_t timeout_ns,
    uint32_t *out_index, accel_host_waiter_t *waiter, uint64_t spin_ns);

void accel_host_waiter_wake(accel_host_waiter_t *waiter);

// --- Fences (host_fence.c) ---------------------------------------------------
// Registers the process for membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
// once (idempotent, thread-safe; called at device open, before any queue or
// semaphore exists). When that works, the frequent side of a store-load
// handshake (a semaphore signal, a queue's submit) orders its store before
// its load with a compiler barrier only (accel_host_light_fence), and the
// rare side (a thread about to sleep, a revoking submitter) issues
// accel_host_heavy_fence, a membarrier that is a full fence on every thread
// of the process (the asymmetric Dekker pattern of liburcu and folly).
// Otherwise both sides use real fences.
void accel_host_fences_init(void);

extern _Atomic int accel_host_asymmetric_g;  // see host_fence.c

// True when accel_host_fences_init registered membarrier.
static inline bool accel_host_asymmetric(void) {
  return atomic_load_explicit(&accel_host_asymmetric_g, memory_order_relaxed) ==
         1;
}

// A full (store-load) fence. GCC's TSan rejects atomic_thread_fence, so that
// build uses a locked read-modify-write of a private word, which is a full
// fence on the hardware as well.
static inline void accel_host_full_fence(void) {
#if defined(__SANITIZE_THREAD__)
  _Atomic int word = 0;
  (void)atomic_exchange_explicit(&word, 1, memory_order_seq_cst);
#else
  atomic_thread_fence(memory_order_seq_cst);
#endif
}

// The frequent side's store-load fence: a compiler barrier when the rare
// side issues accel_host_heavy_fence, else a full fence.
static inline void accel_host_light_fence(void) {
  if (accel_host_asymmetric()) {
    atomic_signal_fence(memory_order_seq_cst);
  } else {
    accel_host_full_fence();
  }
}

// The rare side's fence: a full fence here and, with membarrier, on every
// running thread of the process, so that the other side's store before its
// light fence is visible after this returns, or its load after the light
// fence sees what this thread stored before.
void accel_host_heavy_fence(void);


// Raises the value to |value| if it is higher (queue signals never lower it)
// and wakes waiters.
void accel_host_semaphore_signal_max(accel_drv_semaphore_t *semaphore,
                                     uint64_t value);

// The same for a semaphore that only the calling thread ever raises (a
// queue's completion): a plain store instead of a compare-and-swap, and no
// store-load fence when the process has asymmetric fences (see
// accel_host_fences_init): the parking side pays for the ordering instead.
void accel_host_semaphore_signal_single(accel_drv_semaphore_t *semaphore,
                                        uint64_t value);


accel_status_t accel_host_semaphore_create(accel_drv_device_t *device,
                                           uint64_t initial_value,
                                           accel_drv_semaphore_t **out);
void accel_host_semaphore_destroy(accel_drv_semaphore_t *semaphore);
accel_status_t accel_host_semaphore_query(accel_drv_semaphore_t *semaphore,
                                          uint64_t *out_value);
accel_status_t accel_host_semaphore_signal(accel_drv_semaphore_t *semaphore,
                                           uint64_t value);
void accel_host_semaphore_fail(accel_drv_semaphore_t *semaphore,
                               accel_status_t status, const char *message);
accel_status_t accel_host_semaphore_wait(
    uint32_t count, accel_drv_semaphore_t *const *semaphores,
    const uint64_t *values, accel_wait_mode_t mode, uint64_t timeout_ns,
    uint32_t *out_index);
accel_status_t accel_host_semaphore_fd(accel_drv_semaphore_t *semaphore,
                                       uint64_t value, int *out_fd);
// The stored failure of |semaphore| (ACCEL_OK if healthy), message included.
const accel_error_state_t *accel_host_semaphore_error(
    accel_drv_semaphore_t *semaphore);

// ---------------------------------------------------------------------------
// Queues (host_queue_worker.c: create, destroy; host_queue_submit.c: the
// rest).
// ---------------------------------------------------------------------------

accel_status_t accel_host_queue_create(accel_drv_device_t *device,
                                       const accel_drv_queue_params_t *params,
                                       accel_drv_queue_t **out_queue);
void accel_host_queue_destroy(accel_drv_queue_t *queue);
accel_status_t accel_host_queue_host_call(accel_drv_queue_t *queue,
                                          accel_host_fn_t fn, void *user_data,
                                          uint64_t *out_last_seq);
accel_status_t accel_host_queue_launch(accel_drv_queue_t *queue,
                                       accel_launch_exec_fn_t exec,
                                       void *payload, accel_object_t *ref0,
                                       accel_object_t *ref1,
                                       uint64_t *out_last_seq);
accel_status_t accel_host_queue_submit(accel_drv_queue_t *queue,
                                       const accel_cmd_t *commands,
                                       uint32_t count, uint64_t *out_last_seq);
accel_status_t accel_host_recording_create(
    accel_drv_device_t *device, const accel_drv_recording_params_t *params,
    accel_drv_recording_t **out_recording);
void accel_host_recording_destroy(accel_drv_recording_t *recording);

// ---------------------------------------------------------------------------
// Work-group dispatch (host_dispatch.c).
// ---------------------------------------------------------------------------

accel_status_t accel_host_dispatch(accel_drv_device_t *device,
                                   const uint32_t group_count[3],
                                   accel_status_t (*fn)(void *ctx,
                                                        const uint32_t id[3]),
                                   void *ctx);
// Stops and joins the pool's threads (NULL ignored).
void accel_host_pool_destroy(accel_host_pool_t *pool);

// ---------------------------------------------------------------------------
// Copy engines and DMA rings (host_dma.c).
// ---------------------------------------------------------------------------

// Default engine count for a device on |numa_node|: its cores, at most 4.
uint32_t accel_host_copy_engine_default(int32_t numa_node);
// Sets up |engine_count| engines (0: the default); threads start lazily.
accel_status_t accel_host_dma_init(accel_drv_device_t *device,
                                   uint32_t engine_count);
// Stops the engines; every ring must have been destroyed.
void accel_host_dma_fini(accel_drv_device_t *device);
uint32_t accel_host_copy_engine_count(accel_drv_device_t *device);
accel_status_t accel_host_dma_ring_create(
    accel_drv_device_t *device, const accel_drv_dma_ring_params_t *params,
    accel_drv_dma_ring_t **out_ring, accel_dma_ring_mem_t *out_mem);
void accel_host_dma_ring_destroy(accel_drv_dma_ring_t *ring);
void accel_host_dma_ring_doorbell(accel_drv_dma_ring_t *ring, uint64_t tail);
accel_status_t accel_host_dma_ring_wait(accel_drv_dma_ring_t *ring,
                                        uint64_t head, uint64_t timeout_ns);
void accel_host_dma_ring_abort(accel_drv_dma_ring_t *ring);
void accel_host_dma_ring_inject_fault(accel_drv_dma_ring_t *ring,
                                      accel_status_t status);
accel_status_t accel_host_dma_ring_execute_now(accel_drv_dma_ring_t *ring,
                                              const accel_dma_hw_desc_t *desc);

#endif  // ACCEL_DRV_HOST_INTERNAL_H_
