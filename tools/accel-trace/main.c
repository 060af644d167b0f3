// accel-trace: turns LTTng traces of accel into Perfetto traces and
// summarizes traces.
//
//   accel-trace convert LTTNG_TRACE_DIR -o OUT.pftrace
//   accel-trace summary TRACE        (an LTTng trace directory or a .pftrace)
//
// convert reads the CTF trace with libbabeltrace2 (source.ctf.fs through a
// muxer into a simple sink) and writes the same Perfetto format as the
// built-in recorder (lib/trace/perfetto.c): one Perfetto process per traced
// process (from the vpid context), holding one track per device, stream and
// thread (from the vtid context), command slices with flows from enqueue to
// execution, and counter tracks. summary prints, per kernel, host calls,
// copy direction and other command kinds, the count, total, p50 and p99
// durations and the bytes moved.
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/perfetto.h"
#include "trace/tensor_summary.h"
#include "trace/trace_impl.h"
#include "tool_cli.h"
#include "trace_summary.h"

#if ACCEL_TRACE_HAVE_BABELTRACE
#include <babeltrace2/babeltrace.h>
#endif

// ---------------------------------------------------------------------------
// Names collected from the LTTng trace.
// ---------------------------------------------------------------------------

// Distinct strings (names, messages, tensor summaries) a converted trace
// holds at most; later ones show as "(dropped)".
#define MAX_STRINGS (1u << 22)
// Slots of the map from (process, LTTng id) to this trace's track ids: a
// power of two, twice the most tracks a trace can hold.
#define ID_MAP_SLOTS (2u * ACCEL_PF_MAX_TRACKS)

// LTTng ids (devices, streams, queues) are numbered per process, so two
// traced processes both have a stream 3: every track of the converted trace
// gets an id of its own here, keyed by the process (LTTng's vpid) it belongs
// to, and each process becomes one Perfetto process (a track of kind
// ACCEL_TRACK_PROCESS whose tid is the pid) holding its threads, devices and
// streams.
typedef struct lt_state {
  accel_trace_track_t tracks[ACCEL_PF_MAX_TRACKS];  // by id
  bool known[ACCEL_PF_MAX_TRACKS];
  uint32_t next_id;  // the next free track id (ids start at 1)
  uint64_t map_keys[ID_MAP_SLOTS];  // 0: empty
  uint32_t map_ids[ID_MAP_SLOTS];
  // Strings by id - 1 (ids start at 1), grown as needed, and an
  // open-addressing index of their ids by hash (0: empty) of string_slots
  // (a power of two, at least twice string_count).
  char **strings;
  uint32_t string_count;
  uint32_t string_cap;
  uint32_t *string_index;
  uint32_t string_slots;
  accel_pf_writer_t writer;
  bool begun;
  int fd;
  uint64_t events;
  uint64_t last_ts;
  uint64_t clock_freq;
  // Events read, written once sorted by time: an enqueue's time (taken
  // before the submit) may precede events the muxer delivered before it.
  struct lt_rec {
    accel_trace_rec_t rec;
    uint32_t thread;
    uint64_t order;
  } *recs;
  size_t rec_count;
  size_t rec_cap;
} lt_state_t;

static int cmp_rec(const void *a, const void *b) {
  const struct lt_rec *x = a, *y = b;
  if (x->rec.ts != y->rec.ts) {
    return x->rec.ts < y->rec.ts ? -1 : 1;
  }
  return x->order < y->order ? -1 : x->order > y->order;
}

static bool lt_describe(void *ctx, uint32_t id, accel_trace_track_t *out) {
  lt_state_t *s = ctx;
  if (id >= ACCEL_PF_MAX_TRACKS || !s->known[id]) {
    return false;
  }
  *out = s->tracks[id];
  return true;
}

static const char *lt_string(void *ctx, uint32_t id) {
  lt_state_t *s = ctx;
  return id >= 1 && id <= s->string_count ? s->strings[id - 1] : NULL;
}

