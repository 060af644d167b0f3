// accel-bench trace: what tracing costs on the launch round trip.
//
// Figures (medians of repeated runs after a warm-up; the configurations are
// measured in turn within each run so that drift hits them alike):
//  - roundtrip_tracing_off: a launch of an empty kernel (a run-time kernel,
//    one work-group) enqueued and synchronized with
//    every hook switched off at run time (counters, flight recorder,
//    recorder): the "tracing compiled out" baseline. What remains is one
//    relaxed load and branch per hook, and the LTTng tracepoints' own
//    disabled-state branches.
//  - roundtrip_no_session: the default state (perf counters on, no LTTng
//    session, no recording, flight recorder off). Target <= 1.02x.
//  - roundtrip_flight_recorder: the default state plus the flight recorder
//    (ACCEL_FLIGHT_EVENTS / ACCEL_FLIGHT_DIR).
//  - roundtrip_lttng_session: an lttng-sessiond started here records
//    `accel:*` (skipped with a note where LTTng is absent or a session daemon
//    already runs).
//  - roundtrip_recorder: the built-in recorder writing a Perfetto file.
//    Target <= 1.2x.
//  - event_record_ns: one event into the recorder (the cost each traced
//    moment adds while recording). Target < 50 ns.
//  - event_record_and_flight_ns: the same with the flight ring too.
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel/accel.h"
#include "accel_config.h"
#include "bench.h"
#include "trace/trace_impl.h"

#define RUNS_MAX 301

enum { MODE_OFF, MODE_DEFAULT, MODE_FLIGHT, MODE_RECORDER, MODE_LTTNG,
       MODE_COUNT };

static int32_t empty_kernel(const accel_kernel_dispatch_t *d,
                            const accel_kernel_workgroup_t *wg) {
  return 0;
}

static accel_kernel_t *g_kernel;

static double roundtrip(accel_stream_t *s, int iters) {
  static const accel_launch_desc_t desc = {
      .struct_size = sizeof(desc), .workgroup_count = {1, 1, 1}};
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    accel_launch(s, g_kernel, &desc);
    accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
  }
  return (double)(bench_now_ns() - t0) / iters;
}

static void set_mode(int mode) {
  switch (mode) {
    case MODE_OFF:
      accel_trace_set_enabled(false);
      break;
    case MODE_FLIGHT:
      accel_trace_set_enabled(true);
      atomic_fetch_or(&accel_trace_mask_g, ACCEL_TRACE_M_FLIGHT);
      break;
    default:
      accel_trace_set_enabled(true);
      break;
  }
}

// --- an LTTng session of our own ---------------------------------------------

typedef struct lttng_session {
  bool on;
  int sessiond_pid;
  char dir[64];
  char why[160];
} lttng_session_t;

static int sh(const char *fmt, const char *arg) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd), fmt, arg, arg, arg);
  return system(cmd);
}

static void lttng_begin(lttng_session_t *l) {
#if ACCEL_HAVE_LTTNG
  snprintf(l->dir, sizeof(l->dir), "/tmp/accel-bench-lttng-XXXXXX");
  if (mkdtemp(l->dir) == NULL) {
    snprintf(l->why, sizeof(l->why), "cannot create a temporary directory");
    return;
  }
  if (sh("command -v lttng-sessiond >/dev/null 2>&1%.0s%.0s%.0s", "") != 0) {
    snprintf(l->why, sizeof(l->why), "lttng-tools not installed");
    return;
  }
  if (sh("LTTNG_HOME=%s lttng list >/dev/null 2>&1%.0s%.0s", l->dir) == 0) {
    snprintf(l->why, sizeof(l->why),
             "a session daemon is already running; not disturbing it");
    return;
  }
  if (sh("LTTNG_HOME=%s lttng-sessiond --daemonize --no-kernel "
         ">/dev/null 2>&1%.0s%.0s",
         l->dir) != 0) {
    snprintf(l->why, sizeof(l->why), "lttng-sessiond did not start");
    return;
  }
  char pidfile[128];
  snprintf(pidfile, sizeof(pidfile), "%s",
           geteuid() == 0 ? "/var/run/lttng/lttng-sessiond.pid" : "");
  if (geteuid() != 0) {
    snprintf(pidfile, sizeof(pidfile), "%s/.lttng/lttng-sessiond.pid",
             l->dir);
  }
  FILE *f = fopen(pidfile, "r");
  if (f == NULL || fscanf(f, "%d", &l->sessiond_pid) != 1) {
    snprintf(l->why, sizeof(l->why), "no session daemon pid file");
    if (f != NULL) {
      fclose(f);
    }
    return;
  }
  fclose(f);
  if (sh("cd %s && LTTNG_HOME=%s lttng create accel-bench --output=%s/trace "
         ">/dev/null && LTTNG_HOME=$PWD lttng enable-event -u 'accel:*' "
         ">/dev/null && LTTNG_HOME=$PWD lttng start >/dev/null",
         l->dir) != 0) {
    snprintf(l->why, sizeof(l->why), "lttng session setup failed");
    return;
  }
  // This process registers with the new daemon asynchronously.
  for (int i = 0; i < 500 && !accel_trace_lttng_listening(); ++i) {
    usleep(10000);
  }
  if (!accel_trace_lttng_listening()) {
    snprintf(l->why, sizeof(l->why),
             "this process did not register with the session daemon");
    return;
  }
  l->on = true;
#else
  snprintf(l->why, sizeof(l->why), "accel built without LTTng-UST");
#endif
}

