// Device health: state, RAS counts, the members (streams, DMA queues) a
// fatal fault or a reset fails, the watchdog over their progress, and the
// event source (eventfd and callback). docs/health.md specifies it.
//
// One lock per device guards everything here; it is taken on creation and
// destruction of streams and DMA queues, on faults and by the watchdog,
// never on the submit or completion paths. The watchdog is one thread per
// device that has a watched member (none otherwise), or the test's calls
// of accel_health_watchdog_check with an injected clock.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/driver_health.h"
#include "core/error.h"
#include "core/health_impl.h"
#include "core/lock.h"

// Watchdog check period: a quarter of the shortest deadline, within these.
#define CHECK_PERIOD_MIN_NS 1000000ull        // 1 ms
#define CHECK_PERIOD_MAX_NS 1000000000ull     // 1 s

// A state change or a corrected fault to announce once the lock is dropped.
typedef struct health_event {
  bool pending;
  bool state_changed;
  accel_device_state_t state;
  accel_status_t status;
  char message[256];
} health_event_t;

struct accel_health {
  pthread_mutex_t lock;
  // Set (release) when the device is lost, after |lost_message|; cleared by
  // a device reset. Read without the lock by accel_health_check_lost.
  _Atomic uint32_t lost;
  // Guarded by |lock|.
  accel_device_state_t state;
  uint64_t ras_counts[ACCEL_RAS_CLASS_COUNT];
  uint64_t watchdog_expiries;
  uint64_t resets;
  uint64_t state_changes;
  uint64_t last_progress_ns;
  accel_status_t last_status;
  char last_message[256];
  char lost_message[ACCEL_ERROR_MESSAGE_MAX];
  // A member retired something since the last watchdog expiry.
  bool progress_since_expiry;
  accel_health_member_t *members;
  int event_fd;  // -1 until accel_device_health_fd asks
  accel_device_health_fn_t fn;
  void *fn_data;
  uint64_t (*now)(void *ctx);
  void *now_ctx;
  bool manual_clock;  // a test drives the checks
  pthread_t thread;
  bool thread_started;
  bool stopping;
  pthread_cond_t cond;  // wakes the watchdog thread (CLOCK_MONOTONIC)
};

static uint64_t monotonic_now(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *accel_device_state_name(accel_device_state_t state) {
  switch (state) {
    case ACCEL_DEVICE_STATE_HEALTHY:
      return "healthy";
    case ACCEL_DEVICE_STATE_DEGRADED:
      return "degraded";
    case ACCEL_DEVICE_STATE_LOST:
      return "lost";
  }
  return "unknown";
}

static const char *ras_class_name(uint32_t ras_class) {
  static const char *const k_names[] = {"corrected", "uncorrected", "fatal"};
  return ras_class < ACCEL_RAS_CLASS_COUNT ? k_names[ras_class] : "unknown";
}

static void set_last_locked(struct accel_health *h, accel_status_t status,
                            const char *message) {
  ACCEL_ASSERT_HELD(&h->lock);
  h->last_status = status;
  snprintf(h->last_message, sizeof(h->last_message), "%s", message);
}

static void set_state_locked(struct accel_health *h, accel_device_state_t state,
                             accel_status_t status, const char *message,
                             health_event_t *event) {
  ACCEL_ASSERT_HELD(&h->lock);
  if (h->state == state) {
    return;
  }
  h->state = state;
  h->state_changes++;
  event->pending = true;
  event->state_changed = true;
  event->state = state;
  event->status = status;
  snprintf(event->message, sizeof(event->message), "%s", message);
}

// Fails every member with |status| and |message|.
static void fail_all_locked(struct accel_health *h, accel_status_t status,
                            const char *message) {
  ACCEL_ASSERT_HELD(&h->lock);
  for (accel_health_member_t *m = h->members; m != NULL; m = m->next) {
    m->ops->fail(m, status, message);
  }
}

// Marks the device lost and fails every member with ACCEL_ERROR_DEVICE_LOST.
static void lose_device_locked(accel_device_t *device, const char *why,
                               health_event_t *event) {
  struct accel_health *h = device->health;
  ACCEL_ASSERT_HELD(&h->lock);
  if (h->state == ACCEL_DEVICE_STATE_LOST) {
    return;
  }
  snprintf(h->lost_message, sizeof(h->lost_message), "device %s lost: %s",
           device->info.id, why);
  // Release: a reader that sees the flag finds the message.
  atomic_store_explicit(&h->lost, 1, memory_order_release);
  set_state_locked(h, ACCEL_DEVICE_STATE_LOST, ACCEL_ERROR_DEVICE_LOST,
                   h->lost_message, event);
  fail_all_locked(h, ACCEL_ERROR_DEVICE_LOST, h->lost_message);
}

// Announces |event| (no lock held): the eventfd for a state change, then
// the callback.
static void notify(accel_device_t *device, const health_event_t *event) {
  if (!event->pending) {
    return;
  }
  struct accel_health *h = device->health;
  pthread_mutex_lock(&h->lock);
  int fd = h->event_fd;
  accel_device_health_fn_t fn = h->fn;
  void *fn_data = h->fn_data;
  pthread_mutex_unlock(&h->lock);
  if (event->state_changed && fd >= 0) {
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof(one));
    (void)n;  // an eventfd write of 1 fails only on counter overflow
  }
  if (fn != NULL) {
    fn(device, event->state, event->status, event->message, fn_data);
  }
}