static uint64_t text_hash(const char *text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const unsigned char *p = (const unsigned char *)text; *p; ++p) {
    h = (h ^ *p) * 1099511628211ull;
  }
  return h;
}

// Doubles the index (and rehashes); false when out of memory.
static bool grow_string_index(lt_state_t *s) {
  uint32_t slots = s->string_slots ? s->string_slots * 2 : 1024;
  uint32_t *index = calloc(slots, sizeof(*index));
  if (index == NULL) {
    return false;
  }
  for (uint32_t id = 1; id <= s->string_count; ++id) {
    uint32_t i = (uint32_t)text_hash(s->strings[id - 1]) & (slots - 1);
    while (index[i] != 0) {
      i = (i + 1) & (slots - 1);
    }
    index[i] = id;
  }
  free(s->string_index);
  s->string_index = index;
  s->string_slots = slots;
  return true;
}

// The id of |text| (copied when new); 0 when the table is full or out of
// memory.
static uint32_t lt_intern(lt_state_t *s, const char *text) {
  if (2 * (s->string_count + 1) > s->string_slots && !grow_string_index(s)) {
    return 0;
  }
  uint32_t mask = s->string_slots - 1;
  uint32_t i = (uint32_t)text_hash(text) & mask;
  for (; s->string_index[i] != 0; i = (i + 1) & mask) {
    if (strcmp(s->strings[s->string_index[i] - 1], text) == 0) {
      return s->string_index[i];
    }
  }
  if (s->string_count == MAX_STRINGS) {
    return 0;
  }
  if (s->string_count == s->string_cap) {
    uint32_t cap = s->string_cap ? s->string_cap * 2 : 256;
    char **grown = realloc(s->strings, cap * sizeof(*grown));
    if (grown == NULL) {
      return 0;
    }
    s->strings = grown;
    s->string_cap = cap;
  }
  char *copy = strdup(text);
  if (copy == NULL) {
    return 0;
  }
  s->strings[s->string_count++] = copy;
  s->string_index[i] = s->string_count;
  return s->string_count;
}

// Key spaces of the id map: what a key stands for, above the process and
// the LTTng id.
enum { KEY_TRACK = 1, KEY_THREAD = 2, KEY_PROCESS = 3 };

static uint64_t map_key(uint32_t space, uint32_t proc, uint64_t id) {
  return (uint64_t)space << 62 | (uint64_t)(proc & 0x3fffffu) << 40 |
         (id & 0xffffffffffull);
}

// This trace's track id for |key|, made (and |*out_new| set) on first use;
// 0 when the trace has no ids left.
static uint32_t map_id(lt_state_t *s, uint64_t key, bool *out_new) {
  uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40);
  for (uint32_t i = 0; i < ID_MAP_SLOTS; ++i) {
    uint32_t slot = (h + i) & (ID_MAP_SLOTS - 1);
    if (s->map_keys[slot] == key) {
      return s->map_ids[slot];
    }
    if (s->map_keys[slot] == 0) {
      if (s->next_id + 1 >= ACCEL_PF_MAX_TRACKS) {
        return 0;
      }
      s->map_keys[slot] = key;
      s->map_ids[slot] = ++s->next_id;
      *out_new = true;
      return s->map_ids[slot];
    }
  }
  return 0;
}

static void lt_track(lt_state_t *s, uint32_t id, uint32_t kind,
                     uint32_t parent, const char *name) {
  if (id == 0) {
    return;
  }
  accel_trace_track_t *t = &s->tracks[id];
  memset(t, 0, sizeof(*t));
  t->id = id;
  t->kind = kind;
  t->parent = parent;
  snprintf(t->name, sizeof(t->name), "%s", name);
  s->known[id] = true;
}

// The track of process |vpid|, named |procname| until its command line is
// known (runtime_create).
static uint32_t lt_process(lt_state_t *s, int64_t vpid, const char *procname) {
  bool fresh = false;
  uint32_t id = map_id(s, map_key(KEY_PROCESS, 0, (uint64_t)vpid), &fresh);
  if (fresh) {
    lt_track(s, id, ACCEL_TRACK_PROCESS, 0,
             procname != NULL && procname[0] ? procname : "accel");
    s->tracks[id].tid = (int32_t)vpid;
  }
  return id;
}

