// accel-bench NAME [--json] [--quick]: runs one benchmark and prints its
// figures with their same-run baselines and ratios.
#include <stdio.h>
#include <string.h>

#include "bench.h"

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
#endif
    {"shim", accel_bench_shim,
     "a call through the C shim's function table vs the direct call"},
    {"cuda", accel_bench_cuda,
     "CUDA launch and pinned copies vs bare driver calls (skipped without "
     "a CUDA device)"},
};

static int usage(void) {
  fprintf(stderr, "usage: accel-bench NAME [--json] [--quick]\n\nbenchmarks:\n");
  for (size_t i = 0; i < sizeof(k_benches) / sizeof(k_benches[0]); ++i) {
    fprintf(stderr, "  %-10s %s\n", k_benches[i].name, k_benches[i].what);
  }
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    return usage();
  }
  char *rest[64];
  bench_args_t args = {.argv = rest};
  for (int i = 2; i < argc && args.argc < 64; ++i) {
    if (strcmp(argv[i], "--json") == 0) {
      args.json = true;
    } else if (strcmp(argv[i], "--quick") == 0) {
      args.quick = true;
    } else {
      rest[args.argc++] = argv[i];
    }
  }
  for (size_t i = 0; i < sizeof(k_benches) / sizeof(k_benches[0]); ++i) {
    if (strcmp(argv[1], k_benches[i].name) == 0) {
      return k_benches[i].run(&args);
    }
  }
  fprintf(stderr, "accel-bench: no benchmark \"%s\"\n", argv[1]);
  return usage();
}
