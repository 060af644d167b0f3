// accel-bench trace: what tracing costs on the launch round trip.
//
// Figures (medians of per-run ratios against a baseline measured in the same
// run; the configurations are measured in turn within each run, in an order
// that rotates, so that drift hits them alike):
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
//    `accel:*`, our hooks off, against the off state without a session
//    measured in the same runs; roundtrip_lttng_session_and_defaults the same
//    with the defaults on (skipped with a note where LTTng is absent or a
//    session daemon already runs).
//  - roundtrip_recorder: the built-in recorder writing a Perfetto file.
//    Target <= 1.2x.
//  - event_record_ns: one event into the recorder (the cost each traced
//    moment adds while recording). Target < 50 ns.
//  - event_record_and_flight_ns: the same with the flight ring too, against
//    event_record_ns.
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

// What the trace groups share.
typedef struct trace_bench {
  accel_stream_t *s;
  int iters;
  uint64_t n_events;
  char trace_path[32];
  lttng_session_t lt;
} trace_bench_t;

// The round trip in each mode but LTTng's, the modes taking turns within
// each run in an order that rotates from run to run, so that no
// configuration always follows the recorder's stop (a file write, the
// worker parking).
static int modes_measure(void *ctx, int run, double *out) {
  trace_bench_t *b = ctx;
  int first = run < 0 ? 0 : run;
  for (int k = 0; k < MODE_LTTNG; ++k) {
    int mode = (first + k) % MODE_LTTNG;
    set_mode(mode);
    if (mode == MODE_RECORDER && accel_trace_start(b->trace_path) != ACCEL_OK) {
      fprintf(stderr, "accel-bench trace: %s\n", accel_last_error());
      return 1;
    }
    roundtrip(b->s, 20);  // warm-up
    out[mode] = roundtrip(b->s, b->iters) / 1000.0;  // us
    if (mode == MODE_RECORDER) {
      accel_trace_stop();
    }
  }
  set_mode(MODE_DEFAULT);
  return 0;
}

static const bench_figure_t k_mode_figures[] = {
    {"roundtrip_tracing_off", "us", MODE_OFF, NULL, 0, NULL, BENCH_PAIRED,
     false},
    {"roundtrip_no_session", "us", MODE_DEFAULT, "roundtrip_tracing_off",
     MODE_OFF, "<= 1.02", BENCH_PAIRED, false},
    {"roundtrip_flight_recorder", "us", MODE_FLIGHT, "roundtrip_tracing_off",
     MODE_OFF, NULL, BENCH_PAIRED, false},
    {"roundtrip_recorder", "us", MODE_RECORDER, "roundtrip_tracing_off",
     MODE_OFF, "<= 1.2", BENCH_PAIRED, false},
    // The recorder against the default state too: the recorder's own
    // increment, whatever the off state's handoff timing does.
    {"roundtrip_recorder_vs_no_session", "us", MODE_RECORDER,
     "roundtrip_no_session", MODE_DEFAULT, NULL, BENCH_PAIRED, false},
};

// Per-event cost while recording, without and then with the flight ring.
static int events_measure(void *ctx, int run, double *out) {
  (void)run;
  trace_bench_t *b = ctx;
  for (int flight = 0; flight < 2; ++flight) {
    set_mode(flight ? MODE_FLIGHT : MODE_DEFAULT);
    if (accel_trace_start(b->trace_path) != ACCEL_OK) {
      fprintf(stderr, "accel-bench trace: %s\n", accel_last_error());
      return 1;
    }
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < b->n_events; ++i) {
      accel_trace_emit(ACCEL_TEV_SEM_SIGNAL, 0, 0, i, i);
    }
    out[flight] = (double)(bench_now_ns() - t0) / (double)b->n_events;
    accel_trace_stop();
  }
  set_mode(MODE_DEFAULT);
  return 0;
}

static const bench_figure_t k_event_figures[] = {
    {"event_record_ns", "ns", 0, NULL, 0, "< 50", BENCH_PAIRED, false},
    {"event_record_and_flight_ns", "ns", 1, "event_record_ns", 0, NULL,
     BENCH_PAIRED, false},
};

