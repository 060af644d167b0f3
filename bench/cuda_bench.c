// accel-bench cuda: the CUDA backend against bare driver calls in the same
// run, on the first CUDA device (issue #18's targets):
//
//   launch_sync_empty_kernel   a launch of an empty kernel through the
//                              driver interface plus accel_stream_synchronize,
//                              against cuLaunchKernel + cuStreamSynchronize
//                              on a bare stream: ratio <= 1.1
//   copy_pinned_h2d_1MiB/64MiB accel_stream_copy from pinned host memory plus
//   copy_pinned_d2h_1MiB/64MiB synchronize, against cuMemcpyAsync +
//                              cuStreamSynchronize of the same buffers:
//                              ratio of bandwidths >= 0.95
//   command_buffer_1000_launches  an execute of a command buffer of 1,000
//                              launches of the empty kernel plus synchronize
//                              (a CUDA graph), against cuGraphLaunch of a
//                              bare graph of the same 1,000 kernel nodes +
//                              cuStreamSynchronize: ratio <= 1.1
//
//   matmul_bf16_4096           reference.axe's matmul (tensor cores) on
//                              bf16 4096 x 4096 x 4096, f32 out, 32 x 32
//                              tiles, in TFLOP/s, against cublasGemmEx of the
//                              same shape and types (libcublas by dlopen):
//                              ratio >= 0.5
//   rmsnorm_8192x8192          reference.axe's rmsnorm in GB/s moved
//                              (x and y once, gamma once), against the
//                              device's peak memory bandwidth (memory clock
//                              x bus width x 2 from cuDeviceGetAttribute):
//                              ratio >= 0.6
//   attention_decode_32x4096   reference.axe's attention_decode over 32
//                              sequences of 4,096 positions (32 heads, 8 KV
//                              heads of 128), GB/s moved against the same
//                              peak: ratio >= 0.6
//
// The last three run only on a real GPU with reference.axe built (on the
// double they would time the emulator) and are left out otherwise.
//
// The bare side calls the driver through the backend's own table of entry
// points (the same libcuda, the same context and buffers), so the figures
// compare accel's layers with nothing, on one machine and one run. Without
// a CUDA device the subcommand says why and exits 0 (skipped). Against the
// driver API test double (ACCEL_CUDA_LIBRARY) the figures exercise the code
// but measure no GPU.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/accel.h"
#include "accel_config.h"
#include "bench.h"

static int skipped(const bench_args_t *args, const char *reason) {
  if (args->json) {
    printf("{\"bench\": \"cuda\", \"device\": null, \"results\": [], "
           "\"skipped\": \"");
    for (const char *c = reason; *c != '\0'; ++c) {
      if (*c == '"' || *c == '\\') {
        putchar('\\');
      }
      putchar((unsigned char)*c < 0x20 ? ' ' : *c);
    }
    printf("\"}\n");
  } else {
    printf("accel-bench cuda: skipped: %s\n", reason);
  }
  return 0;
}

#if !ACCEL_HAVE_CUDA

int accel_bench_cuda(const bench_args_t *args) {
  return skipped(args, "accel was built without cuda.h (no CUDA backend)");
}

#else

#include "core/runtime_impl.h"
#include "drv/cuda/cuda_internal.h"
#include "stream/stream_impl.h"

#define MIB (1ull << 20)

// An empty kernel: PTX is forward compatible, so sm_50 code JIT-compiles for
// every GPU the backend supports.
static const char k_empty_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry accel_bench_empty()\n"
    "{\n"
    "  ret;\n"
    "}\n";

typedef struct cuda_bench {
  accel_device_t *dev;
  const accel_cuda_api_t *cu;
  accel_stream_t *stream;
  CUstream bare;
  accel_drv_module_t *module;
  accel_drv_kernel_t *kernel;
  int launches;  // per sample
  // Command buffer figure: the kernel as an accel_kernel_t (an in-memory
  // .axe of the empty PTX), the buffer, and the bare graph.
  accel_executable_t *exe;
  // The .axe image: borrowed by |exe| until its last reference is gone,
  // which the reaper may drop after teardown; freed after the runtime.
  void *exe_image;
  accel_command_buffer_t *cb;
  CUgraph graph;
  CUgraphExec graph_exec;
  // Copies.
  uint64_t size;
  accel_buffer_t *device_buf;
  accel_buffer_t *host_buf;  // pinned
  bool to_host;
} cuda_bench_t;

