// Host queues' recordings: a command buffer's commands encoded once, at
// finalize, into the records the queue itself uses (host_queue_impl.h), and
// replayed by the worker when it reaches an EXECUTE command. An execute then
// costs the submitter one record whatever the buffer's length, and the
// worker runs the recorded records in place (read-only, so any number of
// queues may replay one recording at once), filling the words each execute
// changes (binding-table addresses, launch records, event semaphores) from
// the execute's bases as it goes (docs/execution-model.md, "Command
// buffers").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv/host/host_queue_impl.h"
#include "trace/trace_hooks.h"

// A patch as the worker applies it: the record word (counted from the
// start of the recording) that becomes bases[base] + offset.
typedef struct host_patch {
  uint32_t word;
  uint32_t base;
  uint64_t offset;
} host_patch_t;

// A host call of a recording, for the runs replayed back to back.
typedef struct host_call_pair {
  accel_host_fn_t fn;
  void *user_data;
} host_call_pair_t;

struct accel_drv_recording {
  char name[64];
  uint32_t command_count;
  bool waits;  // has a WAIT: the worker posts completions before replaying
  // For each command, the host calls that follow from it without another
  // kind between (0: not a host call), and each host call's function and
  // data packed: a run replays from |calls| without decoding headers (a
  // 1,000-call buffer replayed 1,000 times, best of 10 runs on the loaded
  // 2-vCPU machine: 3.0 -> 2.4-2.7 ns a call).
  uint32_t *runs;
  host_call_pair_t *calls;
  // Word of each command's record, and of the end (command_count + 1).
  uint32_t *starts;
  // First patch of each command, and the end (command_count + 1).
  uint32_t *patch_starts;
  host_patch_t *patches;
  record_word_t *words;
};

// The largest record a recording holds: a header and a fill's 4 words.
#define MAX_RECORD_WORDS 5u

// The kinds a recording may hold.
static bool recordable(uint32_t kind) {
  return kind == ACCEL_CMD_HOST_CALL || kind == ACCEL_CMD_FILL ||
         kind == ACCEL_CMD_COPY || kind == ACCEL_CMD_SIGNAL ||
         kind == ACCEL_CMD_WAIT || kind == ACCEL_CMD_LAUNCH;
}

// Checks what the generic layer hands over against what the records can
// hold (an internal error otherwise: the generic layer built it).
static accel_status_t check_params(const accel_drv_recording_params_t *p) {
  for (uint32_t i = 0; i < p->command_count; ++i) {
    const accel_cmd_t *c = &p->commands[i];
    if (!recordable(c->kind) || c->refs[0] != NULL || c->refs[1] != NULL) {
      return accel_error(ACCEL_ERROR_INTERNAL,
                         "host recording: command %u (kind %u) cannot be "
                         "recorded (kind, or references held)",
                         i, c->kind);
    }
  }
  for (uint32_t i = 0; i < p->patch_count; ++i) {
    const accel_drv_patch_t *pt = &p->patches[i];
    if (pt->command >= p->command_count || pt->base >= p->base_count ||
        pt->word < 2 ||
        pt->word >= 2u + body_words[p->commands[pt->command].kind] ||
        (i > 0 && (pt->command < p->patches[i - 1].command ||
                   (pt->command == p->patches[i - 1].command &&
                    pt->word <= p->patches[i - 1].word)))) {
      return accel_error(ACCEL_ERROR_INTERNAL,
                         "host recording: patch %u (command %u word %u base "
                         "%u) is out of order or names no body word",
                         i, pt->command, pt->word, pt->base);
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_host_recording_create(
    accel_drv_device_t *device, const accel_drv_recording_params_t *params,
    accel_drv_recording_t **out_recording) {
  (void)device;
  ACCEL_RETURN_IF_ERROR(check_params(params));
  uint32_t n = params->command_count;
  uint64_t total_words = 0;
  for (uint32_t i = 0; i < n; ++i) {
    total_words += 1u + body_words[params->commands[i].kind];
  }
  if (total_words > UINT32_MAX) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host recording: %u commands take %llu words, more "
                       "than 2^32",
                       n, (unsigned long long)total_words);
  }
  accel_drv_recording_t *r = calloc(1, sizeof(*r));
  if (r == NULL) {
    goto err_oom;
  }
  r->starts = malloc((n + 1) * sizeof(uint32_t));
  r->patch_starts = malloc((n + 1) * sizeof(uint32_t));
  r->patches = malloc((params->patch_count + 1) * sizeof(host_patch_t));
  r->words = malloc((total_words + 1) * sizeof(record_word_t));
  r->runs = malloc((n + 1) * sizeof(uint32_t));
  r->calls = malloc((n + 1) * sizeof(host_call_pair_t));
  if (r->starts == NULL || r->patch_starts == NULL || r->patches == NULL ||
      r->words == NULL || r->runs == NULL || r->calls == NULL) {
    goto err_free_recording;
  }
  snprintf(r->name, sizeof(r->name), "%s",
           params->name != NULL ? params->name : "");
  r->command_count = n;
  uint32_t pos = 0;
  uint32_t patch = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const accel_cmd_t *c = &params->commands[i];
    uint32_t words = 1u + body_words[c->kind];
    r->starts[i] = pos;
    r->patch_starts[i] = patch;
    r->waits = r->waits || c->kind == ACCEL_CMD_WAIT;
    record_write_body(&r->words[pos], c, 0);
    r->words[pos].u = header_make(c->kind, words, 0, c->flags);
    for (; patch < params->patch_count && params->patches[patch].command == i;
         ++patch) {
      const accel_drv_patch_t *pt = &params->patches[patch];
      // accel_cmd_t word 2 is the union's first, the record's word 1.
      r->patches[patch] = (host_patch_t){.word = pos + 1u + (pt->word - 2u),
                                         .base = pt->base,
                                         .offset = pt->offset};
    }
    pos += words;
  }
  r->starts[n] = pos;
  r->patch_starts[n] = patch;
  r->runs[n] = 0;
  for (uint32_t i = n; i-- > 0;) {
    const accel_cmd_t *c = &params->commands[i];
    bool call = c->kind == ACCEL_CMD_HOST_CALL && c->flags == 0;
    r->runs[i] = call ? r->runs[i + 1] + 1 : 0;
    r->calls[i] = (host_call_pair_t){.fn = call ? c->host_call.fn : NULL,
                                     .user_data = c->host_call.user_data};
  }
  // A sentinel past every record: the replay loop compares without a bound.
  r->patches[patch] = (host_patch_t){.word = UINT32_MAX};
  *out_recording = r;
  return ACCEL_OK;

err_free_recording:
  accel_host_recording_destroy(r);
err_oom:
  return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "host recording: cannot allocate %u commands (%llu "
                     "words)",
                     n, (unsigned long long)total_words);
}