static uint32_t lt_thread(lt_state_t *s, uint32_t proc, int64_t tid,
                          const char *procname) {
  bool fresh = false;
  uint32_t id = map_id(s, map_key(KEY_THREAD, proc, (uint64_t)tid), &fresh);
  if (fresh) {
    lt_track(s, id, ACCEL_TRACK_THREAD, proc,
             procname != NULL && procname[0] ? procname : "thread");
    s->tracks[id].tid = (int32_t)tid;
  }
  return id;
}

// This trace's id of the device, stream or queue |lttng_id| of |proc|; 0
// stays 0 (no track).
static uint32_t lt_object(lt_state_t *s, uint32_t proc, uint64_t lttng_id) {
  bool fresh = false;
  return lttng_id != 0 ? map_id(s, map_key(KEY_TRACK, proc, lttng_id), &fresh)
                       : 0;
}

static uint32_t counter_kind_by_name(const char *name) {
  for (uint32_t k = 0; k < ACCEL_CTR_COUNT; ++k) {
    if (strcmp(accel_counter_kind_name(k), name) == 0) {
      return k;
    }
  }
  return ACCEL_CTR_COUNT;
}

#if ACCEL_TRACE_HAVE_BABELTRACE

static const bt_field *member(const bt_field *st, const char *name) {
  return st != NULL ? bt_field_structure_borrow_member_field_by_name_const(
                          st, name)
                    : NULL;
}

static uint64_t u64(const bt_field *st, const char *name) {
  const bt_field *f = member(st, name);
  if (f == NULL) {
    return 0;
  }
  bt_field_class_type t = bt_field_get_class_type(f);
  if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER)) {
    return (uint64_t)bt_field_integer_signed_get_value(f);
  }
  if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER)) {
    return bt_field_integer_unsigned_get_value(f);
  }
  return 0;
}

static double f64(const bt_field *st, const char *name) {
  const bt_field *f = member(st, name);
  if (f == NULL) {
    return 0;
  }
  bt_field_class_type t = bt_field_get_class_type(f);
  if (t == BT_FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL) {
    return bt_field_real_double_precision_get_value(f);
  }
  if (t == BT_FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL) {
    return (double)bt_field_real_single_precision_get_value(f);
  }
  return 0;
}

static const char *str(const bt_field *st, const char *name) {
  const bt_field *f = member(st, name);
  if (f == NULL || bt_field_get_class_type(f) != BT_FIELD_CLASS_TYPE_STRING) {
    return "";
  }
  return bt_field_string_get_value(f);
}

// One event being converted: its payload and the process it came from.
typedef struct lt_event {
  lt_state_t *s;
  const char *name;  // without the "accel:" prefix
  const bt_field *p;  // payload
  uint32_t proc;      // the process's track
  uint64_t ts;
} lt_event_t;

// The converted trace's id of the payload's LTTng id field |field|.
static uint32_t obj(const lt_event_t *e, const char *field) {
  return lt_object(e->s, e->proc, u64(e->p, field));
}

static void ev_device_open(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_CLOCK_PAIR;
  r->track = obj(e, "device");
  lt_track(e->s, r->track, ACCEL_TRACK_DEVICE, e->proc, str(e->p, "name"));
  r->a = u64(e->p, "clock_host_ns");
  r->b = u64(e->p, "clock_device_ns");
}

static void ev_stream_create(const lt_event_t *e, accel_trace_rec_t *r) {
  uint32_t device = obj(e, "device");
  r->type = ACCEL_TEV_LIFECYCLE;
  r->aux = ACCEL_TRACE_LIFE_STREAM_CREATE;
  r->track = obj(e, "stream");
  lt_track(e->s, r->track, ACCEL_TRACK_STREAM, device ? device : e->proc,
           str(e->p, "name"));
}

