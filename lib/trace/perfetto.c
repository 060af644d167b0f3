// Perfetto protobuf writer: hand-encoded TracePackets (see perfetto.h).
#include "trace/perfetto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


// Field numbers (Perfetto's public protos).
enum {
  F_TRACE_PACKET = 1,
  // TracePacket
  F_TP_CLOCK_SNAPSHOT = 6,
  F_TP_TIMESTAMP = 8,
  F_TP_SEQUENCE_ID = 10,
  F_TP_TRACK_EVENT = 11,
  F_TP_SEQUENCE_FLAGS = 13,
  F_TP_TIMESTAMP_CLOCK_ID = 58,
  F_TP_TRACK_DESCRIPTOR = 60,
  // ClockSnapshot / Clock
  F_CS_CLOCKS = 1,
  F_CS_PRIMARY_TRACE_CLOCK = 2,
  F_CLOCK_ID = 1,
  F_CLOCK_TIMESTAMP = 2,
  // TrackDescriptor
  F_TD_UUID = 1,
  F_TD_NAME = 2,
  F_TD_PROCESS = 3,
  F_TD_THREAD = 4,
  F_TD_PARENT_UUID = 5,
  F_TD_COUNTER = 8,
  F_PD_PID = 1,
  F_PD_PROCESS_NAME = 6,
  F_THD_PID = 1,
  F_THD_TID = 2,
  F_THD_THREAD_NAME = 5,
  F_CD_UNIT = 3,
  // TrackEvent
  F_TE_DEBUG_ANNOTATIONS = 4,
  F_TE_TYPE = 9,
  F_TE_TRACK_UUID = 11,
  F_TE_CATEGORIES = 22,
  F_TE_NAME = 23,
  F_TE_COUNTER_VALUE = 30,
  F_TE_FLOW_IDS = 47,
  F_TE_TERMINATING_FLOW_IDS = 48,
  // DebugAnnotation
  F_DA_UINT_VALUE = 3,
  F_DA_INT_VALUE = 4,
  F_DA_STRING_VALUE = 6,
  F_DA_NAME = 10,
};

enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3,
       TYPE_COUNTER = 4 };
enum { CLOCK_REALTIME_ID = 1, CLOCK_MONOTONIC_ID = 3, CLOCK_BOOTTIME_ID = 6 };
enum { UNIT_TIME_NS = 1, UNIT_COUNT = 2, UNIT_SIZE_BYTES = 3 };
enum { SEQ_INCREMENTAL_STATE_CLEARED = 1 };

#define SEQ_DESCRIPTORS 1u
#define NO_VALUE UINT64_MAX

// A bounded protobuf encoder over caller storage; overflowing drops bytes
// and marks the message bad so that it is never written.
typedef struct pb {
  uint8_t *p;
  size_t n;
  size_t cap;
  bool bad;
} pb_t;

static void pb_bytes(pb_t *b, const void *data, size_t len) {
  if (b->bad || len > b->cap - b->n) {
    b->bad = true;
    return;
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
}

static void pb_varint(pb_t *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    uint8_t byte = (uint8_t)(v & 0x7f);
    v >>= 7;
    tmp[n++] = (uint8_t)(byte | (v ? 0x80 : 0));
  } while (v != 0);
  pb_bytes(b, tmp, n);
}

static void pb_tag(pb_t *b, uint32_t field, uint32_t wire) {
  pb_varint(b, ((uint64_t)field << 3) | wire);
}

static void pb_u64(pb_t *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, 0);
  pb_varint(b, v);
}

static void pb_fixed64(pb_t *b, uint32_t field, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) {
    le[i] = (uint8_t)(v >> (8 * i));
  }
  pb_tag(b, field, 1);
  pb_bytes(b, le, 8);
}

static void pb_str(pb_t *b, uint32_t field, const char *s) {
  size_t len = strlen(s);
  pb_tag(b, field, 2);
  pb_varint(b, len);
  pb_bytes(b, s, len);
}