// The backend's fault sink (accel_drv_fault_sink_fn_t); |ctx| is the device.
static void fault_sink(void *ctx, uint32_t ras_class, accel_status_t status,
                       const char *message) {
  accel_device_t *device = ctx;
  struct accel_health *h = device->health;
  health_event_t event = {0};
  char what[256];
  snprintf(what, sizeof(what), "%s fault: %s", ras_class_name(ras_class),
           message);
  pthread_mutex_lock(&h->lock);
  if (ras_class < ACCEL_RAS_CLASS_COUNT) {
    h->ras_counts[ras_class]++;
  }
  set_last_locked(h, status, what);
  if (ras_class == ACCEL_RAS_FATAL) {
    lose_device_locked(device, what, &event);
  } else if (ras_class == ACCEL_RAS_UNCORRECTED) {
    if (h->state == ACCEL_DEVICE_STATE_HEALTHY) {
      set_state_locked(h, ACCEL_DEVICE_STATE_DEGRADED, status, what, &event);
    }
  } else if (!event.pending) {
    event.pending = true;  // a corrected fault: the callback only
    event.state = h->state;
    event.status = ACCEL_OK;
    snprintf(event.message, sizeof(event.message), "%s", what);
  }
  pthread_mutex_unlock(&h->lock);
  notify(device, &event);
}

accel_status_t accel_health_init(accel_device_t *device) {
  struct accel_health *h = calloc(1, sizeof(*h));
  if (h == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "device health: cannot allocate %zu bytes", sizeof(*h));
  }
  pthread_mutex_init(&h->lock, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cond, &attr);
  pthread_condattr_destroy(&attr);
  h->event_fd = -1;
  h->now = monotonic_now;
  device->health = h;
  if (device->driver->health != NULL) {
    device->driver->health->set_sink(device->drv, fault_sink, device);
  }
  return ACCEL_OK;
}

static void stop_thread(struct accel_health *h) {
  pthread_mutex_lock(&h->lock);
  bool started = h->thread_started;
  h->stopping = true;
  pthread_cond_broadcast(&h->cond);
  pthread_mutex_unlock(&h->lock);
  if (started) {
    pthread_join(h->thread, NULL);
  }
  pthread_mutex_lock(&h->lock);
  h->thread_started = false;
  h->stopping = false;
  pthread_mutex_unlock(&h->lock);
}

void accel_health_fini(accel_device_t *device) {
  struct accel_health *h = device->health;
  if (h == NULL) {
    return;
  }
  stop_thread(h);
  if (h->event_fd >= 0) {
    close(h->event_fd);
  }
  pthread_cond_destroy(&h->cond);
  pthread_mutex_destroy(&h->lock);
  free(h);
  device->health = NULL;
}

