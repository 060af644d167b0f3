// Host timeline semaphores. The value is one atomic; waiters register nodes
// in a per-semaphore list only after spinning, so that a signal with nobody
// parked costs one store and one load.
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/lock.h"
#include "drv/host/host_internal.h"

typedef struct wait_node {
  struct wait_node *next;
  struct wait_node *prev;
  accel_host_waiter_t *waiter;  // thread waiter, or NULL for an fd node
  int fd;                       // fd node: eventfd we own (a dup)
  uint64_t value;               // fd node: value that fires it
} wait_node_t;

struct accel_drv_semaphore {
  // The value and node count share a line that signallers and pollers use;
  // the lock and the failure state live on others.
  _Alignas(64) _Atomic uint64_t value;
  // Number of registered nodes; signallers take |lock| only when non-zero.
  _Atomic uint32_t node_count;
  _Alignas(64) pthread_mutex_t lock;
  wait_node_t *nodes;  // guarded by |lock|
  accel_drv_device_t *device;
  accel_error_state_t error;
};

static void list_add_locked(accel_drv_semaphore_t *sem, wait_node_t *node) {
  ACCEL_ASSERT_HELD(&sem->lock);
  node->prev = NULL;
  node->next = sem->nodes;
  if (sem->nodes != NULL) {
    sem->nodes->prev = node;
  }
  sem->nodes = node;
  // Seq_cst: orders the registration before the waiter's re-check of the
  // value, against the signaller's value store then node_count load; the
  // caller issues accel_host_heavy_fence() before that re-check.
  atomic_fetch_add_explicit(&sem->node_count, 1, memory_order_seq_cst);
}

static void list_remove_locked(accel_drv_semaphore_t *sem, wait_node_t *node) {
  ACCEL_ASSERT_HELD(&sem->lock);
  if (node->prev != NULL) {
    node->prev->next = node->next;
  } else {
    sem->nodes = node->next;
  }
  if (node->next != NULL) {
    node->next->prev = node->prev;
  }
  atomic_fetch_sub_explicit(&sem->node_count, 1, memory_order_relaxed);
}

static void fire_fd(int fd) {
  uint64_t one = 1;
  ssize_t n = write(fd, &one, sizeof(one));
  (void)n;  // an eventfd write of 1 cannot fail short of overflow
  close(fd);
}

// Wakes thread waiters and fires fd nodes whose value is reached (all of
// them when |failed|).
static void wake_nodes(accel_drv_semaphore_t *sem, bool failed) {
  // Seq_cst: the value (or failure) store before this load must be visible to
  // a waiter that registered before we read node_count (Dekker pairing).
  if (atomic_load_explicit(&sem->node_count, memory_order_seq_cst) == 0) {
    return;
  }
  uint64_t value = atomic_load_explicit(&sem->value, memory_order_acquire);
  pthread_mutex_lock(&sem->lock);
  wait_node_t *node = sem->nodes;
  while (node != NULL) {
    wait_node_t *next = node->next;
    if (node->waiter != NULL) {
      // Release: the woken thread re-reads the value after seeing the word.
      atomic_store_explicit(&node->waiter->word, 1, memory_order_release);
      accel_host_futex_wake_all(&node->waiter->word);
    } else if (failed || value >= node->value) {
      list_remove_locked(sem, node);
      fire_fd(node->fd);
      free(node);
    }
    node = next;
  }
  pthread_mutex_unlock(&sem->lock);
}

accel_status_t accel_host_semaphore_create(accel_drv_device_t *device,
                                           uint64_t initial_value,
                                           accel_drv_semaphore_t **out) {
  accel_drv_semaphore_t *sem = aligned_alloc(64, sizeof(*sem));
  if (sem != NULL) {
    memset(sem, 0, sizeof(*sem));
  }
  if (sem == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host semaphore: cannot allocate %zu bytes",
                       sizeof(*sem));
  }
  atomic_init(&sem->value, initial_value);
  atomic_init(&sem->node_count, 0);
  pthread_mutex_init(&sem->lock, NULL);
  sem->device = device;
  accel_error_state_init(&sem->error);
  *out = sem;
  return ACCEL_OK;
}