enum { LT_OFF, LT_SESSION, LT_SESSION_DEFAULTS, LT_SLOTS };

// LTTng: the off state with no session (our hooks off, the session stopped
// recording), then with the session recording, our hooks off and then on.
static int lttng_measure(void *ctx, int run, double *out) {
  (void)run;
  trace_bench_t *b = ctx;
  const int modes[LT_SLOTS] = {MODE_OFF, MODE_OFF, MODE_DEFAULT};
  for (int k = 0; k < LT_SLOTS; ++k) {
    if (k <= LT_SESSION &&
        sh(k == LT_OFF ? "cd %s && LTTNG_HOME=$PWD lttng stop >/dev/null%.0s%.0s"
                       : "cd %s && LTTNG_HOME=$PWD lttng start >/dev/null%.0s%.0s",
           b->lt.dir) != 0) {
      fprintf(stderr, "accel-bench trace: lttng start/stop failed\n");
      return 1;
    }
    set_mode(modes[k]);
    roundtrip(b->s, 20);
    out[k] = roundtrip(b->s, b->iters) / 1000.0;
  }
  set_mode(MODE_DEFAULT);
  return 0;
}

static const bench_figure_t k_lttng_figures[] = {
    {"roundtrip_lttng_session", "us", LT_SESSION, "roundtrip_tracing_off",
     LT_OFF, NULL, BENCH_PAIRED, false},
    {"roundtrip_lttng_session_and_defaults", "us", LT_SESSION_DEFAULTS,
     "roundtrip_tracing_off", LT_OFF, NULL, BENCH_PAIRED, false},
};

#define FIGURES(f) .figures = (f), .figure_count = sizeof(f) / sizeof((f)[0])

static int trace_groups_run(bench_report_t *report, trace_bench_t *b,
                            bool quick) {
  // Many short runs (milliseconds each), the configurations taking turns
  // within each, so that the machine's noise (other tenants, a worker
  // descheduled for 100 us) spreads evenly and hits a minority of pairs,
  // which the median then ignores.
  const bench_group_t modes = {.runs = quick ? 11 : 31, .slots = MODE_LTTNG,
                               .measure = modes_measure,
                               FIGURES(k_mode_figures)};
  const bench_group_t events = {.runs = quick ? 3 : 9, .slots = 2,
                                .measure = events_measure, .max_runs = 200,
                                FIGURES(k_event_figures)};
  const bench_group_t lttng = {.runs = quick ? 5 : 15, .slots = LT_SLOTS,
                               .measure = lttng_measure, .max_runs = 200,
                               FIGURES(k_lttng_figures)};
  if (bench_group_run(report, &modes, b) ||
      bench_group_run(report, &events, b)) {
    return 1;
  }
  unlink(b->trace_path);
  lttng_begin(&b->lt);
  int failed = 0;
  if (b->lt.on) {
    failed = bench_group_run(report, &lttng, b);
  } else {
    fprintf(stderr, "accel-bench trace: LTTng session figure skipped: %s\n",
            b->lt.why);
  }
  lttng_end(&b->lt);
  set_mode(MODE_DEFAULT);
  return failed;
}

int accel_bench_trace(const bench_args_t *args) {
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
  bench_report_t report;
  bench_report_init(&report, "trace", dev);
  trace_bench_t b = {.s = s, .iters = args->quick ? 200 : 300,
                     .n_events = args->quick ? 100000 : 500000};
  snprintf(b.trace_path, sizeof(b.trace_path),
           "/tmp/accel-bench-trace-XXXXXX");
  int fd = mkstemp(b.trace_path);
  if (fd >= 0) {
    close(fd);
  }
  int rc = trace_groups_run(&report, &b, args->quick);
  unlink(b.trace_path);
  if (rc == 0) {
    rc = bench_print(&report, args->json);
  }
  accel_kernel_release(g_kernel);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
  return rc;
}
