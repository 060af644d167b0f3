// The shared-memory membership store: one file in /dev/shm per group
// (docs/cluster.md has the layout). Every member owns a slot: a heartbeat
// word (generation and time in one 64-bit word, so that taking over a dead
// slot and renewing one's own are single compare-and-swaps), two proposal
// buffers for epoch records, and a topology buffer. The header's |current|
// word names the agreed record (epoch and the slot holding it); a proposer
// fills its own buffer for epoch E+1 and swings |current| with one CAS.
// Readers copy a record seqlock-style: read |current|, copy, read it again.
// Changes bump a futex word that waiting members sleep on.
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cluster/membership.h"
#include "cluster/store_impl.h"
#include "core/error.h"

#define SHM_MAGIC 0x6c63746c65636361ull  // "accelctl"
#define SHM_VERSION 1u
// Room for one topology in JSON form per slot: a 2-socket, 8-device,
// 8-NIC machine's serialized topology is about 40 KiB; pages of the file
// that no one writes stay unbacked.
#define SHM_TOPO_MAX (256u * 1024u)
#define SHM_SLOTS ACCEL_CLUSTER_MAX_RANKS
#define BEAT_TIME_BITS 48
#define BEAT_TIME_MASK ((1ull << BEAT_TIME_BITS) - 1)

typedef struct shm_record_buf {
  _Atomic uint64_t epoch;
  _Atomic uint32_t count;
  uint32_t pad;
  _Atomic uint64_t members[ACCEL_CLUSTER_MAX_RANKS];
} shm_record_buf_t;

typedef struct shm_slot {
  // generation << 48 | heartbeat time in us (0: free or left).
  _Atomic uint64_t beat;
  _Atomic int32_t pid;
  uint32_t pad;
  char host[64];
  shm_record_buf_t proposal[2];  // by epoch parity
  _Atomic uint64_t topo_epoch;  // epoch of topo[], 0 while being written
  _Atomic uint32_t topo_length;
  uint32_t pad2;
  char topo[SHM_TOPO_MAX];
} shm_slot_t;

typedef struct shm_header {
  uint64_t magic;
  uint32_t version;
  uint32_t slot_count;
  uint64_t slot_size;
  // The creator's settings, for status readers.
  uint64_t interval_ns;
  uint64_t timeout_ns;
  // epoch << 8 | (slot + 1) of the agreed record; 0: none yet.
  _Atomic uint64_t current;
  // Bumped on every change waiting members must see (futex word).
  _Atomic uint32_t seq;
  uint32_t pad;
  char reserved[4096 - 64];
} shm_header_t;

typedef struct shm_layout {
  shm_header_t header;
  shm_slot_t slots[SHM_SLOTS];
} shm_layout_t;

typedef struct shm_store {
  accel_cluster_store_t base;
  shm_layout_t *map;
  int slot;          // ours; -1 before join
  uint64_t beat;     // our last heartbeat word
  uint32_t seen_seq;
} shm_store_t;

static const accel_cluster_store_ops_t k_shm_ops;

// A fence. GCC's TSan rejects atomic_thread_fence, so that build uses a
// locked read-modify-write of a private word, a full fence on the hardware
// as well (as lib/drv/host does).
static inline void shm_fence(memory_order order) {
#if defined(__SANITIZE_THREAD__)
  (void)order;
  _Atomic int word = 0;
  (void)atomic_exchange_explicit(&word, 1, memory_order_seq_cst);
#else
  atomic_thread_fence(order);
#endif
}

static uint64_t beat_gen(uint64_t beat) { return beat >> BEAT_TIME_BITS; }
static uint64_t beat_us(uint64_t beat) { return beat & BEAT_TIME_MASK; }
static uint64_t member_id(int slot, uint64_t gen) {
  return gen << 8 | (uint64_t)(slot + 1);
}
static int id_slot(uint64_t id) { return (int)(id & 0xff) - 1; }
static uint64_t id_gen(uint64_t id) { return id >> 8; }

static void shm_path(const char *name, char *out, size_t size) {
  snprintf(out, size, "/accel-cluster-%s", name);
}

