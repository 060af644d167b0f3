// The driver API test double's CUDA graphs, called directly (linked against
// the double): the documented rules it holds the CUDA backend to
// (lib/drv/cuda/cuda_graph.c) are refused when broken, so that a backend
// that breaks them fails in CI. This checks the double, not NVIDIA's driver.
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "test_support.h"

void cuda_double_inject_fault(CUresult result);

typedef struct fixture {
  CUcontext ctx;
  CUstream s[2];
  _Atomic uint64_t *words;  // pinned, device-mapped: 4 words
  CUdeviceptr words_dev;
  CUdeviceptr mem;  // 2 MiB of device memory, mapped read-write
  CUmemGenericAllocationHandle phys;
} fixture_t;

#define CU_OK(call) assert_int_equal((call), CUDA_SUCCESS)

static int setup(void **state) {
  static fixture_t f;
  CUdevice dev;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&f.ctx, dev) != CUDA_SUCCESS ||
      cuCtxSetCurrent(f.ctx) != CUDA_SUCCESS) {
    return -1;
  }
  void *words = NULL;
  if (cuMemHostAlloc(&words, 4096,
                     CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) !=
          CUDA_SUCCESS ||
      cuMemHostGetDevicePointer(&f.words_dev, words, 0) != CUDA_SUCCESS) {
    return -1;
  }
  f.words = words;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
  CUmemAccessDesc access = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (cuMemAddressReserve(&f.mem, 2u << 20, 0, 0, 0) != CUDA_SUCCESS ||
      cuMemCreate(&f.phys, 2u << 20, &prop, 0) != CUDA_SUCCESS ||
      cuMemMap(f.mem, 2u << 20, 0, f.phys, 0) != CUDA_SUCCESS ||
      cuMemSetAccess(f.mem, 2u << 20, &access, 1) != CUDA_SUCCESS) {
    return -1;
  }
  for (int i = 0; i < 2; ++i) {
    if (cuStreamCreateWithPriority(&f.s[i], CU_STREAM_NON_BLOCKING, 0) !=
        CUDA_SUCCESS) {
      return -1;
    }
  }
  *state = &f;
  return 0;
}

static CUDA_BATCH_MEM_OP_NODE_PARAMS memop(fixture_t *f,
                                           CUstreamBatchMemOpParams *op,
                                           bool wait, int word,
                                           uint64_t value) {
  memset(op, 0, sizeof(*op));
  if (wait) {
    op->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    op->waitValue.address = f->words_dev + 8u * word;
    op->waitValue.value64 = value;
    op->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  } else {
    op->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op->writeValue.address = f->words_dev + 8u * word;
    op->writeValue.value64 = value;
  }
  return (CUDA_BATCH_MEM_OP_NODE_PARAMS){
      .ctx = f->ctx, .count = 1, .paramArray = op};
}

// Dependencies name nodes of the same graph, each once; a node's update
// names a node of the exec's own graph, of the same kind.
static void test_double_graph_refuses_foreign_and_repeated_dependencies(
    void **state) {
  fixture_t *f = *state;
  CUgraph g1, g2;
  CU_OK(cuGraphCreate(&g1, 0));
  CU_OK(cuGraphCreate(&g2, 0));
  assert_int_equal(cuGraphCreate(&g2, 1), CUDA_ERROR_INVALID_VALUE);
  CUstreamBatchMemOpParams op;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp = memop(f, &op, false, 0, 1);
  CUgraphNode a, b, c;
  CU_OK(cuGraphAddBatchMemOpNode(&a, g1, NULL, 0, &bp));
  CU_OK(cuGraphAddBatchMemOpNode(&b, g2, NULL, 0, &bp));
  assert_int_equal(cuGraphAddBatchMemOpNode(&c, g1, &b, 1, &bp),
                   CUDA_ERROR_INVALID_VALUE);
  CUgraphNode twice[2] = {a, a};
  assert_int_equal(cuGraphAddBatchMemOpNode(&c, g1, twice, 2, &bp),
                   CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuGraphAddBatchMemOpNode(&c, g1, &a, 1, &bp));
  CUgraphExec e;
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g1, 1),
                   CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuGraphInstantiateWithFlags(&e, g1, 0));
  assert_int_equal(cuGraphExecBatchMemOpNodeSetParams(e, b, &bp),
                   CUDA_ERROR_INVALID_HANDLE);  // a node of another graph
  CUDA_HOST_NODE_PARAMS hp = {.fn = (CUhostFn)(uintptr_t)1};
  assert_int_equal(cuGraphExecHostNodeSetParams(e, a, &hp),
                   CUDA_ERROR_INVALID_VALUE);  // not a host node
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g1));
  CU_OK(cuGraphDestroy(g2));
  assert_int_equal(cuGraphDestroy(g2), CUDA_ERROR_INVALID_HANDLE);
}