static void pb_msg(pb_t *b, uint32_t field, const pb_t *sub) {
  if (sub->bad) {
    b->bad = true;
    return;
  }
  pb_tag(b, field, 2);
  pb_varint(b, sub->n);
  pb_bytes(b, sub->p, sub->n);
}

#define PB(name, size) \
  uint8_t name##_storage[size]; \
  pb_t name = {.p = name##_storage, .cap = size}

// ---------------------------------------------------------------------------

static void put_raw(accel_pf_writer_t *w, const void *data, size_t len) {
  if (len > sizeof(w->buf) - w->len) {
    accel_pf_flush(w);
  }
  if (len <= sizeof(w->buf) - w->len) {
    memcpy(w->buf + w->len, data, len);
    w->len += len;
  }
}

static void write_packet(accel_pf_writer_t *w, const pb_t *packet) {
  if (packet->bad) {
    return;
  }
  PB(head, 16);
  pb_tag(&head, F_TRACE_PACKET, 2);
  pb_varint(&head, packet->n);
  put_raw(w, head.p, head.n);
  put_raw(w, packet->p, packet->n);
}

bool accel_pf_flush(accel_pf_writer_t *w) {
  size_t off = 0;
  while (off < w->len && !w->failed) {
    ssize_t n = write(w->fd, w->buf + off, w->len - off);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      w->failed = true;
      w->error = errno;
      break;
    }
    off += (size_t)n;
  }
  w->len = 0;
  return !w->failed;
}

static bool bit_test(const uint8_t *bits, uint32_t id) {
  return (bits[id / 8] >> (id % 8)) & 1;
}
static void bit_set(uint8_t *bits, uint32_t id) {
  bits[id / 8] = (uint8_t)(bits[id / 8] | (1u << (id % 8)));
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// A writer's uuids and flow ids are the fixed ones of perfetto.h XORed with
// a mask drawn per trace, so that traces of two processes (or two files of
// one) concatenated for one view never share a track or a flow.
static uint64_t masked(const accel_pf_writer_t *w, uint64_t id) {
  uint64_t v = id ^ w->uuid_mask;
  return v != 0 ? v : id;  // 0 is "no uuid" to readers
}

static uint64_t track_uuid(const accel_pf_writer_t *w, uint32_t id) {
  return masked(w, accel_pf_track_uuid(id));
}

static uint64_t flow_id(const accel_pf_writer_t *w, uint32_t stream,
                        uint64_t seq) {
  return masked(w, accel_pf_flow_id(stream, seq));
}

// splitmix64's finalizer: spreads the bits of the seed over the mask.
static uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Writes the process descriptor of |pid| named |name| with uuid |uuid|.
static void describe_process(accel_pf_writer_t *w, uint64_t uuid, int32_t pid,
                             const char *name);

void accel_pf_begin(accel_pf_writer_t *w, int fd, int32_t pid,
                    const char *process_name,
                    const accel_pf_source_t *source) {
  // clock_gettime is async-signal-safe: the flight recorder begins here
  // from a fatal-signal handler.
  w->uuid_mask = mix64(clock_ns(CLOCK_REALTIME) ^
                       ((uint64_t)(uint32_t)pid << 32) ^
                       mix64(clock_ns(CLOCK_MONOTONIC) ^ (uintptr_t)w));
  w->fd = fd;
  w->failed = false;
  w->error = 0;
  w->pid = pid;
  w->process_name = process_name;
  w->source = *source;
  w->last_ts = 0;
  w->len = 0;
  memset(w->described, 0, sizeof(w->described));
  memset(w->counter_described, 0, sizeof(w->counter_described));
  memset(w->depth, 0, sizeof(w->depth));
  memset(w->sequence_started, 0, sizeof(w->sequence_started));
  memset(w->flows, 0, sizeof(w->flows));
  memset(w->starts, 0, sizeof(w->starts));
  w->filter_flows = false;

  // Clock snapshot: our timestamps are CLOCK_MONOTONIC; Perfetto's trace
  // clock is BOOTTIME. One snapshot lets the trace processor convert.
  PB(snap, 128);
  const struct {
    uint32_t id;
    clockid_t clock;
  } clocks[] = {{CLOCK_BOOTTIME_ID, CLOCK_BOOTTIME},
                {CLOCK_MONOTONIC_ID, CLOCK_MONOTONIC},
                {CLOCK_REALTIME_ID, CLOCK_REALTIME}};
  for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); ++i) {
    PB(c, 32);
    pb_u64(&c, F_CLOCK_ID, clocks[i].id);
    pb_u64(&c, F_CLOCK_TIMESTAMP, clock_ns(clocks[i].clock));
    pb_msg(&snap, F_CS_CLOCKS, &c);
  }
  pb_u64(&snap, F_CS_PRIMARY_TRACE_CLOCK, CLOCK_BOOTTIME_ID);
  PB(packet, 256);
  pb_msg(&packet, F_TP_CLOCK_SNAPSHOT, &snap);
  pb_u64(&packet, F_TP_SEQUENCE_ID, SEQ_DESCRIPTORS);
  pb_u64(&packet, F_TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
  bit_set(w->sequence_started, SEQ_DESCRIPTORS);
  write_packet(w, &packet);

  if (pid >= 0) {
    describe_process(w, masked(w, 1), pid,
                     process_name != NULL ? process_name : "accel");
  }
}