static uint64_t period_locked(struct accel_health *h) {
  ACCEL_ASSERT_HELD(&h->lock);
  uint64_t shortest = 0;
  for (accel_health_member_t *m = h->members; m != NULL; m = m->next) {
    if (m->watchdog_ns != 0 && (shortest == 0 || m->watchdog_ns < shortest)) {
      shortest = m->watchdog_ns;
    }
  }
  if (shortest == 0) {
    return 0;
  }
  uint64_t period = shortest / 4;
  return period < CHECK_PERIOD_MIN_NS   ? CHECK_PERIOD_MIN_NS
         : period > CHECK_PERIOD_MAX_NS ? CHECK_PERIOD_MAX_NS
                                        : period;
}

uint64_t accel_health_check_period_ns(accel_device_t *device) {
  struct accel_health *h = device->health;
  pthread_mutex_lock(&h->lock);
  uint64_t period = period_locked(h);
  pthread_mutex_unlock(&h->lock);
  return period;
}

// Observes |m|'s progress at |now|: returns true when it has pending work
// that has not moved since m->since_ns.
static bool observe_locked(struct accel_health *h, accel_health_member_t *m,
                           uint64_t now) {
  ACCEL_ASSERT_HELD(&h->lock);
  uint64_t retired = 0, submitted = 0;
  bool failed = false;
  m->ops->progress(m, &retired, &submitted, &failed);
  if (retired != m->seen_retired) {
    m->seen_retired = retired;
    m->since_ns = now;
    h->last_progress_ns = now;
    h->progress_since_expiry = true;
    return false;
  }
  if (failed || m->expired || submitted <= retired) {
    m->since_ns = now;  // idle (or out of the watchdog's hands)
    return false;
  }
  return true;
}

// Fails the stalled member |m| and moves the device's state; see
// docs/health.md ("Watchdog").
static void expire_locked(accel_device_t *device, accel_health_member_t *m,
                          uint64_t now, health_event_t *event) {
  struct accel_health *h = device->health;
  ACCEL_ASSERT_HELD(&h->lock);
  char msg[256];
  snprintf(msg, sizeof(msg),
           "%s \"%s\": %s #%llu has run for %llu ms without completing "
           "(watchdog deadline %llu ms)",
           m->kind, m->name, m->unit,
           (unsigned long long)(m->seen_retired + 1),
           (unsigned long long)((now - m->since_ns) / 1000000ull),
           (unsigned long long)(m->watchdog_ns / 1000000ull));
  m->expired = true;
  m->ops->fail(m, ACCEL_ERROR_TIMEOUT, msg);
  h->watchdog_expiries++;
  set_last_locked(h, ACCEL_ERROR_TIMEOUT, msg);
  if (h->state == ACCEL_DEVICE_STATE_HEALTHY) {
    set_state_locked(h, ACCEL_DEVICE_STATE_DEGRADED, ACCEL_ERROR_TIMEOUT, msg,
                     event);
  } else if (h->state == ACCEL_DEVICE_STATE_DEGRADED &&
             !h->progress_since_expiry) {
    char why[320];
    snprintf(why, sizeof(why),
             "its queues stopped retiring work (watchdog: %s)", msg);
    lose_device_locked(device, why, event);
  }
  h->progress_since_expiry = false;
}

static uint32_t check_locked(accel_device_t *device, health_event_t *event) {
  struct accel_health *h = device->health;
  ACCEL_ASSERT_HELD(&h->lock);
  uint64_t now = h->now(h->now_ctx);
  // Progress first, over every member, so that a stall is judged against
  // the device's progress in this same pass.
  uint32_t stalled = 0;
  for (accel_health_member_t *m = h->members; m != NULL; m = m->next) {
    if (observe_locked(h, m, now)) {
      stalled++;
    }
  }
  uint32_t failed = 0;
  for (accel_health_member_t *m = h->members; m != NULL && stalled != 0;
       m = m->next) {
    if (m->watchdog_ns != 0 && !m->expired &&
        h->state != ACCEL_DEVICE_STATE_LOST && observe_locked(h, m, now) &&
        now - m->since_ns >= m->watchdog_ns) {
      expire_locked(device, m, now, event);
      failed++;
    }
  }
  return failed;
}