static void ev_stream_destroy(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_LIFECYCLE;
  r->aux = ACCEL_TRACE_LIFE_STREAM_DESTROY;
  r->track = obj(e, "stream");
}

static void ev_runtime_create(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_LIFECYCLE;
  r->aux = ACCEL_TRACE_LIFE_RUNTIME_CREATE;
  // The command line names the process better than procname (15 bytes).
  const char *cmdline = str(e->p, "cmdline");
  if (cmdline[0] != '\0') {
    snprintf(e->s->tracks[e->proc].name, sizeof(e->s->tracks[e->proc].name),
             "%s", cmdline);
  }
}

static void ev_runtime_destroy(const lt_event_t *e, accel_trace_rec_t *r) {
  (void)e;
  r->type = ACCEL_TEV_LIFECYCLE;
  r->aux = ACCEL_TRACE_LIFE_RUNTIME_DESTROY;
}

static void ev_device_close(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_LIFECYCLE;
  r->aux = ACCEL_TRACE_LIFE_DEVICE_CLOSE;
  r->track = obj(e, "device");
}

static void ev_cmd(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = e->name[4] == 'e' ? ACCEL_TEV_CMD_ENQUEUE : ACCEL_TEV_CMD_START;
  uint32_t kind = (uint32_t)u64(e->p, "kind");
  uint32_t dir = kind == 2 ? (uint32_t)u64(e->p, "flags") & 0xff : 0;
  r->aux = kind | (dir << 8);
  r->track = obj(e, "stream");
  r->a = u64(e->p, "seq");
  r->b = u64(e->p, "bytes");
  uint64_t enqueue_ns = u64(e->p, "enqueue_ns");
  if (r->type == ACCEL_TEV_CMD_ENQUEUE && enqueue_ns != 0 &&
      enqueue_ns <= e->ts) {
    r->ts = enqueue_ns;  // the event is emitted after the submit returns
  }
}

static void ev_cmd_end(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_CMD_END;
  r->aux = (uint32_t)u64(e->p, "kind") | ((uint32_t)u64(e->p, "status") << 8);
  r->track = obj(e, "stream");
  r->a = u64(e->p, "seq");
}

static void ev_launch_begin(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_LAUNCH_BEGIN;
  r->track = obj(e, "stream");
  r->a = u64(e->p, "seq");
  r->b = lt_intern(e->s, str(e->p, "kernel"));
}

static void ev_launch_end(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_LAUNCH_END;
  r->track = obj(e, "stream");
  r->a = u64(e->p, "seq");
  r->aux = (uint32_t)u64(e->p, "status");
}

static void ev_semaphore(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = strcmp(e->name, "semaphore_signal") == 0 ? ACCEL_TEV_SEM_SIGNAL
            : strcmp(e->name, "semaphore_wait") == 0 ? ACCEL_TEV_SEM_WAIT
                                                     : ACCEL_TEV_SEM_WAKE;
  r->track = obj(e, "device");
  r->a = u64(e->p, "semaphore");
  r->b = u64(e->p, "value");
  r->aux = (uint32_t)u64(e->p, "status");
}

static void ev_event_record(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_EVENT_RECORD;
  r->track = obj(e, "stream");
  r->a = u64(e->p, "event");
  r->b = u64(e->p, "value");
}

static void ev_event_complete(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_EVENT_COMPLETE;
  r->track = obj(e, "stream");
  r->a = u64(e->p, "event");
  r->b = u64(e->p, "device_ns");
  uint64_t host_ns = u64(e->p, "host_ns");
  r->ts = host_ns != 0 && host_ns <= e->ts ? host_ns : e->ts;
}

static void ev_buffer(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = e->name[7] == 'a' ? ACCEL_TEV_BUF_ALLOC : ACCEL_TEV_BUF_FREE;
  r->track = obj(e, "device");
  r->a = u64(e->p, "address");
  r->b = u64(e->p, "size");
}