// The double has no GPU to run PTX: it runs a registered host function.
static void empty_host_kernel(void **params, const unsigned grid[3],
                              const unsigned block[3]) {}

static void register_with_double(void) {
  const char *path = getenv("ACCEL_CUDA_LIBRARY");
  void *lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (lib == NULL) {
    return;
  }
  void (*reg)(const char *, void (*)(void **, const unsigned *,
                                     const unsigned *),
              const size_t *, uint32_t) =
      (void (*)(const char *,
                void (*)(void **, const unsigned *, const unsigned *),
                const size_t *, uint32_t))dlsym(lib,
                                                "cuda_double_register_kernel");
  if (reg != NULL) {
    reg("accel_bench_empty", empty_host_kernel, NULL, 0);
  }
  dlclose(lib);
}

static int check(accel_status_t st, const char *what) {
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench cuda: %s: %s: %s\n", what,
            accel_status_name(st), accel_last_error());
    return 1;
  }
  return 0;
}

static int check_cu(cuda_bench_t *b, CUresult r, const char *what) {
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    b->cu->cuGetErrorName(r, &name);
    fprintf(stderr, "accel-bench cuda: %s: %s\n", what,
            name != NULL ? name : "unknown CUresult");
    return 1;
  }
  return 0;
}

// Launch figure.

static int launch_setup(void *ctx) {
  cuda_bench_t *b = ctx;
  register_with_double();
  const accel_drv_dispatch_ops_t *d = b->dev->driver->dispatch;
  if (check(d->module_load(b->dev->drv, k_empty_ptx, sizeof(k_empty_ptx),
                           &b->module),
            "loading the empty kernel") ||
      check(d->kernel_get(b->module, "accel_bench_empty", &b->kernel),
            "finding the empty kernel")) {
    return 1;
  }
  return 0;
}

static void launch_teardown(void *ctx) {
  cuda_bench_t *b = ctx;
  free(b->kernel);
  b->kernel = NULL;
  if (b->module != NULL) {
    b->dev->driver->dispatch->module_unload(b->module);
    b->module = NULL;
  }
}

// Slot 0: accel, slot 1: bare; each the mean us of |launches| launch+sync.
static int launch_measure(void *ctx, int run, double *out) {
  cuda_bench_t *b = ctx;
  static const accel_drv_launch_t k_launch = {.grid = {1, 1, 1},
                                              .block = {1, 1, 1}};
  const accel_drv_dispatch_ops_t *d = b->dev->driver->dispatch;
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < b->launches; ++i) {
    if (check(d->kernel_launch(b->stream->queue, b->kernel, &k_launch, NULL,
                               NULL, NULL),
              "launch") ||
        check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
              "synchronize")) {
      return 1;
    }
  }
  uint64_t t1 = bench_now_ns();
  for (int i = 0; i < b->launches; ++i) {
    if (check_cu(b, b->cu->cuLaunchKernel(b->kernel->function, 1, 1, 1, 1, 1,
                                          1, 0, b->bare, NULL, NULL),
                 "bare cuLaunchKernel") ||
        check_cu(b, b->cu->cuStreamSynchronize(b->bare),
                 "bare cuStreamSynchronize")) {
      return 1;
    }
  }
  uint64_t t2 = bench_now_ns();
  out[0] = (double)(t1 - t0) / b->launches / 1e3;
  out[1] = (double)(t2 - t1) / b->launches / 1e3;
  return 0;
}

static const bench_figure_t k_launch_figures[] = {
    {.name = "launch_sync_empty_kernel", .unit = "us", .value_slot = 0,
     .baseline_name = "bare_cuLaunchKernel_sync", .baseline_slot = 1,
     .target = "<= 1.1", .pairing = BENCH_PAIRED},
};

// Command buffer figure.

#define CB_LAUNCHES 1000

// Loads the empty kernel through an in-memory .axe for the device's target.
static int cb_load_kernel(cuda_bench_t *b, accel_kernel_t **out_kernel) {
  accel_exe_builder_t *builder = NULL;
  if (check(accel_exe_builder_create(&builder), "exe builder")) {
    return 1;
  }
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k),
                               .name = "accel_bench_empty",
                               .workgroup_size = {1, 1, 1}};
  void *image = NULL;
  uint64_t size = 0;
  accel_status_t st = accel_exe_builder_add_kernel(builder, &k);
  if (st == ACCEL_OK) {
    st = accel_exe_builder_add_code(builder, b->dev->info.target,
                                    ACCEL_CODE_FORMAT_PTX, k_empty_ptx,
                                    sizeof(k_empty_ptx));
  }
  if (st == ACCEL_OK) {
    st = accel_exe_builder_write_memory(builder, &image, &size);
  }
  accel_exe_builder_destroy(builder);
  if (st == ACCEL_OK) {
    st = accel_executable_load_memory(accel_device_runtime(b->dev), b->dev,
                                      image, size, 0, &b->exe);
  }
  if (st == ACCEL_OK) {
    b->exe_image = image;
  } else {
    free(image);
  }
  if (check(st, "loading the empty kernel's .axe")) {
    return 1;
  }
  return check(accel_executable_kernel(b->exe, "accel_bench_empty",
                                       out_kernel),
               "the empty kernel");
}