static void shm_notify(shm_layout_t *map) {
  // Release: a waiter that sees the new sequence also sees the change.
  atomic_fetch_add_explicit(&map->header.seq, 1, memory_order_release);
  syscall(SYS_futex, &map->header.seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

// Whether the heartbeat word |beat| is alive at |now_us| for |timeout_ns|.
static bool beat_alive(uint64_t beat, uint64_t now_us, uint64_t timeout_ns) {
  uint64_t t = beat_us(beat);
  if (t == 0) {
    return false;
  }
  return now_us < t || (now_us - t) * 1000ull < timeout_ns;
}

static uint64_t now_us_of(uint64_t now_ns) {
  // Never 0 (0 marks a free slot) and within 48 bits.
  uint64_t us = (now_ns / 1000ull) & BEAT_TIME_MASK;
  return us == 0 ? 1 : us;
}

accel_status_t accel_cluster_shm_open(const accel_cluster_store_config_t *config,
                                      bool create,
                                      accel_cluster_store_t **out_store) {
  char path[96];
  shm_path(config->name, path, sizeof(path));
  int fd = shm_open(path, O_RDWR | (create ? O_CREAT : 0), 0600);
  if (fd < 0) {
    if (errno == ENOENT) {
      return accel_error(ACCEL_ERROR_NOT_FOUND,
                         "cluster group \"%s\": no shared-memory store "
                         "/dev/shm%s", config->name, path);
    }
    return accel_error(ACCEL_ERROR_IO, "cluster group \"%s\": shm_open %s: %s",
                       config->name, path, strerror(errno));
  }
  accel_status_t status = ACCEL_OK;
  // The first opener sizes and stamps the file; the lock orders it before
  // every other opener's checks.
  if (flock(fd, LOCK_EX) != 0) {
    status = accel_error(ACCEL_ERROR_IO, "cluster group \"%s\": flock: %s",
                         config->name, strerror(errno));
    goto err_close;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    status = accel_error(ACCEL_ERROR_IO, "cluster group \"%s\": fstat: %s",
                         config->name, strerror(errno));
    goto err_close;
  }
  bool fresh = st.st_size == 0;
  if (fresh && !create) {
    status = accel_error(ACCEL_ERROR_NOT_FOUND,
                         "cluster group \"%s\": store /dev/shm%s is empty",
                         config->name, path);
    goto err_close;
  }
  if (fresh && ftruncate(fd, (off_t)sizeof(shm_layout_t)) != 0) {
    status = accel_error(ACCEL_ERROR_IO, "cluster group \"%s\": ftruncate: %s",
                         config->name, strerror(errno));
    goto err_close;
  }
  if (!fresh && (uint64_t)st.st_size != sizeof(shm_layout_t)) {
    status = accel_error(ACCEL_ERROR_FORMAT,
                         "cluster group \"%s\": /dev/shm%s is %lld bytes, "
                         "not the %zu of an accel group of version %u",
                         config->name, path, (long long)st.st_size,
                         sizeof(shm_layout_t), SHM_VERSION);
    goto err_close;
  }
  shm_layout_t *map = mmap(NULL, sizeof(shm_layout_t), PROT_READ | PROT_WRITE,
                           MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    status = accel_error(ACCEL_ERROR_IO, "cluster group \"%s\": mmap: %s",
                         config->name, strerror(errno));
    goto err_close;
  }
  if (fresh) {
    map->header.version = SHM_VERSION;
    map->header.slot_count = SHM_SLOTS;
    map->header.slot_size = sizeof(shm_slot_t);
    map->header.interval_ns = config->interval_ns;
    map->header.timeout_ns = config->timeout_ns;
    map->header.magic = SHM_MAGIC;
  } else if (map->header.magic != SHM_MAGIC ||
             map->header.version != SHM_VERSION ||
             map->header.slot_count != SHM_SLOTS ||
             map->header.slot_size != sizeof(shm_slot_t)) {
    status = accel_error(ACCEL_ERROR_FORMAT,
                         "cluster group \"%s\": /dev/shm%s is not an accel "
                         "group store of version %u", config->name, path,
                         SHM_VERSION);
    goto err_unmap;
  }
  shm_store_t *store = calloc(1, sizeof(*store));
  if (store == NULL) {
    status = accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster store: no memory");
    goto err_unmap;
  }
  flock(fd, LOCK_UN);
  close(fd);
  store->base.ops = &k_shm_ops;
  store->base.config = *config;
  store->base.config.etcd_endpoints = NULL;
  // Every member judges heartbeats by the creator's settings, so that all
  // agree on who failed.
  store->base.config.interval_ns = map->header.interval_ns;
  store->base.config.timeout_ns = map->header.timeout_ns;
  store->map = map;
  store->slot = -1;
  *out_store = &store->base;
  return ACCEL_OK;

err_unmap:
  munmap(map, sizeof(shm_layout_t));
err_close:
  close(fd);
  return status;
}

accel_status_t accel_cluster_shm_remove(const char *name) {
  char path[96];
  shm_path(name, path, sizeof(path));
  if (shm_unlink(path) != 0) {
    if (errno == ENOENT) {
      return accel_error(ACCEL_ERROR_NOT_FOUND,
                         "cluster group \"%s\": no shared-memory store", name);
    }
    return accel_error(ACCEL_ERROR_IO, "cluster group \"%s\": shm_unlink: %s",
                       name, strerror(errno));
  }
  return ACCEL_OK;
}

static void shm_destroy(accel_cluster_store_t *base) {
  shm_store_t *store = (shm_store_t *)base;
  munmap(store->map, sizeof(shm_layout_t));
  free(store);
}

static accel_status_t shm_join(accel_cluster_store_t *base, uint64_t now_ns,
                               uint64_t *out_id) {
  shm_store_t *store = (shm_store_t *)base;
  uint64_t now_us = now_us_of(now_ns);
  // Free slots first (never used, or left), then those of failed members:
  // a slot whose member is merely late is taken over only when no other is.
  for (int i = 0; i < 2 * SHM_SLOTS; ++i) {
    shm_slot_t *slot = &store->map->slots[i % SHM_SLOTS];
    uint64_t old = atomic_load_explicit(&slot->beat, memory_order_acquire);
    if (beat_alive(old, now_us, base->config.timeout_ns) ||
        (i < SHM_SLOTS && beat_us(old) != 0)) {
      continue;
    }
    uint64_t beat = (beat_gen(old) + 1) << BEAT_TIME_BITS | now_us;
    // Acq_rel: the winner owns the slot; it sees the previous owner's writes
    // and readers that see the new word see a slot that is taken.
    if (!atomic_compare_exchange_strong_explicit(&slot->beat, &old, beat,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed)) {
      continue;
    }
    atomic_store_explicit(&slot->topo_epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&slot->pid, (int32_t)getpid(), memory_order_relaxed);
    accel_cluster_hostname(slot->host);
    store->slot = i % SHM_SLOTS;
    store->beat = beat;
    shm_notify(store->map);
    *out_id = member_id(store->slot, beat_gen(beat));
    return ACCEL_OK;
  }
  return accel_error(ACCEL_ERROR_BUSY,
                     "cluster group \"%s\" is full: %d live members",
                     base->config.name, SHM_SLOTS);
}

static accel_status_t shm_heartbeat(accel_cluster_store_t *base,
                                    uint64_t now_ns) {
  shm_store_t *store = (shm_store_t *)base;
  shm_slot_t *slot = &store->map->slots[store->slot];
  uint64_t beat = (store->beat & ~BEAT_TIME_MASK) | now_us_of(now_ns);
  uint64_t expected = store->beat;
  // Relaxed: the word carries no other data; a failed CAS means another
  // process took the slot over (our heartbeat had expired).
  if (!atomic_compare_exchange_strong_explicit(&slot->beat, &expected, beat,
                                               memory_order_relaxed,
                                               memory_order_relaxed)) {
    return accel_error(ACCEL_ERROR_ABORTED,
                       "cluster group \"%s\": this member's slot was taken "
                       "over (its heartbeat was older than the timeout)",
                       base->config.name);
  }
  store->beat = beat;
  return ACCEL_OK;
}

static accel_status_t shm_leave(accel_cluster_store_t *base) {
  shm_store_t *store = (shm_store_t *)base;
  if (store->slot < 0) {
    return ACCEL_OK;
  }
  shm_slot_t *slot = &store->map->slots[store->slot];
  uint64_t expected = store->beat;
  // Relaxed: as in heartbeat; the notify below publishes the change.
  atomic_compare_exchange_strong_explicit(&slot->beat, &expected,
                                          store->beat & ~BEAT_TIME_MASK,
                                          memory_order_relaxed,
                                          memory_order_relaxed);
  store->slot = -1;
  shm_notify(store->map);
  return ACCEL_OK;
}

// Copies the agreed record (epoch 0 when none is agreed yet).
// ACCEL_ERROR_FORMAT when the file's current word names no slot.
static accel_status_t read_record(shm_layout_t *map,
                                  accel_cluster_record_t *out) {
  for (;;) {
    // Acquire: pairs with the proposer's release CAS, so the buffer it names
    // is filled.
    uint64_t w1 = atomic_load_explicit(&map->header.current,
                                       memory_order_acquire);
    memset(out, 0, sizeof(*out));
    if (w1 == 0) {
      return ACCEL_OK;
    }
    uint64_t epoch = w1 >> 8;
    int slot = (int)(w1 & 0xff) - 1;
    if (slot < 0 || slot >= SHM_SLOTS) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "cluster store: the epoch record names slot %d of "
                         "%d (the file is damaged)", slot, SHM_SLOTS);
    }
    shm_record_buf_t *buf = &map->slots[slot].proposal[epoch & 1];
    out->epoch = atomic_load_explicit(&buf->epoch, memory_order_relaxed);
    uint32_t count = atomic_load_explicit(&buf->count, memory_order_relaxed);
    if (count > ACCEL_CLUSTER_MAX_RANKS) {
      count = 0;  // torn: caught by the check below
    }
    out->count = count;
    for (uint32_t i = 0; i < count; ++i) {
      out->members[i] = atomic_load_explicit(&buf->members[i],
                                             memory_order_relaxed);
    }
    // Acquire fence: the copies above happen before the re-read of the word
    // (seqlock reader).
    shm_fence(memory_order_acquire);
    uint64_t w2 = atomic_load_explicit(&map->header.current,
                                       memory_order_relaxed);
    if (w1 == w2 && out->epoch == epoch) {
      out->version = w1;
      return ACCEL_OK;
    }
  }
}