uint32_t accel_health_watchdog_check(accel_device_t *device) {
  struct accel_health *h = device->health;
  health_event_t event = {0};
  pthread_mutex_lock(&h->lock);
  uint32_t failed = check_locked(device, &event);
  pthread_mutex_unlock(&h->lock);
  notify(device, &event);
  return failed;
}

static void *watchdog_main(void *arg) {
  accel_device_t *device = arg;
  struct accel_health *h = device->health;
  pthread_mutex_lock(&h->lock);
  while (!h->stopping) {
    uint64_t period = period_locked(h);
    if (period == 0) {
      pthread_cond_wait(&h->cond, &h->lock);
      continue;
    }
    uint64_t until = monotonic_now(NULL) + period;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                          .tv_nsec = (long)(until % 1000000000ull)};
    int rc = pthread_cond_timedwait(&h->cond, &h->lock, &ts);
    if (rc != ETIMEDOUT || h->stopping || h->manual_clock) {
      continue;
    }
    health_event_t event = {0};
    check_locked(device, &event);
    pthread_mutex_unlock(&h->lock);
    notify(device, &event);
    pthread_mutex_lock(&h->lock);
  }
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

void accel_health_set_clock(accel_device_t *device, uint64_t (*now)(void *ctx),
                            void *ctx) {
  struct accel_health *h = device->health;
  // Manual first, so that no registration starts a thread meanwhile.
  pthread_mutex_lock(&h->lock);
  h->manual_clock = true;
  pthread_mutex_unlock(&h->lock);
  stop_thread(h);
  pthread_mutex_lock(&h->lock);
  h->now = now != NULL ? now : monotonic_now;
  h->now_ctx = ctx;
  for (accel_health_member_t *m = h->members; m != NULL; m = m->next) {
    m->since_ns = h->now(h->now_ctx);
  }
  pthread_mutex_unlock(&h->lock);
}

accel_status_t accel_health_check_lost(accel_device_t *device) {
  struct accel_health *h = device->health;
  // Acquire: pairs with lose_device_locked's release (the message is set).
  if (__builtin_expect(atomic_load_explicit(&h->lost, memory_order_acquire) ==
                           0,
                       1)) {
    return ACCEL_OK;
  }
  pthread_mutex_lock(&h->lock);
  char msg[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(msg, sizeof(msg), "%s", h->lost_message);
  bool lost = h->state == ACCEL_DEVICE_STATE_LOST;
  pthread_mutex_unlock(&h->lock);
  return lost ? accel_error(ACCEL_ERROR_DEVICE_LOST, "%s", msg) : ACCEL_OK;
}

accel_status_t accel_health_register(accel_device_t *device,
                                     accel_health_member_t *member) {
  struct accel_health *h = device->health;
  if (member->watchdog_ns == 0) {
    member->watchdog_ns = device->runtime->watchdog_ns;
  }
  pthread_mutex_lock(&h->lock);
  if (h->state == ACCEL_DEVICE_STATE_LOST) {
    char msg[ACCEL_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof(msg), "%s", h->lost_message);
    pthread_mutex_unlock(&h->lock);
    return accel_error(ACCEL_ERROR_DEVICE_LOST,
                       "%s (reset it with ACCEL_RESET_DEVICE)", msg);
  }
  member->seen_retired = 0;
  member->expired = false;
  member->since_ns = h->now(h->now_ctx);
  member->prev = NULL;
  member->next = h->members;
  if (h->members != NULL) {
    h->members->prev = member;
  }
  h->members = member;
  if (member->watchdog_ns != 0 && !h->thread_started && !h->manual_clock) {
    int rc = pthread_create(&h->thread, NULL, watchdog_main, device);
    if (rc != 0) {
      h->members = member->next;
      if (h->members != NULL) {
        h->members->prev = NULL;
      }
      pthread_mutex_unlock(&h->lock);
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "device %s: cannot start the watchdog thread: %s",
                         device->info.id, strerror(rc));
    }
    pthread_setname_np(h->thread, "accel-watchdog");
    h->thread_started = true;
  }
  // A shorter deadline shortens the thread's period: wake it to recompute.
  pthread_cond_broadcast(&h->cond);
  pthread_mutex_unlock(&h->lock);
  return ACCEL_OK;
}