void accel_host_semaphore_destroy(accel_drv_semaphore_t *sem) {
  // Pending fd nodes fire so that pollers do not hang on a dead semaphore.
  pthread_mutex_lock(&sem->lock);
  wait_node_t *node = sem->nodes;
  while (node != NULL) {
    wait_node_t *next = node->next;
    if (node->waiter == NULL) {
      fire_fd(node->fd);
      free(node);
    }
    node = next;
  }
  sem->nodes = NULL;
  pthread_mutex_unlock(&sem->lock);
  pthread_mutex_destroy(&sem->lock);
  free(sem);
}

const accel_error_state_t *accel_host_semaphore_error(
    accel_drv_semaphore_t *semaphore) {
  return &semaphore->error;
}

accel_status_t accel_host_semaphore_query(accel_drv_semaphore_t *sem,
                                          uint64_t *out_value) {
  *out_value = atomic_load_explicit(&sem->value, memory_order_acquire);
  return accel_error_state_report(&sem->error);
}

accel_status_t accel_host_semaphore_signal(accel_drv_semaphore_t *sem,
                                           uint64_t value) {
  ACCEL_RETURN_IF_ERROR(accel_error_state_report(&sem->error));
  uint64_t current = atomic_load_explicit(&sem->value, memory_order_relaxed);
  do {
    if (value <= current) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "semaphore signal to %llu is not above its current "
                         "value %llu",
                         (unsigned long long)value,
                         (unsigned long long)current);
    }
    // Seq_cst: the store must precede wake_nodes' node_count load (Dekker).
  } while (!atomic_compare_exchange_weak_explicit(
      &sem->value, &current, value, memory_order_seq_cst,
      memory_order_relaxed));
  wake_nodes(sem, false);
  return ACCEL_OK;
}

void accel_host_semaphore_signal_max(accel_drv_semaphore_t *sem,
                                     uint64_t value) {
  uint64_t current = atomic_load_explicit(&sem->value, memory_order_relaxed);
  while (value > current) {
    // Seq_cst: as in accel_host_semaphore_signal.
    if (atomic_compare_exchange_weak_explicit(&sem->value, &current, value,
                                              memory_order_seq_cst,
                                              memory_order_relaxed)) {
      wake_nodes(sem, false);
      return;
    }
  }
}

void accel_host_semaphore_signal_single(accel_drv_semaphore_t *sem,
                                        uint64_t value) {
  // Relaxed load: this thread is the only writer of the value.
  if (value <= atomic_load_explicit(&sem->value, memory_order_relaxed)) {
    return;
  }
  // Release: a waiter that sees the value sees the work before it.
  atomic_store_explicit(&sem->value, value, memory_order_release);
  accel_host_light_fence();
  if (atomic_load_explicit(&sem->node_count, memory_order_relaxed) != 0) {
    wake_nodes(sem, false);
  }
}

void accel_host_semaphore_fail(accel_drv_semaphore_t *sem,
                               accel_status_t status, const char *message) {
  if (accel_error_state_set(&sem->error, status, "%s",
                            message != NULL && message[0] != '\0'
                                ? message
                                : accel_status_name(status))) {
    atomic_thread_fence(memory_order_seq_cst);  // failure before node_count
    wake_nodes(sem, true);
  }
}

// Checks the wait condition. Returns OK when satisfied, NOT_READY when not,
// or a semaphore's failure (with message) when it decides the wait.
static accel_status_t check_wait_condition(uint32_t count, accel_drv_semaphore_t *const *sems,
                            const uint64_t *values, accel_wait_mode_t mode,
                            uint32_t *out_index) {
  int failed_index = -1;
  uint32_t reached = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t v = atomic_load_explicit(&sems[i]->value, memory_order_seq_cst);
    if (v >= values[i]) {
      if (mode == ACCEL_WAIT_ANY) {
        if (out_index != NULL) {
          *out_index = i;
        }
        return ACCEL_OK;
      }
      reached++;
    } else if (failed_index < 0 &&
               accel_error_state_code(&sems[i]->error) != ACCEL_OK) {
      failed_index = (int)i;
    }
  }
  if (failed_index >= 0) {
    if (out_index != NULL) {
      *out_index = (uint32_t)failed_index;
    }
    return accel_error_state_report(&sems[failed_index]->error);
  }
  return reached == count ? ACCEL_OK : ACCEL_ERROR_NOT_READY;
}