static accel_status_t shm_snapshot(accel_cluster_store_t *base,
                                   uint64_t now_ns,
                                   accel_cluster_record_t *out_record,
                                   accel_cluster_live_t *out_live) {
  shm_store_t *store = (shm_store_t *)base;
  // Read the sequence first: a change after this point wakes the next wait.
  store->seen_seq = atomic_load_explicit(&store->map->header.seq,
                                         memory_order_acquire);
  ACCEL_RETURN_IF_ERROR(read_record(store->map, out_record));
  uint64_t now_us = now_us_of(now_ns);
  out_live->count = 0;
  for (int i = 0; i < SHM_SLOTS; ++i) {
    shm_slot_t *slot = &store->map->slots[i];
    uint64_t beat = atomic_load_explicit(&slot->beat, memory_order_acquire);
    if (!beat_alive(beat, now_us, base->config.timeout_ns)) {
      continue;
    }
    accel_cluster_live_member_t *m = &out_live->members[out_live->count++];
    m->id = member_id(i, beat_gen(beat));
    m->age_ns = now_us > beat_us(beat) ? (now_us - beat_us(beat)) * 1000 : 0;
    m->pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);
    memcpy(m->host, slot->host, sizeof(m->host));
    m->host[sizeof(m->host) - 1] = '\0';
  }
  // Ids are generation << 8 | slot: sort them so the order is by id.
  accel_cluster_live_sort(out_live);
  return ACCEL_OK;
}