static void ev_error(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_ERROR;
  r->aux = (uint32_t)u64(e->p, "status");
  r->a = lt_intern(e->s, str(e->p, "message"));
}

static void ev_kernel_message(const lt_event_t *e, accel_trace_rec_t *r) {
  char line[1200];
  snprintf(line, sizeof(line), "kernel \"%s\" work-group (%llu, %llu, %llu): %s",
           str(e->p, "kernel"), (unsigned long long)u64(e->p, "group_x"),
           (unsigned long long)u64(e->p, "group_y"),
           (unsigned long long)u64(e->p, "group_z"), str(e->p, "text"));
  r->type = ACCEL_TEV_KERNEL_MESSAGE;
  r->aux = (uint32_t)u64(e->p, "kind");
  r->a = lt_intern(e->s, line);
}

// The same text the built-in recorder stores (tensor_summary.h), so that
// both give the same "tensor summary" instant.
static void ev_tensor_summary(const lt_event_t *e, accel_trace_rec_t *r) {
  accel_trace_tensor_summary_t sum = {
      .kernel = str(e->p, "kernel"),
      .name = str(e->p, "name"),
      .binding = (uint32_t)u64(e->p, "binding"),
      .count = u64(e->p, "count"),
      .nan = u64(e->p, "nan"),
      .inf = u64(e->p, "inf"),
      .min = f64(e->p, "min"),
      .max = f64(e->p, "max"),
      .mean = f64(e->p, "mean"),
  };
  char text[512];
  accel_trace_tensor_summary_format(&sum, text, sizeof(text));
  r->type = ACCEL_TEV_TENSOR_SUMMARY;
  r->a = lt_intern(e->s, text);
}

static void ev_stream_fail(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_STREAM_FAIL;
  r->track = obj(e, "stream");
  r->a = u64(e->p, "seq");
  r->aux = (uint32_t)u64(e->p, "status");
}

static void ev_counter(const lt_event_t *e, accel_trace_rec_t *r) {
  r->type = ACCEL_TEV_COUNTER;
  r->track = obj(e, "scope");
  r->aux = counter_kind_by_name(str(e->p, "name"));
  r->a = u64(e->p, "value");
  if (r->track != 0 && !e->s->known[r->track]) {
    lt_track(e->s, r->track, ACCEL_TRACK_STREAM, e->proc,
             str(e->p, "scope_name"));
  }
}

// The accel events converted, by name; others (copy_* repeat cmd_* for
// copies) are skipped.
static const struct {
  const char *name;
  void (*fn)(const lt_event_t *e, accel_trace_rec_t *r);
} k_events[] = {
    {"device_open", ev_device_open},
    {"stream_create", ev_stream_create},
    {"stream_destroy", ev_stream_destroy},
    {"runtime_create", ev_runtime_create},
    {"runtime_destroy", ev_runtime_destroy},
    {"device_close", ev_device_close},
    {"cmd_enqueue", ev_cmd},
    {"cmd_start", ev_cmd},
    {"cmd_end", ev_cmd_end},
    {"launch_begin", ev_launch_begin},
    {"launch_end", ev_launch_end},
    {"semaphore_signal", ev_semaphore},
    {"semaphore_wait", ev_semaphore},
    {"semaphore_wake", ev_semaphore},
    {"event_record", ev_event_record},
    {"event_complete", ev_event_complete},
    {"buffer_alloc", ev_buffer},
    {"buffer_free", ev_buffer},
    {"error", ev_error},
    {"stream_fail", ev_stream_fail},
    {"kernel_message", ev_kernel_message},
    {"tensor_summary", ev_tensor_summary},
    {"counter_sample", ev_counter},
};

static void add_rec(lt_state_t *s, const accel_trace_rec_t *r,
                    uint32_t thread) {
  if (r->ts > s->last_ts) {
    s->last_ts = r->ts;
  }
  if (s->rec_count == s->rec_cap) {
    size_t cap = s->rec_cap ? s->rec_cap * 2 : 4096;
    struct lt_rec *grown = realloc(s->recs, cap * sizeof(*grown));
    if (grown == NULL) {
      return;
    }
    s->recs = grown;
    s->rec_cap = cap;
  }
  s->recs[s->rec_count] = (struct lt_rec){*r, thread, s->rec_count};
  s->rec_count++;
  s->events++;
}