static void lttng_end(lttng_session_t *l) {
  if (l->dir[0] == '\0') {
    return;
  }
  if (l->sessiond_pid > 0) {
    sh("cd %s && LTTNG_HOME=$PWD lttng destroy -a >/dev/null 2>&1%.0s%.0s",
       l->dir);
    kill(l->sessiond_pid, SIGTERM);
    for (int i = 0; i < 100 && kill(l->sessiond_pid, 0) == 0; ++i) {
      usleep(20000);
    }
  }
  sh("rm -rf %s%.0s%.0s", l->dir);
}

// Every sample the trace figures come from. The runs are not a
// bench_group_t: no run is a warm-up (each sample warms up its own round
// trip), the event figures take their runs one mode after the other, and the
// LTTng figures, measured last, are judged against the off state of the
// first runs.
typedef struct trace_bench {
  accel_stream_t *s;
  int runs;
  int iters;
  char trace_path[32];
  double samples[MODE_COUNT][RUNS_MAX];
  double lt_samples[RUNS_MAX], off2[RUNS_MAX];
  double per_event[2][16];
  int event_runs;
  lttng_session_t lt;
} trace_bench_t;

// The round trip in each mode, the modes taking turns within each run.
static int measure_modes(trace_bench_t *b) {
  for (int r = 0; r < b->runs; ++r) {
    // The order rotates from run to run so that no configuration always
    // follows the recorder's stop (a file write, the worker parking).
    for (int k = 0; k < MODE_COUNT; ++k) {
      int mode = (r + k) % MODE_COUNT;
      if (mode == MODE_LTTNG) {
        continue;  // measured below with a session listening
      }
      set_mode(mode);
      if (mode == MODE_RECORDER &&
          accel_trace_start(b->trace_path) != ACCEL_OK) {
        fprintf(stderr, "accel-bench trace: %s\n", accel_last_error());
        return 1;
      }
      roundtrip(b->s, 20);  // warm-up
      b->samples[mode][r] = roundtrip(b->s, b->iters);
      if (mode == MODE_RECORDER) {
        accel_trace_stop();
      }
    }
  }
  return 0;
}

// Per-event cost while recording, without and with the flight ring.
static void measure_events(trace_bench_t *b, uint64_t n_events) {
  for (int flight = 0; flight < 2; ++flight) {
    set_mode(flight ? MODE_FLIGHT : MODE_DEFAULT);
    accel_trace_start(b->trace_path);
    for (int r = 0; r < b->event_runs; ++r) {
      uint64_t t0 = bench_now_ns();
      for (uint64_t i = 0; i < n_events; ++i) {
        accel_trace_emit(ACCEL_TEV_SEM_SIGNAL, 0, 0, i, i);
      }
      b->per_event[flight][r] =
          (double)(bench_now_ns() - t0) / (double)n_events;
      accel_trace_flush();
    }
    accel_trace_stop();
  }
  set_mode(MODE_DEFAULT);
}

// LTTng: a session of our own, measured against the off state in turn.
static void measure_lttng(trace_bench_t *b) {
  lttng_begin(&b->lt);
  for (int r = 0; r < b->runs && b->lt.on; ++r) {
    // Our hooks off, LTTng recording; then the defaults and LTTng.
    set_mode(MODE_OFF);
    roundtrip(b->s, 20);
    b->lt_samples[r] = roundtrip(b->s, b->iters);
    set_mode(MODE_DEFAULT);
    roundtrip(b->s, 20);
    b->off2[r] = roundtrip(b->s, b->iters);
  }
  lttng_end(&b->lt);
  set_mode(MODE_DEFAULT);
}