static void describe_process(accel_pf_writer_t *w, uint64_t uuid, int32_t pid,
                             const char *name) {
  PB(proc, 128);
  pb_u64(&proc, F_PD_PID, (uint64_t)(int64_t)pid);
  pb_str(&proc, F_PD_PROCESS_NAME, name);
  PB(td, 192);
  pb_u64(&td, F_TD_UUID, uuid);
  pb_msg(&td, F_TD_PROCESS, &proc);
  PB(p2, 256);
  pb_msg(&p2, F_TP_TRACK_DESCRIPTOR, &td);
  pb_u64(&p2, F_TP_SEQUENCE_ID, SEQ_DESCRIPTORS);
  write_packet(w, &p2);
}

// The pid of thread track |t|: its parent process track's, else the
// writer's.
static int32_t thread_pid(accel_pf_writer_t *w, const accel_trace_track_t *t) {
  accel_trace_track_t parent;
  memset(&parent, 0, sizeof(parent));
  if (t->parent != 0 &&
      w->source.describe(w->source.ctx, t->parent, &parent) &&
      parent.kind == ACCEL_TRACK_PROCESS) {
    return parent.tid;
  }
  return w->pid;
}

static void describe_track(accel_pf_writer_t *w, uint32_t id) {
  if (id == 0 || id >= ACCEL_PF_MAX_TRACKS || bit_test(w->described, id)) {
    return;
  }
  bit_set(w->described, id);
  accel_trace_track_t t;
  memset(&t, 0, sizeof(t));
  if (!w->source.describe(w->source.ctx, id, &t)) {
    t.kind = ACCEL_TRACK_DEVICE;
    snprintf(t.name, sizeof(t.name), "track %u", id);
  }
  if (t.kind == ACCEL_TRACK_PROCESS) {
    // A process of a trace that holds several (accel-trace convert): |tid|
    // holds its pid.
    describe_process(w, track_uuid(w, id), t.tid, t.name);
    return;
  }
  if (t.parent != 0) {
    describe_track(w, t.parent);
  }
  PB(td, 512);
  pb_u64(&td, F_TD_UUID, track_uuid(w, id));
  if (t.kind == ACCEL_TRACK_THREAD) {
    PB(th, 160);
    pb_u64(&th, F_THD_PID, (uint64_t)(int64_t)thread_pid(w, &t));
    pb_u64(&th, F_THD_TID, (uint64_t)(int64_t)t.tid);
    pb_str(&th, F_THD_THREAD_NAME, t.name);
    pb_msg(&td, F_TD_THREAD, &th);
  } else {
    pb_str(&td, F_TD_NAME, t.name);
    if (t.parent != 0 || w->pid >= 0) {
      pb_u64(&td, F_TD_PARENT_UUID,
             t.parent != 0 ? track_uuid(w, t.parent) : masked(w, 1));
    }
  }
  PB(packet, 640);
  pb_msg(&packet, F_TP_TRACK_DESCRIPTOR, &td);
  pb_u64(&packet, F_TP_SEQUENCE_ID, SEQ_DESCRIPTORS);
  write_packet(w, &packet);
}