// The event's time in ns of CLOCK_MONOTONIC: LTTng's default clock counts
// it; keep that time base (the built-in recorder's) rather than the
// offset-to-epoch one.
static uint64_t event_ns(const lt_state_t *s, const bt_message *msg) {
  uint64_t cycles = bt_clock_snapshot_get_value(
      bt_message_event_borrow_default_clock_snapshot_const(msg));
  return s->clock_freq == 1000000000ull
             ? cycles
             : (uint64_t)((double)cycles * 1e9 / (double)s->clock_freq);
}

static void handle_event(lt_state_t *s, const bt_message *msg) {
  const bt_event *event = bt_message_event_borrow_event_const(msg);
  const char *full = bt_event_class_get_name(bt_event_borrow_class_const(event));
  if (full == NULL || strncmp(full, "accel:", 6) != 0) {
    return;
  }
  size_t k = 0;
  while (k < sizeof(k_events) / sizeof(k_events[0]) &&
         strcmp(k_events[k].name, full + 6) != 0) {
    k++;
  }
  if (k == sizeof(k_events) / sizeof(k_events[0])) {
    return;
  }
  const bt_field *ctx = bt_event_borrow_common_context_field_const(event);
  const char *procname =
      member(ctx, "procname") != NULL ? str(ctx, "procname") : NULL;
  lt_event_t e = {.s = s,
                  .name = full + 6,
                  .p = bt_event_borrow_payload_field_const(event),
                  .proc = lt_process(s, (int64_t)u64(ctx, "vpid"), procname),
                  .ts = event_ns(s, msg)};
  uint32_t thread = lt_thread(s, e.proc, (int64_t)u64(ctx, "vtid"), procname);
  accel_trace_rec_t r = {.ts = e.ts};
  k_events[k].fn(&e, &r);
  add_rec(s, &r, thread);
}

static bt_graph_simple_sink_component_consume_func_status consume(
    bt_message_iterator *it, void *user_data) {
  lt_state_t *s = user_data;
  bt_message_array_const msgs;
  uint64_t count = 0;
  switch (bt_message_iterator_next(it, &msgs, &count)) {
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
      break;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_AGAIN;
    case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_MEMORY_ERROR;
    default:
      return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (bt_message_get_type(msgs[i]) == BT_MESSAGE_TYPE_EVENT) {
      if (s->clock_freq == 0) {
        const bt_clock_snapshot *cs =
            bt_message_event_borrow_default_clock_snapshot_const(msgs[i]);
        s->clock_freq =
            bt_clock_class_get_frequency(bt_clock_snapshot_borrow_clock_class_const(cs));
      }
      handle_event(s, msgs[i]);
    }
    bt_message_put_ref(msgs[i]);
  }
  return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_OK;
}

// Trace directories (those holding a CTF "metadata" file) under the root:
// an LTTng session directory holds one per domain, user and ABI.
static bt_value *g_inputs;
static int g_input_count;

static int find_metadata(const char *path, const struct stat *st, int type,
                         struct FTW *ftw) {
  const char *base = path + ftw->base;
  if (type == FTW_F && strcmp(base, "metadata") == 0) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%.*s", ftw->base > 0 ? ftw->base - 1 : 0,
             path);
    if (bt_value_array_append_string_element(g_inputs, dir) ==
        BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK) {
      g_input_count++;
    }
  }
  return 0;
}

