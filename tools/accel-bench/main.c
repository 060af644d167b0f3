// accel-bench NAME [--json] [--quick] [--budget S] [--precision X]
// [--filter GLOB]: runs one benchmark and prints its figures with their
// same-run baselines, ratios, intervals and verdicts (docs/benchmarks.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#if BENCH_HAVE_HISTORY
#include "compare.h"
#include "report.h"
#include "run.h"
#endif

static const struct {
  const char *name;
  int (*run)(const bench_args_t *args);
  const char *what;
} k_benches[] = {
    {"launch", accel_bench_launch,
     "host-command round trip and enqueue cost vs bare thread handoffs"},
    {"alloc", accel_bench_alloc,
     "slab vs malloc/jemalloc/mimalloc, paged KV-cache trace, async pool"},
    {"topo", accel_bench_topo,
     "runtime creation with device placement vs without; topology load"},
    {"load", accel_bench_load,
     "load an .axe with 1 GiB of weights to first launch vs read()"},
    {"trace", accel_bench_trace,
     "empty-kernel launch round trip: tracing off, counters, LTTng, recorder"},
    {"dma", accel_bench_dma,
     "DMA copy bandwidth, 4 KiB latency and staging vs memcpy baselines"},
    {"recovery", accel_bench_recovery,
     "cluster failure detection and resume vs the heartbeat timeout"},
#ifdef ACCEL_BENCH_HAVE_KERNELS
    {"kernels", accel_bench_kernels,
     "reference kernels through accel_launch vs OpenBLAS and memcpy"},
    {"serve", accel_bench_serve,
     "serving engine: continuous vs static batching, KV waste, prefix cache"},
    {"llm", accel_bench_llm,
     "a model (--model FILE, .gguf or .axe): prefill and decode tok/s at "
     "batch 1 and 8"},
#endif
    {"shim", accel_bench_shim,
     "a call through the C shim's function table vs the direct call"},
    {"cuda", accel_bench_cuda,
     "CUDA launch and pinned copies vs bare driver calls (skipped without "
     "a CUDA device)"},
};

// A positive number from option |name|'s value |text| into |out|.
static int parse_positive(const char *name, const char *text, double *out) {
  char *end = NULL;
  double v = text != NULL ? strtod(text, &end) : 0;
  if (text == NULL || end == text || *end != '\0' || !(v > 0)) {
    fprintf(stderr, "accel-bench: %s needs a positive number, not \"%s\"\n",
            name, text != NULL ? text : "");
    return 1;
  }
  *out = v;
  return 0;
}

// The options every benchmark takes; the rest go to args->argv.
static int parse_args(int argc, char **argv, bench_args_t *args) {
  for (int i = 2; i < argc && args->argc < 64; ++i) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--json") == 0) {
      args->json = true;
    } else if (strcmp(argv[i], "--quick") == 0) {
      args->quick = true;
    } else if (strcmp(argv[i], "--budget") == 0) {
      if (parse_positive("--budget", next, &args->budget_s)) {
        return 1;
      }
      i++;
    } else if (strcmp(argv[i], "--precision") == 0) {
      if (parse_positive("--precision", next, &args->precision)) {
        return 1;
      }
      i++;
    } else if (strcmp(argv[i], "--min-pairs") == 0) {
      double n = 0;
      if (parse_positive("--min-pairs", next, &n)) {
        return 1;
      }
      args->min_pairs = (int)n;
      i++;
    } else if (strcmp(argv[i], "--filter") == 0 && next != NULL) {
      args->filter = next;
      i++;
    } else {
      args->argv[args->argc++] = argv[i];
    }
  }
  return 0;
}

// The history commands (docs/benchmarks.md): run, save, compare, report.
// Returns -1 when |argv[1]| names none of them.
static int history_command(int argc, char **argv) {
  static const char *const k_history[] = {"run", "save", "compare", "report"};
  size_t k = 0;
  while (k < 4 && strcmp(argv[1], k_history[k]) != 0) {
    k++;
  }
  if (k == 4) {
    return -1;
  }
#if BENCH_HAVE_HISTORY
  const char *names[sizeof(k_benches) / sizeof(k_benches[0])];
  for (size_t i = 0; i < sizeof(k_benches) / sizeof(k_benches[0]); ++i) {
    names[i] = k_benches[i].name;
  }
  switch (k) {
    case 0:
      return accel_bench_run_main(argc - 2, argv + 2, names,
                                  (int)(sizeof(names) / sizeof(names[0])));
    case 1:
      return accel_bench_save_main(argc - 2, argv + 2);
    case 2:
      return accel_bench_compare_main(argc - 2, argv + 2);
    default:
      return accel_bench_report_main(argc - 2, argv + 2);
  }
#else
  (void)argc;
  fprintf(stderr, "accel-bench %s: unsupported: accel-bench was built "
          "without json-c or libsqlite3\n", k_history[k]);
  return 2;
#endif
}

static int usage(void) {
  fprintf(stderr,
          "usage: accel-bench NAME [--json] [--quick] [--budget SECONDS]\n"
          "                        [--precision X] [--filter GLOB]\n\n"
          "options:\n"
          "  --json       print the report as one JSON object\n"
          "  --quick      the minimum pairs per group only (for tests)\n"
          "  --budget S   time a group may spend beyond its minimum pairs\n"
          "               while an interval is too wide (default 10)\n"
          "  --precision X  narrow enough: interval width <= X * median\n"
          "               (default 0.05)\n"
          "  --filter G   only groups with a figure matching glob G\n"
          "  --min-pairs N  at least N pairs per group\n"
          "\n"
          "       accel-bench run (--all | NAME...) [--out FILE] [--save DB] "
          "[options]\n"
          "       accel-bench save --db DB FILE...\n"
          "       accel-bench compare [--db DB] [--alpha A] [--threshold T] "
          "[--all] BASE NEW\n"
          "       accel-bench report --db DB --out FILE.html [--js PATH]\n"
          "(docs/benchmarks.md)\n\nbenchmarks:\n");
  for (size_t i = 0; i < sizeof(k_benches) / sizeof(k_benches[0]); ++i) {
    fprintf(stderr, "  %-10s %s\n", k_benches[i].name, k_benches[i].what);
  }
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    return usage();
  }
  int history = history_command(argc, argv);
  if (history >= 0) {
    return history;
  }
  char *rest[64];
  bench_args_t args = {.argv = rest};
  if (parse_args(argc, argv, &args) != 0) {
    return 2;
  }
  for (size_t i = 0; i < sizeof(k_benches) / sizeof(k_benches[0]); ++i) {
    if (strcmp(argv[1], k_benches[i].name) == 0) {
      bench_configure(&args);
      bench_meta_begin();
      return k_benches[i].run(&args);
    }
  }
  fprintf(stderr, "accel-bench: no benchmark \"%s\"\n", argv[1]);
  return usage();
}