static accel_status_t shm_propose(accel_cluster_store_t *base,
                                  const accel_cluster_record_t *expected,
                                  const accel_cluster_record_t *next,
                                  bool *out_won) {
  shm_store_t *store = (shm_store_t *)base;
  shm_record_buf_t *buf = &store->map->slots[store->slot].proposal[next->epoch & 1];
  atomic_store_explicit(&buf->epoch, next->epoch, memory_order_relaxed);
  atomic_store_explicit(&buf->count, next->count, memory_order_relaxed);
  for (uint32_t i = 0; i < next->count; ++i) {
    atomic_store_explicit(&buf->members[i], next->members[i],
                          memory_order_relaxed);
  }
  uint64_t old = expected->version;
  uint64_t word = next->epoch << 8 | (uint64_t)(store->slot + 1);
  // Release: a reader that sees the new word sees the buffer filled above.
  *out_won = atomic_compare_exchange_strong_explicit(
      &store->map->header.current, &old, word, memory_order_release,
      memory_order_relaxed);
  if (*out_won) {
    shm_notify(store->map);
  }
  return ACCEL_OK;
}

static accel_status_t shm_publish(accel_cluster_store_t *base, uint64_t epoch,
                                  uint32_t rank, const char *json,
                                  size_t length) {
  shm_store_t *store = (shm_store_t *)base;
  if (length >= SHM_TOPO_MAX) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cluster group \"%s\": topology of %zu bytes exceeds "
                       "the shared-memory store's %u", base->config.name,
                       length, SHM_TOPO_MAX - 1);
  }
  shm_slot_t *slot = &store->map->slots[store->slot];
  // Only this member writes its slot: mark it unpublished, write, then
  // publish the epoch (release: a reader seeing it sees the text).
  atomic_store_explicit(&slot->topo_epoch, 0, memory_order_relaxed);
  shm_fence(memory_order_release);
  memcpy(slot->topo, json, length);
  atomic_store_explicit(&slot->topo_length, (uint32_t)length,
                        memory_order_relaxed);
  atomic_store_explicit(&slot->topo_epoch, epoch, memory_order_release);
  shm_notify(store->map);
  return ACCEL_OK;
}