void accel_host_recording_destroy(accel_drv_recording_t *r) {
  if (r == NULL) {
    return;
  }
  free(r->starts);
  free(r->patch_starts);
  free(r->patches);
  free(r->words);
  free(r->runs);
  free(r->calls);
  free(r);
}

bool accel_host_recording_waits(const accel_drv_recording_t *r) {
  return r->waits;
}

uint32_t accel_host_recording_count(const accel_drv_recording_t *r) {
  return r->command_count;
}

// Copies the record at |w| (header |h|) into |tmp| and applies the patches
// from |*p| on that fall in it, advancing |*p|. Returns |tmp|.
static inline const record_word_t *patch_record(const accel_drv_recording_t *r,
                                                const record_word_t *w,
                                                uint64_t h,
                                                const uint64_t *bases,
                                                const host_patch_t **p,
                                                record_word_t *tmp) {
  uint32_t n = header_words(h);
  uint32_t at = (uint32_t)(w - r->words);
  memcpy(tmp, w, n * sizeof(*w));
  for (; (*p)->word < at + n; ++*p) {
    tmp[(*p)->word - at].u = bases[(*p)->base] + (*p)->offset;
  }
  return tmp;
}

// Runs one record through the traced path: rebuilt as a command, its start
// and end reported as nested in the execute numbered |seq|.
static __attribute__((noinline)) accel_status_t run_traced(
    accel_drv_queue_t *q, const record_word_t *rec, uint64_t h,
    uint64_t seq) {
  accel_cmd_t cmd;
  accel_host_queue_record_read(q, rec, h, seq, &cmd);
  const accel_trace_cmd_t tc = {
      .kind = cmd.kind,
      .direction = accel_cmd_direction(&cmd),
      .seq = seq,
      .bytes = accel_cmd_bytes(&cmd),
      .timestamp = cmd.kind == ACCEL_CMD_SIGNAL ? cmd.signal.timestamp_out
                                                : NULL};
  accel_trace_nested_start(q, &tc);
  accel_status_t st = accel_host_queue_run_command(q, &cmd);
  accel_trace_nested_end(q, &tc, st);
  return st;
}