void accel_host_waiter_wake(accel_host_waiter_t *waiter) {
  // Release: the woken thread reads *cancel after seeing the word.
  atomic_store_explicit(&waiter->word, 1, memory_order_release);
  accel_host_futex_wake_all(&waiter->word);
}

// Whether |waiter|'s owner cancelled the wait (|waiter| may be NULL).
static bool wait_cancelled(const accel_host_waiter_t *waiter) {
  // Acquire: pairs with the canceller's release of its reason.
  return waiter != NULL && waiter->cancel != NULL &&
         atomic_load_explicit(waiter->cancel, memory_order_acquire) != 0;
}

// Spins first: a parked thread takes tens of microseconds to wake. The
// first yield comes at the spin's first clock read: a wait that outlasts 64
// polls is likely on work that another thread of this CPU (an engine or a
// worker on an oversubscribed machine) has to run. Returns the wait's result,
// or ACCEL_ERROR_NOT_READY (no message) when the spin ran out.
static accel_status_t wait_spin(uint32_t count,
                                accel_drv_semaphore_t *const *sems,
                                const uint64_t *values, accel_wait_mode_t mode,
                                uint32_t *out_index,
                                const accel_host_waiter_t *waiter,
                                accel_host_spin_t *spin) {
  for (;;) {
    accel_host_cpu_relax();
    accel_status_t st = check_wait_condition(count, sems, values, mode, out_index);
    if (st != ACCEL_ERROR_NOT_READY) {
      return st;
    }
    if (wait_cancelled(waiter)) {
      return accel_error(ACCEL_ERROR_ABORTED, "semaphore wait cancelled");
    }
    if (!accel_host_spin_continue(spin)) {
      return ACCEL_ERROR_NOT_READY;
    }
  }
}

// Registers |nodes| (one per semaphore) so that signals wake |waiter|.
static void wait_register(uint32_t count, accel_drv_semaphore_t *const *sems,
                          wait_node_t *nodes, accel_host_waiter_t *waiter) {
  for (uint32_t i = 0; i < count; ++i) {
    nodes[i] = (wait_node_t){.waiter = waiter, .fd = -1};
    pthread_mutex_lock(&sems[i]->lock);
    list_add_locked(sems[i], &nodes[i]);
    pthread_mutex_unlock(&sems[i]->lock);
  }
  accel_host_heavy_fence();  // registration before the first re-check
}

static void wait_unregister(uint32_t count, accel_drv_semaphore_t *const *sems,
                            wait_node_t *nodes) {
  for (uint32_t i = 0; i < count; ++i) {
    pthread_mutex_lock(&sems[i]->lock);
    list_remove_locked(sems[i], &nodes[i]);
    pthread_mutex_unlock(&sems[i]->lock);
  }
}

// Sleeps on |waiter|'s futex word, registered, until the wait is decided
// or |deadline| passes (the timeout's message counts from |start_ns|).
static accel_status_t wait_sleep(uint32_t count,
                                 accel_drv_semaphore_t *const *sems,
                                 const uint64_t *values, accel_wait_mode_t mode,
                                 uint32_t *out_index,
                                 accel_host_waiter_t *waiter,
                                 uint64_t deadline, uint64_t start_ns) {
  for (;;) {
    // Relaxed reset, then the seq_cst re-check: a signal after the reset
    // sets the word again, so the futex wait below cannot miss it.
    atomic_store_explicit(&waiter->word, 0, memory_order_seq_cst);
    accel_status_t st = check_wait_condition(count, sems, values, mode, out_index);
    if (st != ACCEL_ERROR_NOT_READY) {
      return st;
    }
    if (wait_cancelled(waiter)) {
      return accel_error(ACCEL_ERROR_ABORTED, "semaphore wait cancelled");
    }
    uint64_t now = accel_host_now_ns();
    if (now >= deadline) {
      return accel_error(ACCEL_ERROR_TIMEOUT,
                         "semaphore wait timed out after %llu ns",
                         (unsigned long long)(now - start_ns));
    }
    accel_host_futex_wait(&waiter->word, 0, deadline);
  }
}