void accel_health_unregister(accel_device_t *device,
                             accel_health_member_t *member) {
  struct accel_health *h = device->health;
  pthread_mutex_lock(&h->lock);
  if (member->prev != NULL) {
    member->prev->next = member->next;
  } else {
    h->members = member->next;
  }
  if (member->next != NULL) {
    member->next->prev = member->prev;
  }
  member->next = member->prev = NULL;
  pthread_mutex_unlock(&h->lock);
}

// The size of accel_device_health_t's fields up to last_progress_ns: the
// smallest struct a caller may pass (16: struct_size, state, and the first
// count would be too little to be useful).
#define HEALTH_MIN_SIZE 16u

accel_status_t accel_device_health(accel_device_t *device,
                                   accel_device_health_t *out_health) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_health != NULL, "out_health (NULL)");
  if (out_health->struct_size < HEALTH_MIN_SIZE) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_device_health: struct_size %u is below the "
                       "minimum %u (set it to sizeof(accel_device_health_t))",
                       out_health->struct_size, HEALTH_MIN_SIZE);
  }
  struct accel_health *h = device->health;
  accel_device_health_t r = {.struct_size = sizeof(r)};
  pthread_mutex_lock(&h->lock);
  uint64_t now = h->now(h->now_ctx);
  for (accel_health_member_t *m = h->members; m != NULL; m = m->next) {
    (void)observe_locked(h, m, now);
  }
  r.state = h->state;
  memcpy(r.ras_counts, h->ras_counts, sizeof(r.ras_counts));
  r.watchdog_expiries = h->watchdog_expiries;
  r.resets = h->resets;
  r.state_changes = h->state_changes;
  r.last_progress_ns = h->last_progress_ns;
  r.last_status = (uint32_t)h->last_status;
  snprintf(r.last_message, sizeof(r.last_message), "%s", h->last_message);
  pthread_mutex_unlock(&h->lock);
  uint32_t size = out_health->struct_size < sizeof(r)
                      ? out_health->struct_size
                      : (uint32_t)sizeof(r);
  memcpy(out_health, &r, size);
  out_health->struct_size = size;
  return ACCEL_OK;
}

accel_status_t accel_device_health_fd(accel_device_t *device, int *out_fd) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_fd != NULL, "out_fd (NULL)");
  struct accel_health *h = device->health;
  pthread_mutex_lock(&h->lock);
  if (h->event_fd < 0) {
    h->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (h->event_fd < 0) {
      int err = errno;
      pthread_mutex_unlock(&h->lock);
      return accel_error(ACCEL_ERROR_UNAVAILABLE,
                         "device %s: eventfd for health events: %s",
                         device->info.id, strerror(err));
    }
  }
  *out_fd = h->event_fd;
  pthread_mutex_unlock(&h->lock);
  return ACCEL_OK;
}

accel_status_t accel_device_health_callback_set(accel_device_t *device,
                                                accel_device_health_fn_t fn,
                                                void *user_data) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  struct accel_health *h = device->health;
  pthread_mutex_lock(&h->lock);
  h->fn = fn;
  h->fn_data = fn != NULL ? user_data : NULL;
  pthread_mutex_unlock(&h->lock);
  return ACCEL_OK;
}

// The smallest accel_fault_desc_t: up to and including delay_ns.
#define FAULT_DESC_MIN_SIZE offsetof(accel_fault_desc_t, queue_name)