static int cb_setup(void *ctx) {
  cuda_bench_t *b = ctx;
  if (launch_setup(ctx)) {
    return 1;
  }
  accel_kernel_t *kernel = NULL;
  if (cb_load_kernel(b, &kernel) ||
      check(accel_command_buffer_create(b->dev, NULL, &b->cb),
            "command buffer")) {
    return 1;
  }
  accel_command_buffer_launch_desc_t ld = {.struct_size = sizeof(ld),
                                           .workgroup_count = {1, 1, 1}};
  for (int i = 0; i < CB_LAUNCHES; ++i) {
    if (check(accel_command_buffer_launch(b->cb, kernel, &ld), "record")) {
      return 1;
    }
  }
  if (check(accel_command_buffer_finalize(b->cb), "finalize") ||
      check(accel_cuda_enter(b->dev->drv), "context") ||
      check_cu(b, b->cu->cuGraphCreate(&b->graph, 0), "bare cuGraphCreate")) {
    return 1;
  }
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof(kp));
  kp.func = b->kernel->function;
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
  CUgraphNode prev = NULL;
  for (int i = 0; i < CB_LAUNCHES; ++i) {
    CUgraphNode node = NULL;
    if (check_cu(b, b->cu->cuGraphAddKernelNode(&node, b->graph, &prev,
                                                prev != NULL, &kp),
                 "bare cuGraphAddKernelNode")) {
      return 1;
    }
    prev = node;
  }
  return check_cu(b, b->cu->cuGraphInstantiateWithFlags(&b->graph_exec,
                                                        b->graph, 0),
                  "bare cuGraphInstantiateWithFlags");
}

static void cb_teardown(void *ctx) {
  cuda_bench_t *b = ctx;
  if (accel_cuda_enter(b->dev->drv) == ACCEL_OK) {
    if (b->graph_exec != NULL) {
      (void)b->cu->cuGraphExecDestroy(b->graph_exec);
    }
    if (b->graph != NULL) {
      (void)b->cu->cuGraphDestroy(b->graph);
    }
  }
  b->graph_exec = NULL;
  b->graph = NULL;
  accel_command_buffer_release(b->cb);
  b->cb = NULL;
  accel_executable_release(b->exe);  // the buffer holds its kernel
  b->exe = NULL;
  launch_teardown(ctx);
}

// Slot 0: accel us per execute + sync, slot 1: bare cuGraphLaunch + sync.
static int cb_measure(void *ctx, int run, double *out) {
  cuda_bench_t *b = ctx;
  uint64_t t0 = bench_now_ns();
  if (check(accel_stream_execute(b->stream, b->cb, NULL), "execute") ||
      check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
            "synchronize")) {
    return 1;
  }
  uint64_t t1 = bench_now_ns();
  if (check_cu(b, b->cu->cuGraphLaunch(b->graph_exec, b->bare),
               "bare cuGraphLaunch") ||
      check_cu(b, b->cu->cuStreamSynchronize(b->bare),
               "bare cuStreamSynchronize")) {
    return 1;
  }
  uint64_t t2 = bench_now_ns();
  out[0] = (double)(t1 - t0) / 1e3;
  out[1] = (double)(t2 - t1) / 1e3;
  return 0;
}

static const bench_figure_t k_cb_figures[] = {
    {.name = "command_buffer_1000_launches", .unit = "us", .value_slot = 0,
     .baseline_name = "bare_cuGraphLaunch_1000_nodes", .baseline_slot = 1,
     .target = "<= 1.1", .pairing = BENCH_PAIRED},
};

// GPU kernel figures (a real device and reference.axe only).

#if ACCEL_BENCH_HAVE_KERNELS

#include "attention_params.h"
#include "kernel_params.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif

// The cuBLAS entry points and constants used (cublas_api.h, library_types.h),
// resolved by dlopen so that accel neither links nor needs libcublas.
enum {
  BENCH_CUBLAS_OP_N = 0,
  BENCH_CUDA_R_32F = 0,
  BENCH_CUDA_R_16BF = 14,
  BENCH_CUBLAS_COMPUTE_32F = 68,
  BENCH_CUBLAS_GEMM_DEFAULT = -1,
};
typedef int (*cublas_create_fn)(void **handle);
typedef int (*cublas_destroy_fn)(void *handle);
typedef int (*cublas_set_stream_fn)(void *handle, CUstream stream);
typedef int (*cublas_gemm_ex_fn)(void *handle, int transa, int transb, int m,
                                 int n, int k, const void *alpha,
                                 const void *a, int a_type, int lda,
                                 const void *b, int b_type, int ldb,
                                 const void *beta, void *c, int c_type,
                                 int ldc, int compute, int algo);

#define GEMM_N 4096u
#define NORM_ROWS 8192u
#define NORM_COLS 8192u
// Decode attention: 32 sequences of 4,096 positions, 32 query heads over 8
// KV heads of 128 (a Llama-3-8B layer's shape): K and V are 512 MiB each.
#define DEC_SEQS 32u
#define DEC_LEN 4096u
#define DEC_HEADS 32u
#define DEC_KV_HEADS 8u
#define DEC_HD 128u

typedef struct gpu_bench {
  cuda_bench_t *b;
  accel_executable_t *exe;
  accel_kernel_t *matmul, *rmsnorm, *decode;
  accel_buffer_t *a, *bm, *bias, *c, *x, *gamma, *y;
  accel_buffer_t *q, *kc, *vc, *lens, *out;
  void *cublas_lib, *cublas;
  cublas_gemm_ex_fn gemm;
  cublas_destroy_fn destroy;
  double peak_gbps;
} gpu_bench_t;

// Peak memory bandwidth in GB/s from the driver's attributes: the memory
// clock (kHz) times the bus width (bits) over 8, twice per clock (DDR).
static double peak_gbps(int memory_clock_khz, int bus_width_bits) {
  return 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
}

// A device buffer of |bytes| filled with the 4-byte |pattern| (0x3c003c00:
// bf16 0.0078, f32 0.0078).
static accel_buffer_t *gpu_buffer_of(gpu_bench_t *g, uint64_t bytes,
                                     uint32_t pattern) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = bytes};
  accel_buffer_t *buf = NULL;
  if (check(accel_buffer_alloc(g->b->dev, &d, &buf), "gpu buffer") ||
      check(accel_stream_fill(g->b->stream, buf, 0, bytes, pattern, 4),
            "gpu buffer fill")) {
    accel_buffer_release(buf);
    return NULL;
  }
  return buf;
}

static accel_buffer_t *gpu_buffer(gpu_bench_t *g, uint64_t bytes) {
  return gpu_buffer_of(g, bytes, 0x3c003c00u);
}

