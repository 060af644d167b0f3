// accel-bench load: time from "load this .axe" to "its first kernel launch
// completed" on the host device, for an executable with 1 GiB of weights
// (64 MiB with --quick), against reading the same file once with read() into
// a buffer, measured in the same run with the file in the page cache.
//
// Figures (medians of per-run ratios against the read, taken side by side
// in each run after a warm-up; bench.h):
//  - load_to_first_launch_skip_hashes: load with
//    ACCEL_EXECUTABLE_LOAD_SKIP_HASHES (weights mapped, not copied), look up
//    a kernel, launch it, synchronize. Target <= 0.1x the read.
//  - load_to_first_launch_hashed: the same with every section hash checked
//    (XXH3-128 over all bytes). Target <= 1.3x the read.
//  - weight_bytes: the weights in the file, for reference (exact).
//
// The host kernels code object comes from ACCEL_HOST_KERNELS (a path) or the
// build tree (ACCEL_HOST_KERNELS_PATH). The file is written to $TMPDIR (or
// /tmp) and removed afterwards.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/accel.h"
#include "bench.h"

#ifndef ACCEL_HOST_KERNELS_PATH
#define ACCEL_HOST_KERNELS_PATH ""
#endif

static int check(accel_status_t st, const char *what) {
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench load: %s: %s: %s\n", what,
            accel_status_name(st), accel_last_error());
    return 1;
  }
  return 0;
}

static void *read_small(const char *path, uint64_t *out_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return NULL;
  }
  struct stat sb;
  void *d = NULL;
  if (fstat(fd, &sb) == 0 && sb.st_size > 0) {
    d = malloc((size_t)sb.st_size);
    if (d != NULL && read(fd, d, (size_t)sb.st_size) != sb.st_size) {
      free(d);
      d = NULL;
    }
    *out_size = (uint64_t)sb.st_size;
  }
  close(fd);
  return d;
}

// Reads the whole file with read() into |buf|; returns ns, 0 on error.
static uint64_t time_read(const char *path, uint8_t *buf, uint64_t size) {
  uint64_t t0 = bench_now_ns();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return 0;
  }
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, buf + done,
                     size - done > (1u << 30) ? (1u << 30) : (size_t)(size - done));
    if (n <= 0) {
      close(fd);
      return 0;
    }
    done += (uint64_t)n;
  }
  close(fd);
  return bench_now_ns() - t0;
}

// Load, look up, launch, synchronize; returns ns, 0 on error.
static uint64_t time_first_launch(accel_runtime_t *rt, accel_device_t *dev,
                                  accel_stream_t *s, const char *path,
                                  accel_executable_load_flags_t flags) {
  uint64_t t0 = bench_now_ns();
  accel_executable_t *exe;
  accel_kernel_t *k;
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {1, 1, 1}};
  if (check(accel_executable_load_file(rt, dev, path, flags, &exe), "load")) {
    return 0;
  }
  if (check(accel_executable_kernel(exe, "empty", &k), "kernel") ||
      check(accel_launch(s, k, &d), "launch") ||
      check(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE), "sync")) {
    accel_executable_release(exe);
    return 0;
  }
  uint64_t t = bench_now_ns() - t0;
  accel_executable_release(exe);
  return t;
}