// Executable-graph updates stay within what the driver documents: memset
// and memcpy nodes 1D before and after, batch mem-ops with the same count
// and kinds; allowed updates take effect at the next launch only.
static void test_double_graph_updates_keep_their_documented_limits(
    void **state) {
  fixture_t *f = *state;
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms = {.dst = f->mem, .pitch = 256, .value = 7,
                                .elementSize = 1, .width = 256, .height = 1};
  CUgraphNode set, op_node;
  CU_OK(cuGraphAddMemsetNode(&set, g, NULL, 0, &ms, f->ctx));
  CUstreamBatchMemOpParams op;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp = memop(f, &op, false, 1, 5);
  CU_OK(cuGraphAddBatchMemOpNode(&op_node, g, &set, 1, &bp));
  CUgraphExec e;
  CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
  CUDA_MEMSET_NODE_PARAMS ms2 = ms;
  ms2.height = 2;
  ms2.width = 64;
  assert_int_equal(cuGraphExecMemsetNodeSetParams(e, set, &ms2, f->ctx),
                   CUDA_ERROR_INVALID_VALUE);
  CUDA_BATCH_MEM_OP_NODE_PARAMS wait = memop(f, &op, true, 1, 5);
  assert_int_equal(cuGraphExecBatchMemOpNodeSetParams(e, op_node, &wait),
                   CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuGraphLaunch(e, f->s[0]));
  CUDA_BATCH_MEM_OP_NODE_PARAMS later = memop(f, &op, false, 1, 9);
  CU_OK(cuGraphExecBatchMemOpNodeSetParams(e, op_node, &later));
  CU_OK(cuStreamSynchronize(f->s[0]));
  assert_int_equal(atomic_load(&f->words[1]), 5);
  CU_OK(cuGraphLaunch(e, f->s[0]));
  CU_OK(cuStreamSynchronize(f->s[0]));
  assert_int_equal(atomic_load(&f->words[1]), 9);
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g));
}

typedef struct order_log {
  pthread_mutex_t lock;
  char text[8];
  int n;
} order_log_t;

static order_log_t g_log = {.lock = PTHREAD_MUTEX_INITIALIZER};
static char g_mark[2] = {'A', 'B'};

static void CUDA_CB log_launch(void *arg) {
  pthread_mutex_lock(&g_log.lock);
  g_log.text[g_log.n++] = *(const char *)arg;
  pthread_mutex_unlock(&g_log.lock);
}

// An executable graph does not run concurrently with itself: its second
// launch, on a free stream, runs after its first, which waits for a word
// the host raises later.
static void test_double_graph_exec_runs_after_its_previous_launch(
    void **state) {
  fixture_t *f = *state;
  atomic_store(&f->words[2], 0);
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_HOST_NODE_PARAMS hp = {.fn = log_launch, .userData = &g_mark[0]};
  CUgraphNode host;
  CU_OK(cuGraphAddHostNode(&host, g, NULL, 0, &hp));
  CUgraphExec e;
  CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
  CU_OK(cuStreamWaitValue64(f->s[0], f->words_dev + 16, 1,
                            CU_STREAM_WAIT_VALUE_GEQ));
  CU_OK(cuGraphLaunch(e, f->s[0]));
  hp.userData = &g_mark[1];
  CU_OK(cuGraphExecHostNodeSetParams(e, host, &hp));
  CU_OK(cuGraphLaunch(e, f->s[1]));
  // Give stream 1 time to run ahead if the double let it (the assertion is
  // on the order only).
  struct timespec nap = {.tv_nsec = 20000000};
  nanosleep(&nap, NULL);
  atomic_store(&f->words[2], 1);
  CU_OK(cuStreamSynchronize(f->s[1]));
  CU_OK(cuStreamSynchronize(f->s[0]));
  assert_int_equal(g_log.n, 2);
  assert_memory_equal(g_log.text, "AB", 2);
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g));
}

// A sticky error (a fault injected into a graph's memset) poisons the
// context: the next graph calls return it. Runs last.
static void test_double_graph_calls_report_sticky_errors(void **state) {
  fixture_t *f = *state;
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms = {.dst = f->mem, .pitch = 64, .value = 1,
                                .elementSize = 4, .width = 16, .height = 1};
  CUgraphNode set;
  CU_OK(cuGraphAddMemsetNode(&set, g, NULL, 0, &ms, f->ctx));
  CUgraphExec e;
  CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
  cuda_double_inject_fault(CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_OK(cuGraphLaunch(e, f->s[0]));
  assert_int_equal(cuStreamSynchronize(f->s[0]), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(cuGraphLaunch(e, f->s[0]), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUgraph g2;
  assert_int_equal(cuGraphCreate(&g2, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  // Destroying still frees.
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_double_graph_refuses_foreign_and_repeated_dependencies),
      cmocka_unit_test(test_double_graph_updates_keep_their_documented_limits),
      cmocka_unit_test(test_double_graph_exec_runs_after_its_previous_launch),
      cmocka_unit_test(test_double_graph_calls_report_sticky_errors),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