// Command |index| (of kind |kind|) of |r| failed with |st|: names it.
static __attribute__((noinline)) accel_status_t replay_failed(
    const accel_drv_recording_t *r, uint32_t index, uint32_t kind,
    accel_status_t st) {
  char why[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof(why), "%s", accel_last_error());
  return accel_error(st, "command buffer \"%s\" command #%u (%s) failed: %s",
                     r->name, index, accel_cmd_kind_name(kind), why);
}

accel_status_t accel_host_queue_replay(accel_drv_queue_t *q,
                                       const accel_cmd_t *cmd) {
  const accel_drv_recording_t *r = cmd->execute.recording;
  const uint64_t *bases = cmd->execute.bases;
  uint32_t first = cmd->execute.first;
  uint32_t end = first + cmd->execute.count;
  const record_word_t *w = r->words + r->starts[first];
  const host_patch_t *p = r->patches + r->patch_starts[first];
  // The quiet path (host calls and launches without the nested hooks,
  // counted in bulk) as the worker read it for this command.
  bool quiet = q->quiet;
  uint64_t calls = 0;
  uint64_t launches = 0;
  accel_status_t st = ACCEL_OK;
  uint32_t i = first;
  while (i < end) {
    uint32_t run = quiet ? r->runs[i] : 0;
    if (run > 0) {
      // Host calls take no patches: their function and data are recorded.
      uint32_t n = run < end - i ? run : end - i;
      const host_call_pair_t *c = &r->calls[i];
      // run_host_fn's steps with the message buffer in a register (the
      // calls may change |q| as far as the compiler knows).
      char *message = q->error_buffer;
      uint32_t j = 0;
      for (; j < n; ++j) {
        // A destroy that aborts pending work stops a long run too (checked
        // every 256 calls: a relaxed load of a line that is rarely written).
        if ((j & 255) == 0 &&
            atomic_load_explicit(&q->cancel, memory_order_relaxed)) {
          st = accel_error(ACCEL_ERROR_ABORTED,
                           "aborted: stream destroyed with pending work");
          break;
        }
        message[0] = '\0';  // attribute a message to this call only
        st = c[j].fn(c[j].user_data);
        if (__builtin_expect(st != ACCEL_OK, 0)) {
          st = accel_host_queue_fn_failed(st);
          break;
        }
      }
      calls += j;
      i += j;
      w += 3 * j;  // a host call's record is 3 words
      if (st != ACCEL_OK) {
        break;
      }
      continue;
    }
    uint64_t h = w[0].u;
    uint32_t n = header_words(h);
    record_word_t tmp[MAX_RECORD_WORDS];
    const record_word_t *rec = p->word < (uint32_t)(w - r->words) + n
                                   ? patch_record(r, w, h, bases, &p, tmp)
                                   : w;
    if (atomic_load_explicit(&q->cancel, memory_order_relaxed)) {
      st = accel_error(ACCEL_ERROR_ABORTED,
                       "aborted: stream destroyed with pending work");
    } else if (header_kind(h) == ACCEL_CMD_LAUNCH && quiet) {
      st = rec[1].exec(rec[2].p, q->device);
      launches += st == ACCEL_OK;
    } else {
      st = run_traced(q, rec, h, cmd->seq);
    }
    if (__builtin_expect(st != ACCEL_OK, 0)) {
      break;
    }
    w += n;
    ++i;
  }
  if (st != ACCEL_OK) {
    q->replay_resume = i + 1;
    st = replay_failed(r, i, header_kind(w[0].u), st);
  }
  // Counted in bulk with the queue's own quiet commands (count_quiet_calls).
  q->replayed_host_calls += calls;
  q->replayed_launches += launches;
  return st;
}

void accel_host_queue_replay_skip(accel_drv_queue_t *q, const accel_cmd_t *cmd,
                                  uint32_t from) {
  const accel_drv_recording_t *r = cmd->execute.recording;
  uint32_t end = cmd->execute.first + cmd->execute.count;
  if (from >= end) {
    return;
  }
  const record_word_t *w = r->words + r->starts[from];
  const host_patch_t *p = r->patches + r->patch_starts[from];
  for (uint32_t i = from; i < end; ++i) {
    uint64_t h = w[0].u;
    uint32_t n = header_words(h);
    record_word_t tmp[MAX_RECORD_WORDS];
    const record_word_t *rec =
        p->word < (uint32_t)(w - r->words) + n
            ? patch_record(r, w, h, cmd->execute.bases, &p, tmp)
            : w;
    if (header_kind(h) == ACCEL_CMD_SIGNAL) {
      accel_host_semaphore_fail(rec[1].semaphore, q->poison_status,
                                q->poison_message);
    }
    w += n;
  }
}