// Reads the LTTng trace at |dir| into |s->writer|. Returns 0 or prints why.
static int read_lttng(lt_state_t *s, const char *dir) {
  int rc = 1;
  const bt_plugin *ctf = NULL, *utils = NULL;
  bt_value *params = NULL;
  bt_graph *graph = bt_graph_create(0);
  if (graph == NULL ||
      bt_plugin_find("ctf", BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE,
                     &ctf) != BT_PLUGIN_FIND_STATUS_OK ||
      bt_plugin_find("utils", BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE,
                     &utils) != BT_PLUGIN_FIND_STATUS_OK) {
    fprintf(stderr, "accel-trace: babeltrace2 plugins ctf/utils not found\n");
    goto out;
  }
  params = bt_value_map_create();
  bt_value *inputs = NULL;
  if (params == NULL ||
      bt_value_map_insert_empty_array_entry(params, "inputs", &inputs) !=
          BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK) {
    fprintf(stderr, "accel-trace: out of memory\n");
    goto out;
  }
  g_inputs = inputs;
  g_input_count = 0;
  nftw(dir, find_metadata, 16, FTW_PHYS);
  if (g_input_count == 0) {
    fprintf(stderr, "accel-trace: no CTF trace (metadata file) under \"%s\"\n",
            dir);
    goto out;
  }
  const bt_component_source *src = NULL;
  const bt_component_filter *mux = NULL;
  const bt_component_sink *sink = NULL;
  if (bt_graph_add_source_component(
          graph, bt_plugin_borrow_source_component_class_by_name_const(ctf, "fs"),
          "src", params, BT_LOGGING_LEVEL_ERROR, &src) !=
      BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
    fprintf(stderr, "accel-trace: \"%s\" is not a readable CTF trace\n", dir);
    goto out;
  }
  if (bt_graph_add_filter_component(
          graph,
          bt_plugin_borrow_filter_component_class_by_name_const(utils, "muxer"),
          "mux", NULL, BT_LOGGING_LEVEL_ERROR, &mux) !=
          BT_GRAPH_ADD_COMPONENT_STATUS_OK ||
      bt_graph_add_simple_sink_component(graph, "sink", NULL, consume, NULL,
                                         s, &sink) !=
          BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
    fprintf(stderr, "accel-trace: cannot build the babeltrace2 graph\n");
    goto out;
  }
  uint64_t n = bt_component_source_get_output_port_count(src);
  for (uint64_t i = 0; i < n; ++i) {
    const bt_port_output *out_port =
        bt_component_source_borrow_output_port_by_index_const(src, i);
    const bt_port_input *in_port =
        bt_component_filter_borrow_input_port_by_index_const(mux, i);
    if (bt_graph_connect_ports(graph, out_port, in_port, NULL) !=
        BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
      fprintf(stderr, "accel-trace: cannot connect stream %llu\n",
              (unsigned long long)i);
      goto out;
    }
  }
  if (bt_graph_connect_ports(
          graph, bt_component_filter_borrow_output_port_by_index_const(mux, 0),
          bt_component_sink_borrow_input_port_by_index_const(sink, 0),
          NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
    fprintf(stderr, "accel-trace: cannot connect the sink\n");
    goto out;
  }
  bt_graph_run_status st;
  do {
    st = bt_graph_run(graph);
  } while (st == BT_GRAPH_RUN_STATUS_AGAIN);
  if (st != BT_GRAPH_RUN_STATUS_OK) {
    fprintf(stderr, "accel-trace: reading \"%s\" failed\n", dir);
    goto out;
  }
  rc = 0;
out:
  bt_value_put_ref(params);
  bt_graph_put_ref(graph);
  bt_plugin_put_ref(ctf);
  bt_plugin_put_ref(utils);
  return rc;
}

#endif  // ACCEL_TRACE_HAVE_BABELTRACE

static int convert(const char *dir, const char *out_path) {
#if ACCEL_TRACE_HAVE_BABELTRACE
  lt_state_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    fprintf(stderr, "accel-trace: out of memory\n");
    return 1;
  }
  int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "accel-trace: cannot create \"%s\": %s\n", out_path,
            strerror(errno));
    free(s);
    return 1;
  }
  accel_pf_source_t source = {lt_describe, lt_string, s};
  // No default process: each traced process is a track of its own.
  accel_pf_begin(&s->writer, fd, -1, NULL, &source);
  int rc = read_lttng(s, dir);
  if (rc == 0) {
    qsort(s->recs, s->rec_count, sizeof(*s->recs), cmp_rec);
    for (size_t i = 0; i < s->rec_count; ++i) {
      accel_pf_event(&s->writer, s->recs[i].thread, &s->recs[i].rec);
    }
    accel_pf_close_slices(&s->writer, s->last_ts);
    if (!accel_pf_flush(&s->writer)) {
      fprintf(stderr, "accel-trace: writing \"%s\": %s\n", out_path,
              strerror(s->writer.error));
      rc = 1;
    } else if (s->events == 0) {
      fprintf(stderr, "accel-trace: no accel events in \"%s\"\n", dir);
      rc = 1;
    }
  }
  close(fd);
  for (uint32_t i = 0; i < s->string_count; ++i) {
    free(s->strings[i]);
  }
  free(s->strings);
  free(s->string_index);
  free(s->recs);
  free(s);
  return rc;