static int gpu_setup(void *ctx) {
  gpu_bench_t *g = ctx;
  const char *path = getenv("ACCEL_REFERENCE_AXE");
  if (path == NULL || path[0] == '\0') path = ACCEL_REFERENCE_AXE_PATH;
  if (check(accel_executable_load_file(accel_device_runtime(g->b->dev),
                                       g->b->dev, path, 0, &g->exe),
            "reference.axe on the CUDA device") ||
      check(accel_executable_kernel(g->exe, "matmul", &g->matmul), "matmul") ||
      check(accel_executable_kernel(g->exe, "rmsnorm", &g->rmsnorm),
            "rmsnorm") ||
      check(accel_executable_kernel(g->exe, "attention_decode", &g->decode),
            "attention_decode")) {
    return 1;
  }
  uint64_t kv = 4ull * DEC_SEQS * DEC_LEN * DEC_KV_HEADS * DEC_HD;
  uint64_t qb = 4ull * DEC_SEQS * DEC_HEADS * DEC_HD;
  g->q = gpu_buffer(g, qb);
  g->kc = gpu_buffer(g, kv);
  g->vc = gpu_buffer(g, kv);
  g->lens = gpu_buffer_of(g, 4ull * DEC_SEQS, DEC_LEN);  // every context full
  g->out = gpu_buffer(g, qb);
  if (g->q == NULL || g->kc == NULL || g->vc == NULL || g->lens == NULL ||
      g->out == NULL) {
    return 1;
  }
  uint64_t mm = (uint64_t)GEMM_N * GEMM_N, nn = (uint64_t)NORM_ROWS * NORM_COLS;
  g->a = gpu_buffer(g, 2 * mm);
  g->bm = gpu_buffer(g, 2 * mm);
  g->bias = gpu_buffer(g, 4 * GEMM_N);
  g->c = gpu_buffer(g, 4 * mm);
  g->x = gpu_buffer(g, 4 * nn);
  g->gamma = gpu_buffer(g, 4 * NORM_COLS);
  g->y = gpu_buffer(g, 4 * nn);
  if (g->a == NULL || g->bm == NULL || g->bias == NULL || g->c == NULL ||
      g->x == NULL || g->gamma == NULL || g->y == NULL) {
    return 1;
  }
  int clock_khz = 0, bus_bits = 0;
  if (check(accel_cuda_enter(g->b->dev->drv), "context") ||
      check_cu(g->b, g->b->cu->cuDeviceGetAttribute(
                         &clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
                         g->b->dev->drv->dev),
               "memory clock") ||
      check_cu(g->b, g->b->cu->cuDeviceGetAttribute(
                         &bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
                         g->b->dev->drv->dev),
               "memory bus width")) {
    return 1;
  }
  g->peak_gbps = peak_gbps(clock_khz, bus_bits);
  static const char *const k_names[] = {"libcublas.so.13", "libcublas.so.12",
                                        "libcublas.so"};
  for (size_t i = 0; i < 3 && g->cublas_lib == NULL; ++i) {
    g->cublas_lib = dlopen(k_names[i], RTLD_NOW | RTLD_LOCAL);
  }
  cublas_create_fn create =
      g->cublas_lib ? (cublas_create_fn)dlsym(g->cublas_lib, "cublasCreate_v2")
                    : NULL;
  cublas_set_stream_fn set_stream =
      g->cublas_lib
          ? (cublas_set_stream_fn)dlsym(g->cublas_lib, "cublasSetStream_v2")
          : NULL;
  g->gemm = g->cublas_lib
                ? (cublas_gemm_ex_fn)dlsym(g->cublas_lib, "cublasGemmEx")
                : NULL;
  g->destroy = g->cublas_lib ? (cublas_destroy_fn)dlsym(g->cublas_lib,
                                                        "cublasDestroy_v2")
                             : NULL;
  if (create == NULL || set_stream == NULL || g->gemm == NULL ||
      g->destroy == NULL || create(&g->cublas) != 0 ||
      set_stream(g->cublas, g->b->bare) != 0) {
    fprintf(stderr, "accel-bench cuda: no usable libcublas (dlopen of "
            "libcublas.so.13/.12/.so)\n");
    return 1;
  }
  return check(accel_stream_synchronize(g->b->stream, ACCEL_TIMEOUT_INFINITE),
               "gpu buffers");
}

static void gpu_teardown(void *ctx) {
  gpu_bench_t *g = ctx;
  if (g->cublas != NULL) {
    g->destroy(g->cublas);
  }
  if (g->cublas_lib != NULL) {
    dlclose(g->cublas_lib);
  }
  accel_buffer_t *bufs[] = {g->a,  g->bm, g->bias, g->c,   g->x,  g->gamma,
                            g->y,  g->q,  g->kc,   g->vc,  g->lens, g->out};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) {
    accel_buffer_release(bufs[i]);
  }
  accel_executable_release(g->exe);
}

// Decode attention's GB/s: K and V read once, q, lengths and out.
static int decode_measure(gpu_bench_t *g, double *out_gbps) {
  accel_kp_attn_decode_constants_t dc = {
      .num_seqs = DEC_SEQS, .max_len = DEC_LEN, .n_heads = DEC_HEADS,
      .n_kv_heads = DEC_KV_HEADS, .head_dim = DEC_HD,
      .scale = 0.08838834764831845f};  // 1 / sqrt(128)
  accel_launch_binding_t db[5] = {{.buffer = g->q}, {.buffer = g->kc},
                                  {.buffer = g->vc}, {.buffer = g->lens},
                                  {.buffer = g->out}};
  accel_launch_desc_t dd = {.struct_size = sizeof(dd),
                            .workgroup_count = {DEC_SEQS * DEC_KV_HEADS, 1, 1},
                            .binding_count = 5, .bindings = db,
                            .constants_size = sizeof(dc), .constants = &dc};
  uint64_t t0 = bench_now_ns();
  if (check(accel_launch(g->b->stream, g->decode, &dd), "attention_decode") ||
      check(accel_stream_synchronize(g->b->stream, ACCEL_TIMEOUT_INFINITE),
            "attention_decode synchronize")) {
    return 1;
  }
  uint64_t t1 = bench_now_ns();
  double moved = 2.0 * 4.0 * DEC_SEQS * DEC_LEN * DEC_KV_HEADS * DEC_HD +
                 2.0 * 4.0 * DEC_SEQS * DEC_HEADS * DEC_HD + 4.0 * DEC_SEQS;
  *out_gbps = moved / (double)(t1 - t0);
  return 0;
}