static void describe_counter(accel_pf_writer_t *w, uint32_t owner,
                             uint32_t kind) {
  uint32_t bit = owner * ACCEL_CTR_COUNT + kind;
  if (owner >= ACCEL_PF_MAX_TRACKS / ACCEL_CTR_COUNT ||
      bit_test(w->counter_described, bit)) {
    return;
  }
  bit_set(w->counter_described, bit);
  describe_track(w, owner);
  accel_trace_track_t t;
  memset(&t, 0, sizeof(t));
  if (!w->source.describe(w->source.ctx, owner, &t)) {
    snprintf(t.name, sizeof(t.name), "track %u", owner);
  }
  char name[128];
  snprintf(name, sizeof(name), "%s %s", t.name, accel_counter_kind_name(kind));
  const char *unit = accel_counter_kind_unit(kind);
  PB(cd, 16);
  pb_u64(&cd, F_CD_UNIT,
         strcmp(unit, "bytes") == 0 ? UNIT_SIZE_BYTES
         : strcmp(unit, "ns") == 0  ? UNIT_TIME_NS
                                    : UNIT_COUNT);
  PB(td, 256);
  pb_u64(&td, F_TD_UUID, masked(w, accel_pf_counter_uuid(owner, kind)));
  pb_str(&td, F_TD_NAME, name);
  pb_u64(&td, F_TD_PARENT_UUID, track_uuid(w, owner));
  pb_msg(&td, F_TD_COUNTER, &cd);
  PB(packet, 320);
  pb_msg(&packet, F_TP_TRACK_DESCRIPTOR, &td);
  pb_u64(&packet, F_TP_SEQUENCE_ID, SEQ_DESCRIPTORS);
  write_packet(w, &packet);
}

static void annotate_u64(pb_t *te, const char *name, uint64_t v) {
  PB(da, 96);
  pb_str(&da, F_DA_NAME, name);
  pb_u64(&da, F_DA_UINT_VALUE, v);
  pb_msg(te, F_TE_DEBUG_ANNOTATIONS, &da);
}

static void annotate_str(pb_t *te, const char *name, const char *v) {
  PB(da, 640);
  pb_str(&da, F_DA_NAME, name);
  pb_str(&da, F_DA_STRING_VALUE, v);
  pb_msg(te, F_TE_DEBUG_ANNOTATIONS, &da);
}