// Median of mode |mode|'s round trips, in us.
static double mode_us(const trace_bench_t *b, int mode) {
  return bench_median(b->samples[mode], b->runs) / 1000.0;
}

static void add_figures(bench_report_t *report, const trace_bench_t *b) {
  int runs = b->runs;
  double off = mode_us(b, MODE_OFF);
  bench_add(report, "roundtrip_tracing_off", off, "us", NULL, 0, NULL, runs);
  bench_add(report, "roundtrip_no_session", mode_us(b, MODE_DEFAULT), "us",
            "roundtrip_tracing_off", off, "<= 1.02", runs);
  bench_add(report, "roundtrip_flight_recorder", mode_us(b, MODE_FLIGHT),
            "us", "roundtrip_tracing_off", off, NULL, runs);
  bench_add(report, "roundtrip_recorder", mode_us(b, MODE_RECORDER), "us",
            "roundtrip_tracing_off", off, "<= 1.2", runs);
  // The recorder against the default state too: the off state's handoff
  // timing differs (its median can exceed the default state's), so this is
  // the recorder's own increment.
  bench_add(report, "roundtrip_recorder_vs_no_session",
            mode_us(b, MODE_RECORDER), "us", "roundtrip_no_session",
            mode_us(b, MODE_DEFAULT), NULL, runs);
  if (b->lt.on) {
    bench_add(report, "roundtrip_lttng_session",
              bench_median(b->lt_samples, runs) / 1000.0, "us",
              "roundtrip_tracing_off", off, NULL, runs);
    bench_add(report, "roundtrip_lttng_session_and_defaults",
              bench_median(b->off2, runs) / 1000.0, "us",
              "roundtrip_tracing_off", off, NULL, runs);
  } else {
    fprintf(stderr, "accel-bench trace: LTTng session figure skipped: %s\n",
            b->lt.why);
  }
  bench_add(report, "event_record_ns",
            bench_median(b->per_event[0], b->event_runs), "ns", NULL, 0,
            "< 50", b->event_runs);
  bench_add(report, "event_record_and_flight_ns",
            bench_median(b->per_event[1], b->event_runs), "ns", NULL, 0, NULL,
            b->event_runs);
}

int accel_bench_trace(const bench_args_t *args) {
  // Many short runs (tens of microseconds each), the configurations taking
  // turns within each, so that the machine's noise (other tenants, a worker
  // descheduled for 100 us) spreads evenly and hits a minority of runs,
  // which the median then ignores.
  int runs = args->quick ? 31 : RUNS_MAX;
  int iters = args->quick ? 200 : 300;
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_stream_t *s = NULL;
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "empty", .fn = empty_kernel,
                            .workgroup_size = {1, 1, 1}};
#ifdef ACCEL_LTTNG_PROVIDER_PATH
  // The LTTng figures need the provider library loaded (ACCEL_LTTNG; see
  // lib/trace/lttng_load.c): the build tree's when there is one. Every mode
  // then runs with it loaded, as every mode did when libaccel linked it.
  setenv("ACCEL_LTTNG",
         access(ACCEL_LTTNG_PROVIDER_PATH, R_OK) == 0 ? ACCEL_LTTNG_PROVIDER_PATH
                                                      : "1",
         0);
#endif
  if (accel_runtime_create(NULL, &rt) != ACCEL_OK ||
      accel_device_get(rt, 0, &dev) != ACCEL_OK ||
      accel_stream_create(dev, NULL, &s) != ACCEL_OK ||
      accel_kernel_register(dev, &kd, &g_kernel) != ACCEL_OK) {
    fprintf(stderr, "accel-bench trace: %s\n", accel_last_error());
    return 1;
  }
  accel_trace_clock_init();  // as a recording would, before timing
  bench_report_t report = {.bench = "trace"};
  snprintf(report.device, sizeof(report.device), "host:0");
  trace_bench_t *b = calloc(1, sizeof(*b));  // ~20 KiB of samples
  if (b == NULL) {
    return 1;
  }
  b->s = s;
  b->runs = runs;
  b->iters = iters;
  b->event_runs = args->quick ? 3 : 9;
  snprintf(b->trace_path, sizeof(b->trace_path),
           "/tmp/accel-bench-trace-XXXXXX");
  int fd = mkstemp(b->trace_path);
  if (fd >= 0) {
    close(fd);
  }
  int rc = 1;
  if (measure_modes(b) == 0) {
    measure_events(b, args->quick ? 200000 : 1000000);
    unlink(b->trace_path);
    measure_lttng(b);
    add_figures(&report, b);
    rc = bench_print(&report, args->json);
  }
  free(b);
  accel_kernel_release(g_kernel);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
  return rc;
}