// Slots: 0 accel matmul TFLOP/s, 1 cuBLAS TFLOP/s, 2 rmsnorm GB/s, 3 peak,
// 4 decode attention GB/s.
static int gpu_measure(void *ctx, int run, double *out) {
  gpu_bench_t *g = ctx;
  cuda_bench_t *b = g->b;
  accel_kp_matmul_constants_t mc = {.m = GEMM_N, .n = GEMM_N, .k = GEMM_N,
                                    .dtype_a = ACCEL_KP_DTYPE_BF16,
                                    .dtype_b = ACCEL_KP_DTYPE_BF16,
                                    .tile_m = 32, .tile_n = 32};
  accel_launch_binding_t mb[4] = {{.buffer = g->a}, {.buffer = g->bm},
                                  {.buffer = g->bias}, {.buffer = g->c}};
  uint64_t units = accel_kp_matmul_units(&mc);
  accel_launch_desc_t md = {.struct_size = sizeof(md),
                            .workgroup_count = {(uint32_t)units, 1, 1},
                            .binding_count = 4, .bindings = mb,
                            .constants_size = sizeof(mc), .constants = &mc};
  double flops = 2.0 * GEMM_N * GEMM_N * GEMM_N;
  uint64_t t0 = bench_now_ns();
  if (check(accel_launch(b->stream, g->matmul, &md), "matmul") ||
      check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
            "matmul synchronize")) {
    return 1;
  }
  uint64_t t1 = bench_now_ns();
  // Row-major C = A B is column-major C^T = B^T A^T.
  static const float k_one = 1.0f, k_zero = 0.0f;
  if (g->gemm(g->cublas, BENCH_CUBLAS_OP_N, BENCH_CUBLAS_OP_N, GEMM_N, GEMM_N,
              GEMM_N, &k_one,
              (const void *)(uintptr_t)accel_buffer_address(g->bm),
              BENCH_CUDA_R_16BF, GEMM_N,
              (const void *)(uintptr_t)accel_buffer_address(g->a),
              BENCH_CUDA_R_16BF, GEMM_N, &k_zero,
              (void *)(uintptr_t)accel_buffer_address(g->c), BENCH_CUDA_R_32F,
              GEMM_N, BENCH_CUBLAS_COMPUTE_32F,
              BENCH_CUBLAS_GEMM_DEFAULT) != 0 ||
      check_cu(b, b->cu->cuStreamSynchronize(b->bare), "cublasGemmEx sync")) {
    fprintf(stderr, "accel-bench cuda: cublasGemmEx failed\n");
    return 1;
  }
  uint64_t t2 = bench_now_ns();
  accel_kp_norm_constants_t nc = {.rows = NORM_ROWS, .cols = NORM_COLS,
                                  .eps = 1e-5f};
  accel_launch_binding_t nb[3] = {{.buffer = g->x}, {.buffer = g->gamma},
                                  {.buffer = g->y}};
  accel_launch_desc_t nd = {.struct_size = sizeof(nd),
                            .workgroup_count = {NORM_ROWS / 8u, 1, 1},
                            .binding_count = 3, .bindings = nb,
                            .constants_size = sizeof(nc), .constants = &nc};
  uint64_t t3 = bench_now_ns();
  if (check(accel_launch(b->stream, g->rmsnorm, &nd), "rmsnorm") ||
      check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
            "rmsnorm synchronize")) {
    return 1;
  }
  uint64_t t4 = bench_now_ns();
  double moved = 2.0 * 4.0 * NORM_ROWS * NORM_COLS + 4.0 * NORM_COLS;
  out[0] = flops / (double)(t1 - t0) / 1e3;  // flop/ns / 1e3 = TFLOP/s
  out[1] = flops / (double)(t2 - t1) / 1e3;
  out[2] = moved / (double)(t4 - t3);  // bytes/ns = GB/s
  out[3] = g->peak_gbps;
  return decode_measure(g, &out[4]);
}