static accel_status_t shm_fetch(accel_cluster_store_t *base, uint64_t epoch,
                                uint32_t rank, uint64_t id, char **out_json,
                                size_t *out_length) {
  shm_store_t *store = (shm_store_t *)base;
  *out_json = NULL;
  int s = id_slot(id);
  if (s < 0 || s >= SHM_SLOTS) {
    return ACCEL_OK;
  }
  shm_slot_t *slot = &store->map->slots[s];
  uint64_t beat = atomic_load_explicit(&slot->beat, memory_order_acquire);
  // Acquire: pairs with the publisher's release store of the epoch.
  if (beat_gen(beat) != id_gen(id) ||
      atomic_load_explicit(&slot->topo_epoch, memory_order_acquire) != epoch) {
    return ACCEL_OK;
  }
  uint32_t length = atomic_load_explicit(&slot->topo_length,
                                         memory_order_relaxed);
  if (length >= SHM_TOPO_MAX) {
    return ACCEL_OK;
  }
  char *json = malloc(length + 1);
  if (json == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster store: no memory");
  }
  memcpy(json, slot->topo, length);
  json[length] = '\0';
  // Acquire fence, then re-check: the text was not rewritten while copied.
  shm_fence(memory_order_acquire);
  if (atomic_load_explicit(&slot->topo_epoch, memory_order_relaxed) != epoch) {
    free(json);
    return ACCEL_OK;
  }
  *out_json = json;
  *out_length = length;
  return ACCEL_OK;
}

static void shm_wait(accel_cluster_store_t *base, uint64_t timeout_ns) {
  shm_store_t *store = (shm_store_t *)base;
  struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000ull),
                        .tv_nsec = (long)(timeout_ns % 1000000000ull)};
  // Returns at once when the sequence moved since the last snapshot.
  syscall(SYS_futex, &store->map->header.seq, FUTEX_WAIT, store->seen_seq, &ts,
          NULL, 0);
}

static void shm_wake(accel_cluster_store_t *base) {
  shm_notify(((shm_store_t *)base)->map);
}

static accel_status_t shm_heartbeat_age(accel_cluster_store_t *base,
                                        uint64_t id, uint64_t now_ns,
                                        uint64_t *out_age_ns) {
  shm_store_t *store = (shm_store_t *)base;
  *out_age_ns = UINT64_MAX;
  int s = id_slot(id);
  if (s < 0 || s >= SHM_SLOTS) {
    return ACCEL_OK;
  }
  uint64_t beat = atomic_load_explicit(&store->map->slots[s].beat,
                                       memory_order_acquire);
  uint64_t now_us = now_us_of(now_ns);
  if (beat_gen(beat) == id_gen(id) && beat_us(beat) != 0) {
    *out_age_ns = now_us > beat_us(beat) ? (now_us - beat_us(beat)) * 1000 : 0;
  }
  return ACCEL_OK;
}

static const accel_cluster_store_ops_t k_shm_ops = {
    .destroy = shm_destroy,
    .join = shm_join,
    .leave = shm_leave,
    .heartbeat = shm_heartbeat,
    .snapshot = shm_snapshot,
    .propose = shm_propose,
    .publish = shm_publish,
    .fetch = shm_fetch,
    .wait = shm_wait,
    .wake = shm_wake,
    .heartbeat_age = shm_heartbeat_age,
};