accel_status_t accel_device_inject_fault(accel_device_t *device,
                                         const accel_fault_desc_t *desc) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  if (desc->struct_size < FAULT_DESC_MIN_SIZE) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "fault desc: struct_size %u is below the minimum %zu",
                       desc->struct_size, FAULT_DESC_MIN_SIZE);
  }
  accel_fault_desc_t d = {.struct_size = sizeof(d)};
  memcpy(&d, desc,
         desc->struct_size < sizeof(d) ? desc->struct_size : sizeof(d));
  if (d.kind > ACCEL_FAULT_HANG) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "fault desc: unknown kind %u (0 corrected, 1 "
                       "uncorrected, 2 fatal, 3 hang)",
                       d.kind);
  }
  bool anywhere = d.queue_name == NULL || d.queue_name[0] == '\0';
  bool now = d.command_index == 0 && d.delay_ns == 0 && anywhere;
  if (now && d.kind == ACCEL_FAULT_HANG) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "fault desc: a hang needs a command to hit (a "
                       "command_index, a delay_ns or a queue_name)");
  }
  const accel_drv_health_ops_t *ops = device->driver->health;
  if (ops == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "device %s: the %s backend cannot inject faults",
                       device->info.id, device->driver->name);
  }
  if (now) {
    char msg[128];
    snprintf(msg, sizeof(msg), "injected into %s by accel_device_inject_fault",
             device->info.id);
    fault_sink(device, d.kind,
               d.kind == ACCEL_FAULT_CORRECTED     ? ACCEL_OK
               : d.kind == ACCEL_FAULT_UNCORRECTED ? ACCEL_ERROR_IO
                                                   : ACCEL_ERROR_DEVICE_LOST,
               msg);
    return ACCEL_OK;
  }
  uint64_t t = monotonic_now(NULL);
  accel_drv_fault_t fault = {
      .kind = d.kind,
      .command_index = d.command_index,
      .not_before_ns = d.delay_ns == 0                 ? 0
                       : d.delay_ns > UINT64_MAX - t ? UINT64_MAX
                                                     : t + d.delay_ns,
      .queue_name = anywhere ? NULL : d.queue_name,
  };
  accel_status_t st = ops->inject_fault(device->drv, &fault);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "device %s: injecting a fault",
                               device->info.id);
  }
  return ACCEL_OK;
}

static const char *scope_name(uint32_t scope) {
  static const char *const k_names[] = {"queue", "context", "device"};
  return scope <= ACCEL_RESET_DEVICE ? k_names[scope] : "unknown";
}

accel_status_t accel_device_reset(accel_device_t *device,
                                  accel_reset_scope_t scope) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  if ((uint32_t)scope > ACCEL_RESET_DEVICE) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "device reset: unknown scope %u (0 queue, 1 context, "
                       "2 device)",
                       (uint32_t)scope);
  }
  struct accel_health *h = device->health;
  char msg[160];
  snprintf(msg, sizeof(msg), "aborted by a %s reset of device %s",
           scope_name(scope), device->info.id);
  pthread_mutex_lock(&h->lock);
  if (h->state == ACCEL_DEVICE_STATE_LOST && scope != ACCEL_RESET_DEVICE) {
    char lost[ACCEL_ERROR_MESSAGE_MAX];
    snprintf(lost, sizeof(lost), "%s", h->lost_message);
    pthread_mutex_unlock(&h->lock);
    return accel_error(ACCEL_ERROR_DEVICE_LOST,
                       "device reset (%s scope): %s; only a device-scope "
                       "reset recovers a lost device",
                       scope_name(scope), lost);
  }
  fail_all_locked(h, ACCEL_ERROR_ABORTED, msg);
  pthread_mutex_unlock(&h->lock);
  const accel_drv_health_ops_t *ops = device->driver->health;
  if (ops != NULL && scope != ACCEL_RESET_QUEUE) {
    accel_status_t st = ops->reset(device->drv, scope);
    if (st != ACCEL_OK) {
      return accel_error_context(st, "device %s: %s reset", device->info.id,
                                 scope_name(scope));
    }
  }
  health_event_t event = {0};
  pthread_mutex_lock(&h->lock);
  h->resets++;
  if (scope != ACCEL_RESET_QUEUE) {
    char why[160];
    snprintf(why, sizeof(why), "%s reset of device %s", scope_name(scope),
             device->info.id);
    set_state_locked(h, ACCEL_DEVICE_STATE_HEALTHY, ACCEL_OK, why, &event);
    h->progress_since_expiry = false;
    // Relaxed: only a device-scope reset gets here with the device lost,
    // and new members are refused under the lock until then.
    atomic_store_explicit(&h->lost, 0, memory_order_relaxed);
  }
  pthread_mutex_unlock(&h->lock);
  notify(device, &event);
  return ACCEL_OK;
}