static const bench_figure_t k_gpu_figures[] = {
    {.name = "matmul_bf16_4096", .unit = "TFLOP/s", .value_slot = 0,
     .baseline_name = "cublasGemmEx_bf16_4096", .baseline_slot = 1,
     .target = ">= 0.5", .pairing = BENCH_PAIRED},
    {.name = "rmsnorm_8192x8192", .unit = "GB/s", .value_slot = 2,
     .baseline_name = "device_peak_bandwidth", .baseline_slot = 3,
     .target = ">= 0.6", .pairing = BENCH_PAIRED},
    {.name = "attention_decode_32x4096", .unit = "GB/s", .value_slot = 4,
     .baseline_name = "device_peak_bandwidth", .baseline_slot = 3,
     .target = ">= 0.6", .pairing = BENCH_PAIRED},
};

// Whether the GPU kernel figures can mean anything here: not on the driver
// API test double (its launches run the emulator on the CPU).
// Says on stderr why they are left out otherwise (the other figures run).
static bool gpu_figures_apply(void) {
  bool on_double = false;
  const char *path = getenv("ACCEL_CUDA_LIBRARY");
  void *lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (lib != NULL) {
    on_double = dlsym(lib, "cuda_double_register_kernel") != NULL;
    dlclose(lib);
  }
  const char *axe = getenv("ACCEL_REFERENCE_AXE");
  if (axe == NULL || axe[0] == '\0') axe = ACCEL_REFERENCE_AXE_PATH;
  void *cublas = NULL;
  static const char *const k_names[] = {"libcublas.so.13", "libcublas.so.12",
                                        "libcublas.so"};
  for (size_t i = 0; i < 3 && cublas == NULL && !on_double; ++i) {
    cublas = dlopen(k_names[i], RTLD_NOW | RTLD_LOCAL);
  }
  const char *why = on_double ? "the driver API test double runs no GPU"
                    : access(axe, R_OK) != 0 ? "no reference.axe (set "
                                               "ACCEL_REFERENCE_AXE)"
                    : cublas == NULL ? "no libcublas to compare with"
                                     : NULL;
  if (cublas != NULL) {
    dlclose(cublas);
  }
  if (why != NULL) {
    fprintf(stderr, "accel-bench cuda: matmul_bf16_4096, rmsnorm_8192x8192 "
            "and attention_decode_32x4096 left out: %s\n", why);
  }
  return why == NULL;
}

#endif  // ACCEL_BENCH_HAVE_KERNELS

// Copy figures.

static int copy_setup(void *ctx) {
  cuda_bench_t *b = ctx;
  accel_buffer_desc_t dd = {.struct_size = sizeof(dd), .size_bytes = b->size};
  accel_buffer_desc_t hd = {.struct_size = sizeof(hd), .size_bytes = b->size,
                            .kind = ACCEL_MEMORY_KIND_HOST_PINNED};
  return check(accel_buffer_alloc(b->dev, &dd, &b->device_buf),
               "device buffer") ||
         check(accel_buffer_alloc(b->dev, &hd, &b->host_buf),
               "pinned host buffer");
}

static void copy_teardown(void *ctx) {
  cuda_bench_t *b = ctx;
  accel_buffer_release(b->device_buf);
  accel_buffer_release(b->host_buf);
  b->device_buf = b->host_buf = NULL;
}

// Slot 0: accel GB/s, slot 1: bare GB/s.
static int copy_measure(void *ctx, int run, double *out) {
  cuda_bench_t *b = ctx;
  accel_buffer_t *dst = b->to_host ? b->host_buf : b->device_buf;
  accel_buffer_t *src = b->to_host ? b->device_buf : b->host_buf;
  uint64_t t0 = bench_now_ns();
  if (check(accel_stream_copy(b->stream, dst, 0, src, 0, b->size), "copy") ||
      check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
            "synchronize")) {
    return 1;
  }
  uint64_t t1 = bench_now_ns();
  if (check_cu(b, b->cu->cuMemcpyAsync(accel_buffer_address(dst),
                                       accel_buffer_address(src), b->size,
                                       b->bare),
               "bare cuMemcpyAsync") ||
      check_cu(b, b->cu->cuStreamSynchronize(b->bare),
               "bare cuStreamSynchronize")) {
    return 1;
  }
  uint64_t t2 = bench_now_ns();
  out[0] = (double)b->size / (double)(t1 - t0);  // bytes per ns = GB/s
  out[1] = (double)b->size / (double)(t2 - t1);
  return 0;
}