// Writes the executable to |path|: the empty kernel, the code object |so|
// for |target|, and |weight_bytes| of weights as 16 tensors of f32.
static accel_status_t write_executable(const char *path, const char *target,
                                       const void *so, uint64_t so_size,
                                       uint64_t weight_bytes) {
  uint8_t *weights = mmap(NULL, weight_bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (weights == MAP_FAILED) {
    fprintf(stderr, "accel-bench load: cannot map %llu bytes\n",
            (unsigned long long)weight_bytes);
    return ACCEL_ERROR_OUT_OF_MEMORY;
  }
  for (uint64_t i = 0; i < weight_bytes; i += 4096) {
    weights[i] = (uint8_t)(i >> 12);
  }
  accel_exe_builder_t *b;
  accel_status_t st = accel_exe_builder_create(&b);
  if (st != ACCEL_OK) {
    munmap(weights, weight_bytes);
    return st;
  }
  accel_exe_kernel_desc_t kd = {.struct_size = sizeof(kd), .name = "empty"};
  st = accel_exe_builder_add_kernel(b, &kd);
  if (st == ACCEL_OK) {
    st = accel_exe_builder_add_code(b, target, ACCEL_CODE_FORMAT_ELF_SO, so,
                                    so_size);
  }
  uint64_t per = weight_bytes / 16;
  for (int i = 0; i < 16 && st == ACCEL_OK; ++i) {
    char name[32];
    snprintf(name, sizeof(name), "layer%02d.weight", i);
    accel_exe_weight_desc_t w = {.struct_size = sizeof(w), .mappable = 1};
    w.info = (accel_weight_info_t){
        .struct_size = sizeof(w.info), .name = name, .dtype = ACCEL_DTYPE_F32,
        .rank = 2, .shape = {per / 4 / 1024, 1024},
        .host_data = weights + (uint64_t)i * per, .size_bytes = per};
    st = accel_exe_builder_add_weight(b, &w);
  }
  if (st == ACCEL_OK) {
    st = accel_exe_builder_write_file(b, path, NULL, NULL);
  }
  accel_exe_builder_destroy(b);
  munmap(weights, weight_bytes);
  return st;
}

// What the load figures measure on.
typedef struct load_bench {
  accel_runtime_t *rt;
  accel_device_t *dev;
  accel_stream_t *s;
  const char *path;
  uint8_t *buf;  // the read() baseline's buffer, faulted in before timing
  uint64_t file_size;
} load_bench_t;

enum { LOAD_READ, LOAD_SKIP_HASHES, LOAD_HASHED };

// A run: read, load skipping hashes, load hashed. The warm-up (the page
// cache holds the file, code paths are hot) reads and loads hashed only.
static int load_measure(void *arg, int run, double *out) {
  load_bench_t *b = arg;
  uint64_t a = time_read(b->path, b->buf, b->file_size);
  uint64_t c = 1;
  if (run >= 0) {
    c = time_first_launch(b->rt, b->dev, b->s, b->path,
                          ACCEL_EXECUTABLE_LOAD_SKIP_HASHES);
  }
  uint64_t h = time_first_launch(b->rt, b->dev, b->s, b->path, 0);
  if (a == 0 || c == 0 || h == 0) {
    if (run < 0) {
      fprintf(stderr, "accel-bench load: warm-up failed\n");
    }
    return 1;
  }
  out[LOAD_READ] = (double)a / 1e6;
  out[LOAD_SKIP_HASHES] = (double)c / 1e6;
  out[LOAD_HASHED] = (double)h / 1e6;
  return 0;
}

static const bench_figure_t k_load_figures[] = {
    {"load_to_first_launch_skip_hashes", "ms", LOAD_SKIP_HASHES,
     "read_whole_file", LOAD_READ, "<= 0.1", BENCH_PAIRED, false},
    {"load_to_first_launch_hashed", "ms", LOAD_HASHED, "read_whole_file",
     LOAD_READ, "<= 1.3", BENCH_PAIRED, false},
};

// Writes the executable for |b|'s device to |b->path|; nonzero on failure.
static int load_prepare(load_bench_t *b, uint64_t weight_bytes) {
  const char *so_path = getenv("ACCEL_HOST_KERNELS");
  if (so_path == NULL || so_path[0] == '\0') {
    so_path = ACCEL_HOST_KERNELS_PATH;
  }
  uint64_t so_size = 0;
  void *so = read_small(so_path, &so_size);
  if (so == NULL) {
    fprintf(stderr,
            "accel-bench load: cannot read the host kernels code object "
            "\"%s\" (set ACCEL_HOST_KERNELS)\n",
            so_path);
    return 1;
  }
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_device_info(b->dev, &info);  // the code target
  accel_status_t st =
      write_executable(b->path, info.target, so, so_size, weight_bytes);
  free(so);
  return check(st, "writing the executable");
}

int accel_bench_load(const bench_args_t *args) {
  uint64_t weight_bytes = args->quick ? (64ull << 20) : (1ull << 30);
  int runs = args->quick ? 3 : 7;
  const char *tmpdir = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof(path), "%s/accel-bench-load-%d.axe",
           tmpdir && tmpdir[0] ? tmpdir : "/tmp", (int)getpid());
  load_bench_t b = {.path = path};
  if (check(accel_runtime_create(NULL, &b.rt), "runtime") ||
      check(accel_device_get(b.rt, 0, &b.dev), "device") ||
      check(accel_stream_create(b.dev, NULL, &b.s), "stream")) {
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "load", b.dev);
  int rc = 1;
  if (load_prepare(&b, weight_bytes)) {
    goto out;
  }
  struct stat sb;
  stat(path, &sb);
  b.file_size = (uint64_t)sb.st_size;
  b.buf = malloc(b.file_size);
  if (b.buf == NULL) {
    fprintf(stderr, "accel-bench load: cannot allocate %llu bytes\n",
            (unsigned long long)b.file_size);
    goto out;
  }
  memset(b.buf, 0, b.file_size);  // fault the read buffer in before timing
  const bench_group_t group = {.runs = runs, .slots = 3,
                               .measure = load_measure, .max_runs = 31,
                               .figures = k_load_figures, .figure_count = 2};
  if (bench_group_run(&report, &group, &b) == 0) {
    bench_add(&report, "weight_bytes", (double)weight_bytes, "bytes", NULL, 0,
              NULL, 1);
    rc = bench_print(&report, args->json);
  }
out:
  free(b.buf);
  unlink(path);
  accel_stream_destroy(b.s);
  accel_runtime_destroy(b.rt);
  return rc;
}