#else
  fprintf(stderr,
          "accel-trace: built without libbabeltrace2: cannot read LTTng "
          "traces\n");
  return 1;
#endif
}

// ---------------------------------------------------------------------------
// summary: the table of trace_summary_read (tools/common/trace_summary.c).
// ---------------------------------------------------------------------------

static int summarize_file(const char *path) {
  trace_summary_t s;
  if (trace_summary_read(path, &s) != 0) {
    return 1;
  }
  printf("%-8s %-24s %8s %12s %10s %10s %14s\n", "category", "name", "count",
         "total_us", "p50_us", "p99_us", "bytes");
  for (size_t i = 0; i < s.count; ++i) {
    const trace_summary_entry_t *e = &s.entries[i];
    printf("%-8s %-24s %8llu %12.3f %10.3f %10.3f %14llu\n", e->category,
           e->name, (unsigned long long)e->count, (double)e->total_ns / 1e3,
           (double)e->p50_ns / 1e3, (double)e->p99_ns / 1e3,
           (unsigned long long)e->bytes);
  }
  trace_summary_free(&s);
  return 0;
}

static int summary(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "accel-trace: \"%s\": %s\n", path, strerror(errno));
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) {
    return summarize_file(path);
  }
  char tmp[] = "/tmp/accel-trace-XXXXXX";
  int fd = mkstemp(tmp);
  if (fd < 0) {
    fprintf(stderr, "accel-trace: cannot create a temporary file: %s\n",
            strerror(errno));
    return 1;
  }
  close(fd);
  int rc = convert(path, tmp);
  if (rc == 0) {
    rc = summarize_file(tmp);
  }
  unlink(tmp);
  return rc;
}

static const accel_tool_option_t k_options[] = {
    {"-o", "OUT.pftrace", 0, "convert: the Perfetto trace to write"},
};
enum { OPT_OUT };

static const accel_tool_spec_t k_spec = {
    .name = "accel-trace",
    .synopsis = "convert LTTNG_TRACE_DIR -o OUT.pftrace\n"
                "       accel-trace summary TRACE",
    .description =
        "Turns LTTng traces of accel into Perfetto traces (convert) and "
        "prints per-kernel, per-copy and per-command statistics of an LTTng "
        "trace directory or a .pftrace file (summary).",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 2,
    .max_positional = 2,
};

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  const char *command = args.positional[0], *input = args.positional[1];
  const char *out = args.values[OPT_OUT];
  if (strcmp(command, "convert") == 0) {
    if (out == NULL) {
      return accel_tool_usage_error(&k_spec, "convert needs -o OUT.pftrace");
    }
    return convert(input, out);
  }
  if (strcmp(command, "summary") == 0) {
    if (out != NULL) {
      return accel_tool_usage_error(&k_spec, "summary takes no -o");
    }
    return summary(input);
  }
  return accel_tool_usage_error(&k_spec,
                                "unknown command \"%s\" (convert or summary)",
                                command);
}