// The first CUDA device of |rt|, or NULL.
static accel_device_t *first_cuda_device(accel_runtime_t *rt) {
  uint32_t n = 0;
  accel_device_count(rt, &n);
  for (uint32_t i = 0; i < n; ++i) {
    accel_device_t *dev = NULL;
    accel_device_get(rt, i, &dev);
    if (dev != NULL && dev->driver == &accel_cuda_driver) {
      return dev;
    }
  }
  return NULL;
}

int accel_bench_cuda(const bench_args_t *args) {
  accel_runtime_t *rt = NULL;
  if (check(accel_runtime_create(NULL, &rt), "runtime")) {
    return 1;
  }
  cuda_bench_t b = {.dev = first_cuda_device(rt),
                    .launches = args->quick ? 20 : 200};
  if (b.dev == NULL) {
    const char *reason = NULL;
    if (accel_runtime_backend_status(rt, "cuda", &reason) != ACCEL_OK ||
        reason[0] == '\0') {
      reason = "no CUDA device is visible (ACCEL_VISIBLE_DEVICES)";
    }
    int rc = skipped(args, reason);
    accel_runtime_destroy(rt);
    return rc;
  }
  b.cu = b.dev->drv->cu;
  int failed = check(accel_stream_create(b.dev, NULL, &b.stream), "stream");
  if (!failed) {
    failed = check(accel_cuda_enter(b.dev->drv), "context") ||
             check_cu(&b,
                      b.cu->cuStreamCreateWithPriority(
                          &b.bare, CU_STREAM_NON_BLOCKING, 0),
                      "bare stream");
  }
  bench_report_t report;
  bench_report_init(&report, "cuda", b.dev);
  int runs = args->quick ? 3 : 15;
  if (!failed) {
    const bench_group_t launch = {
        .runs = runs, .slots = 2, .setup = launch_setup,
        .measure = launch_measure, .teardown = launch_teardown,
        .figures = k_launch_figures, .figure_count = 1};
    failed = bench_group_run(&report, &launch, &b);
  }
  if (!failed) {
    const bench_group_t cb = {
        .runs = runs, .slots = 2, .setup = cb_setup, .measure = cb_measure,
        .teardown = cb_teardown, .figures = k_cb_figures, .figure_count = 1};
    failed = bench_group_run(&report, &cb, &b);
  }
#if ACCEL_BENCH_HAVE_KERNELS
  if (!failed && gpu_figures_apply()) {
    gpu_bench_t g = {.b = &b};
    const bench_group_t gpu = {
        .runs = args->quick ? 3 : 9, .slots = 5, .setup = gpu_setup,
        .measure = gpu_measure, .teardown = gpu_teardown,
        .figures = k_gpu_figures, .figure_count = 3};
    failed = bench_group_run(&report, &gpu, &g);
  }
#endif
  static const struct {
    const char *name;
    uint64_t size;
    bool to_host;
  } k_copies[] = {
      {"copy_pinned_h2d_1MiB", MIB, false},
      {"copy_pinned_d2h_1MiB", MIB, true},
      {"copy_pinned_h2d_64MiB", 64 * MIB, false},
      {"copy_pinned_d2h_64MiB", 64 * MIB, true},
  };
  for (size_t i = 0; i < sizeof(k_copies) / sizeof(k_copies[0]) && !failed;
       ++i) {
    b.size = k_copies[i].size;
    b.to_host = k_copies[i].to_host;
    const bench_figure_t figure = {
        .name = k_copies[i].name, .unit = "GB/s", .value_slot = 0,
        .baseline_name = k_copies[i].to_host ? "bare_cuMemcpyAsync_d2h"
                                             : "bare_cuMemcpyAsync_h2d",
        .baseline_slot = 1, .target = ">= 0.95", .pairing = BENCH_PAIRED};
    const bench_group_t copy = {
        .runs = runs, .slots = 2, .setup = copy_setup,
        .measure = copy_measure, .teardown = copy_teardown,
        .figures = &figure, .figure_count = 1};
    failed = bench_group_run(&report, &copy, &b);
  }
  if (b.bare != NULL) {
    (void)accel_cuda_enter(b.dev->drv);
    (void)b.cu->cuStreamDestroy(b.bare);
  }
  accel_stream_destroy(b.stream);
  accel_runtime_destroy(rt);
  free(b.exe_image);
  return failed ? 1 : bench_print(&report, args->json);
}

#endif  // ACCEL_HAVE_CUDA