accel_status_t accel_host_semaphore_wait_ex(
    uint32_t count, accel_drv_semaphore_t *const *sems, const uint64_t *values,
    accel_wait_mode_t mode, uint64_t timeout_ns, uint32_t *out_index,
    accel_host_waiter_t *waiter, uint64_t spin_ns) {
  accel_status_t st = check_wait_condition(count, sems, values, mode, out_index);
  if (st != ACCEL_ERROR_NOT_READY) {
    return st;
  }
  if (timeout_ns == 0) {
    return accel_error(ACCEL_ERROR_TIMEOUT,
                       "semaphore wait: value not reached (timeout 0)");
  }
  accel_host_spin_t spin =
      accel_host_spin_start(spin_ns < timeout_ns ? spin_ns : timeout_ns, 0);
  st = wait_spin(count, sems, values, mode, out_index, waiter, &spin);
  if (st != ACCEL_ERROR_NOT_READY) {
    return st;
  }

  uint64_t deadline = accel_host_deadline(timeout_ns);
  accel_host_waiter_t local = {.cancel = NULL};
  if (waiter == NULL) {
    waiter = &local;
  }
  atomic_store_explicit(&waiter->word, 0, memory_order_relaxed);
  wait_node_t nodes_stack[8];
  wait_node_t *nodes = nodes_stack;
  if (count > 8) {
    nodes = calloc(count, sizeof(*nodes));
    if (nodes == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "semaphore wait: cannot allocate %u wait nodes",
                         count);
    }
  }
  wait_register(count, sems, nodes, waiter);
  st = wait_sleep(count, sems, values, mode, out_index, waiter, deadline,
                  spin.start);
  wait_unregister(count, sems, nodes);
  if (nodes != nodes_stack) {
    free(nodes);
  }
  return st;
}

accel_status_t accel_host_semaphore_wait(
    uint32_t count, accel_drv_semaphore_t *const *sems, const uint64_t *values,
    accel_wait_mode_t mode, uint64_t timeout_ns, uint32_t *out_index) {
  uint64_t spin_ns = sems[0]->device->spin_ns;
  return accel_host_semaphore_wait_ex(count, sems, values, mode, timeout_ns,
                                      out_index, NULL, spin_ns);
}

accel_status_t accel_host_semaphore_fd(accel_drv_semaphore_t *sem,
                                       uint64_t value, int *out_fd) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    return accel_error(ACCEL_ERROR_IO, "semaphore fd: eventfd failed: %s",
                       strerror(errno));
  }
  wait_node_t *node = calloc(1, sizeof(*node));
  if (node == NULL) {
    close(fd);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "semaphore fd: cannot allocate a wait node");
  }
  node->fd = dup(fd);
  if (node->fd < 0) {
    int e = errno;
    free(node);
    close(fd);
    return accel_error(ACCEL_ERROR_IO, "semaphore fd: dup failed: %s",
                       strerror(e));
  }
  node->value = value;
  pthread_mutex_lock(&sem->lock);
  list_add_locked(sem, node);
  accel_host_heavy_fence();
  // Re-check after registering: a signal that raced ahead of the
  // registration did not see this node.
  bool done =
      atomic_load_explicit(&sem->value, memory_order_seq_cst) >= value ||
      accel_error_state_code(&sem->error) != ACCEL_OK;
  if (done) {
    list_remove_locked(sem, node);
    fire_fd(node->fd);
    free(node);
  }
  pthread_mutex_unlock(&sem->lock);
  *out_fd = fd;
  return ACCEL_OK;
}