static void emit_track_event(accel_pf_writer_t *w, uint64_t ts,
                             uint32_t sequence, const pb_t *te) {
  PB(packet, 1024);
  pb_u64(&packet, F_TP_TIMESTAMP, ts);
  pb_u64(&packet, F_TP_TIMESTAMP_CLOCK_ID, CLOCK_MONOTONIC_ID);
  pb_u64(&packet, F_TP_SEQUENCE_ID, sequence);
  if (sequence < ACCEL_PF_MAX_TRACKS + 64 &&
      !bit_test(w->sequence_started, sequence)) {
    // The first packet of a sequence: nothing from before applies (we use
    // no interning, but readers expect the flag before track events).
    bit_set(w->sequence_started, sequence);
    pb_u64(&packet, F_TP_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
  }
  pb_msg(&packet, F_TP_TRACK_EVENT, te);
  write_packet(w, &packet);
  if (ts > w->last_ts) {
    w->last_ts = ts;
  }
}

static void begin_te(const accel_pf_writer_t *w, pb_t *te, uint32_t type,
                     uint32_t track, const char *name) {
  pb_u64(te, F_TE_TYPE, type);
  pb_u64(te, F_TE_TRACK_UUID, track_uuid(w, track));
  if (name != NULL) {
    pb_str(te, F_TE_CATEGORIES, "accel");
    pb_str(te, F_TE_NAME, name);
  }
}

// Flow sets: open addressing over ids (0 = empty, 1 = deleted).
static bool set_op(uint64_t *table, uint64_t id, bool insert) {
  uint32_t h = (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 50);
  for (uint32_t i = 0; i < ACCEL_PF_FLOW_SLOTS; ++i) {
    uint64_t *slot = &table[(h + i) % ACCEL_PF_FLOW_SLOTS];
    if (insert && (*slot == 0 || *slot == 1)) {
      *slot = id;
      return true;
    }
    if (!insert && *slot == id) {
      *slot = 1;
      return true;
    }
    if (*slot == 0) {
      return false;
    }
  }
  return false;
}

static bool flow_slot(accel_pf_writer_t *w, uint64_t id, bool insert) {
  return set_op(w->flows, id, insert);
}

void accel_pf_expect_start(accel_pf_writer_t *w, uint32_t stream,
                           uint64_t seq) {
  w->filter_flows = true;
  set_op(w->starts, flow_id(w, stream, seq), true);
}

static const char *k_status[] = {
    "ok",          "invalid_argument", "out_of_memory", "not_found",
    "unsupported", "unavailable",      "not_ready",     "timeout",
    "aborted",     "device_lost",      "format",        "version",
    "io",          "busy",             "internal"};

static const char *status_text(uint32_t status) {
  return status < sizeof(k_status) / sizeof(k_status[0]) ? k_status[status]
                                                         : "unknown";
}

const char *accel_pf_cmd_name(uint32_t kind, uint32_t dir) {
  switch (kind) {
    case ACCEL_TRACE_CMD_HOST_CALL:
      return "host_call";
    case ACCEL_TRACE_CMD_FILL:
      return "fill";
    case ACCEL_TRACE_CMD_COPY:
      return dir == ACCEL_TRACE_DIR_HOST_TO_DEVICE   ? "copy h2d"
             : dir == ACCEL_TRACE_DIR_DEVICE_TO_HOST ? "copy d2h"
                                                : "copy d2d";
    case ACCEL_TRACE_CMD_SIGNAL:
      return "signal";
    case ACCEL_TRACE_CMD_WAIT:
      return "wait";
    case ACCEL_TRACE_CMD_LAUNCH:
      return "launch";
    case ACCEL_TRACE_CMD_EXECUTE:
      return "execute";
    default:
      return "command";
  }
}

static const char *track_name(accel_pf_writer_t *w, uint32_t id, char *buf,
                              size_t size) {
  accel_trace_track_t t;
  memset(&t, 0, sizeof(t));
  if (w->source.describe(w->source.ctx, id, &t)) {
    snprintf(buf, size, "%s", t.name);
  } else {
    snprintf(buf, size, "track %u", id);
  }
  return buf;
}

static void slice_end(accel_pf_writer_t *w, uint64_t ts, uint32_t seq_id,
                      uint32_t track, uint32_t status) {
  if (track == 0 || track >= ACCEL_PF_MAX_TRACKS || w->depth[track] == 0) {
    return;  // its begin was not recorded (overwritten or before start)
  }
  w->depth[track]--;
  PB(te, 256);
  begin_te(w, &te, TYPE_SLICE_END, track, NULL);
  if (status != 0) {
    annotate_str(&te, "status", status_text(status));
  }
  emit_track_event(w, ts, seq_id, &te);
}

static void slice_begin(accel_pf_writer_t *w, uint64_t ts, uint32_t seq_id,
                        uint32_t track, const char *name, pb_t *extra) {
  describe_track(w, track);
  if (track < ACCEL_PF_MAX_TRACKS && w->depth[track] < 255) {
    w->depth[track]++;
  }
  PB(te, 768);
  begin_te(w, &te, TYPE_SLICE_BEGIN, track, name);
  if (extra != NULL) {
    pb_bytes(&te, extra->p, extra->n);
  }
  emit_track_event(w, ts, seq_id, &te);
}

static void instant(accel_pf_writer_t *w, uint64_t ts, uint32_t seq_id,
                    uint32_t track, const char *name, pb_t *extra) {
  describe_track(w, track);
  PB(te, 896);
  begin_te(w, &te, TYPE_INSTANT, track, name);
  if (extra != NULL) {
    pb_bytes(&te, extra->p, extra->n);
  }
  emit_track_event(w, ts, seq_id, &te);
}

void accel_pf_counter(accel_pf_writer_t *w, uint64_t ts, uint32_t owner,
                      uint32_t kind, uint64_t value) {
  if (kind >= ACCEL_CTR_COUNT) {
    return;
  }
  describe_counter(w, owner, kind);
  PB(te, 64);
  pb_u64(&te, F_TE_TYPE, TYPE_COUNTER);
  pb_u64(&te, F_TE_TRACK_UUID,
         masked(w, accel_pf_counter_uuid(owner, kind)));
  pb_u64(&te, F_TE_COUNTER_VALUE, value);
  emit_track_event(w, ts, SEQ_DESCRIPTORS, &te);
}

// One recorded event being written: the writer, the producing thread (its
// sequence), the event, and the annotations being built for it.
typedef struct pf_event_ctx {
  accel_pf_writer_t *w;
  uint32_t thread;
  uint32_t seq_id;
  const accel_trace_rec_t *ev;
  pb_t *x;
} pf_event_ctx_t;

typedef void (*pf_event_fn)(pf_event_ctx_t *c);

static void annotate_bytes(pf_event_ctx_t *c) {
  if (c->ev->b != 0) {
    annotate_u64(c->x, "bytes", c->ev->b);
  }
}

static void on_cmd_enqueue(pf_event_ctx_t *c) {
  const accel_trace_rec_t *ev = c->ev;
  accel_pf_writer_t *w = c->w;
  char obj[64];
  char name[96];
  uint64_t flow = flow_id(w, ev->track, ev->a);
  annotate_str(c->x, "stream", track_name(w, ev->track, obj, sizeof(obj)));
  annotate_u64(c->x, "seq", ev->a);
  annotate_bytes(c);
  if ((!w->filter_flows || set_op(w->starts, flow, false)) &&
      flow_slot(w, flow, true)) {
    pb_fixed64(c->x, F_TE_FLOW_IDS, flow);
  }
  snprintf(name, sizeof(name), "enqueue %s",
           accel_pf_cmd_name(ev->aux & 0xff, ev->aux >> 8));
  instant(w, ev->ts, c->seq_id, c->thread, name, c->x);
}

static void on_cmd_start(pf_event_ctx_t *c) {
  const accel_trace_rec_t *ev = c->ev;
  uint64_t flow = flow_id(c->w, ev->track, ev->a);
  annotate_u64(c->x, "seq", ev->a);
  annotate_bytes(c);
  if (flow_slot(c->w, flow, false)) {
    pb_fixed64(c->x, F_TE_TERMINATING_FLOW_IDS, flow);
  }
  slice_begin(c->w, ev->ts, c->seq_id, ev->track,
              accel_pf_cmd_name(ev->aux & 0xff, ev->aux >> 8), c->x);
}

static void on_cmd_end(pf_event_ctx_t *c) {
  const accel_trace_rec_t *ev = c->ev;
  // A launch inside the command ends with it (a launch command's slice holds
  // the kernel's; other commands nest only inside an execute's).
  if ((ev->aux & 0xff) == ACCEL_TRACE_CMD_LAUNCH &&
      ev->track < ACCEL_PF_MAX_TRACKS && c->w->depth[ev->track] >= 2) {
    slice_end(c->w, ev->ts, c->seq_id, ev->track, ev->aux >> 8);
  }
  slice_end(c->w, ev->ts, c->seq_id, ev->track, ev->aux >> 8);
}

static void on_launch_end(pf_event_ctx_t *c) {
  slice_end(c->w, c->ev->ts, c->seq_id, c->ev->track, c->ev->aux);
}

static void on_launch_begin(pf_event_ctx_t *c) {
  const accel_trace_rec_t *ev = c->ev;
  const char *kernel = c->w->source.string(c->w->source.ctx, (uint32_t)ev->b);
  annotate_u64(c->x, "seq", ev->a);
  slice_begin(c->w, ev->ts, c->seq_id, ev->track,
              kernel != NULL ? kernel : "launch", c->x);
}

static void on_sem_signal(pf_event_ctx_t *c) {
  annotate_u64(c->x, "semaphore", c->ev->a);
  annotate_u64(c->x, "value", c->ev->b);
  instant(c->w, c->ev->ts, c->seq_id, c->thread, "semaphore signal", c->x);
}

static void on_sem_wait(pf_event_ctx_t *c) {
  annotate_u64(c->x, "semaphore", c->ev->a);
  annotate_u64(c->x, "value", c->ev->b);
  slice_begin(c->w, c->ev->ts, c->seq_id, c->thread, "semaphore wait", c->x);
}

static void on_sem_wake(pf_event_ctx_t *c) {
  slice_end(c->w, c->ev->ts, c->seq_id, c->thread, c->ev->aux);
}

static void on_event_record(pf_event_ctx_t *c) {
  char obj[64];
  annotate_u64(c->x, "event", c->ev->a);
  annotate_str(c->x, "stream",
               track_name(c->w, c->ev->track, obj, sizeof(obj)));
  annotate_u64(c->x, "value", c->ev->b);
  instant(c->w, c->ev->ts, c->seq_id, c->thread, "event record", c->x);
}

static void on_event_complete(pf_event_ctx_t *c) {
  annotate_u64(c->x, "event", c->ev->a);
  annotate_u64(c->x, "timestamp_ns", c->ev->b);
  instant(c->w, c->ev->ts, c->seq_id, c->ev->track, "event complete", c->x);
}

static void on_buffer(pf_event_ctx_t *c) {
  const accel_trace_rec_t *ev = c->ev;
  char obj[64];
  bool alloc = ev->type == ACCEL_TEV_BUF_ALLOC;
  bool failed = alloc && ev->a == 0;
  annotate_str(c->x, "device", track_name(c->w, ev->track, obj, sizeof(obj)));
  if (failed) {
    annotate_str(c->x, "status", status_text(ev->aux >> 8));
  } else {
    annotate_u64(c->x, "address", ev->a);
  }
  annotate_u64(c->x, "bytes", ev->b);
  instant(c->w, ev->ts, c->seq_id, c->thread,
          failed  ? "buffer alloc failed"
          : alloc ? "buffer alloc"
                  : "buffer free",
          c->x);
}

static void on_error(pf_event_ctx_t *c) {
  char name[96];
  const char *msg = c->w->source.string(c->w->source.ctx, (uint32_t)c->ev->a);
  annotate_str(c->x, "message", msg != NULL ? msg : "(message dropped)");
  snprintf(name, sizeof(name), "error %s", status_text(c->ev->aux));
  instant(c->w, c->ev->ts, c->seq_id, c->thread, name, c->x);
}

static void on_kernel_message(pf_event_ctx_t *c) {
  const char *line =
      c->w->source.string(c->w->source.ctx, (uint32_t)c->ev->a);
  annotate_str(c->x, "message", line != NULL ? line : "(message dropped)");
  instant(c->w, c->ev->ts, c->seq_id, c->thread,
          c->ev->aux == 1 ? "kernel assertion" : "kernel print", c->x);
}

// "key=value key=value ...": one argument per pair.
static void on_tensor_summary(pf_event_ctx_t *c) {
  const char *text =
      c->w->source.string(c->w->source.ctx, (uint32_t)c->ev->a);
  if (text == NULL) {
    annotate_str(c->x, "summary", "(dropped)");
  }
  while (text != NULL && *text != '\0') {
    const char *end = strchr(text, ' ');
    size_t len = end != NULL ? (size_t)(end - text) : strlen(text);
    const char *eq = memchr(text, '=', len);
    if (eq != NULL && len < 160) {
      char key[160], value[160];
      size_t kl = (size_t)(eq - text);
      memcpy(key, text, kl);
      key[kl] = '\0';
      memcpy(value, eq + 1, len - kl - 1);
      value[len - kl - 1] = '\0';
      annotate_str(c->x, key, value);
    }
    text = end != NULL ? end + 1 : NULL;
  }
  instant(c->w, c->ev->ts, c->seq_id, c->thread, "tensor summary", c->x);
}

static void on_stream_fail(pf_event_ctx_t *c) {
  annotate_u64(c->x, "seq", c->ev->a);
  annotate_str(c->x, "status", status_text(c->ev->aux));
  instant(c->w, c->ev->ts, c->seq_id, c->ev->track, "stream failed", c->x);
}

static void on_lifecycle(pf_event_ctx_t *c) {
  static const char *const k_life[] = {
      "runtime create", "runtime destroy", "device open",
      "device close",   "stream create",   "stream destroy"};
  const accel_trace_rec_t *ev = c->ev;
  if (ev->aux >= sizeof(k_life) / sizeof(k_life[0])) {
    return;
  }
  if (ev->track != 0) {
    char obj[64];
    annotate_str(c->x, "object",
                 track_name(c->w, ev->track, obj, sizeof(obj)));
  }
  instant(c->w, ev->ts, c->seq_id, c->thread, k_life[ev->aux], c->x);
}

static void on_counter(pf_event_ctx_t *c) {
  accel_pf_counter(c->w, c->ev->ts, c->ev->track, c->ev->aux, c->ev->a);
}

static void on_clock_pair(pf_event_ctx_t *c) {
  annotate_u64(c->x, "host_ns", c->ev->a);
  annotate_u64(c->x, "device_ns", c->ev->b);
  instant(c->w, c->ev->ts, c->seq_id, c->ev->track, "clock pair", c->x);
}

// One writer per recorded event type (NULL: nothing to write).
static const pf_event_fn k_pf_event_fns[ACCEL_TEV_TYPE_COUNT] = {
    [ACCEL_TEV_CMD_ENQUEUE] = on_cmd_enqueue,
    [ACCEL_TEV_CMD_START] = on_cmd_start,
    [ACCEL_TEV_CMD_END] = on_cmd_end,
    [ACCEL_TEV_LAUNCH_BEGIN] = on_launch_begin,
    [ACCEL_TEV_LAUNCH_END] = on_launch_end,
    [ACCEL_TEV_SEM_SIGNAL] = on_sem_signal,
    [ACCEL_TEV_SEM_WAIT] = on_sem_wait,
    [ACCEL_TEV_SEM_WAKE] = on_sem_wake,
    [ACCEL_TEV_EVENT_RECORD] = on_event_record,
    [ACCEL_TEV_EVENT_COMPLETE] = on_event_complete,
    [ACCEL_TEV_BUF_ALLOC] = on_buffer,
    [ACCEL_TEV_BUF_FREE] = on_buffer,
    [ACCEL_TEV_ERROR] = on_error,
    [ACCEL_TEV_STREAM_FAIL] = on_stream_fail,
    [ACCEL_TEV_LIFECYCLE] = on_lifecycle,
    [ACCEL_TEV_COUNTER] = on_counter,
    [ACCEL_TEV_CLOCK_PAIR] = on_clock_pair,
    [ACCEL_TEV_KERNEL_MESSAGE] = on_kernel_message,
    [ACCEL_TEV_TENSOR_SUMMARY] = on_tensor_summary,
};

void accel_pf_event(accel_pf_writer_t *w, uint32_t thread,
                    const accel_trace_rec_t *ev) {
  describe_track(w, thread);
  if (ev->type >= ACCEL_TEV_TYPE_COUNT || k_pf_event_fns[ev->type] == NULL) {
    return;
  }
  PB(x, 640);
  pf_event_ctx_t c = {.w = w,
                      .thread = thread,
                      .seq_id = thread + 16,  // one sequence per thread
                      .ev = ev,
                      .x = &x};
  k_pf_event_fns[ev->type](&c);
}

void accel_pf_close_slices(accel_pf_writer_t *w, uint64_t end_ts) {
  if (end_ts < w->last_ts) {
    end_ts = w->last_ts;
  }
  for (uint32_t id = 1; id < ACCEL_PF_MAX_TRACKS; ++id) {
    while (w->depth[id] > 0) {
      slice_end(w, end_ts, SEQ_DESCRIPTORS, id, 0);
    }
  }
}
