// Command buffers on CUDA graphs (docs/driver-interface.md, "Mapping onto
// CUDA graphs"; docs/cuda-backend.md, "Command buffers"). recording_create
// copies the commands; the first EXECUTE of a range [first, first + count)
// builds its CUgraph, one node (or two) per command in a chain, each node
// depending on the one before (stream order):
//
//   HOST_CALL  host node: a trampoline that calls fn(user_data) and, on
//              failure, fails the queue naming the buffer's command
//   FILL       memset node (1, 2 or 4-byte patterns); an 8-byte pattern
//              whose halves differ is a 1D memcpy node from a pinned host
//              buffer holding the pattern (a 2D memset node could not take
//              a new address per execute)
//   COPY       1D memcpy node (host sides as host memory)
//   SIGNAL     batch mem-op node WRITE_VALUE_64 of the semaphore's word
//              (without stream memory operations: a host node), after a
//              host node that stores the timestamp of an event record
//   WAIT       batch mem-op node WAIT_VALUE_64 (GEQ), then a host node that
//              fails the queue if the semaphore failed instead (without
//              stream memory operations: one host node that waits)
//   LAUNCH     kernel node of a device kernel (ACCEL_CMD_LAUNCH_DEVICE)
//
// and a last node that records the launch's end in a pinned word of its
// CUgraphExec. Patches become node updates: each execute computes every
// command's patched words (and each device launch's parameters) and updates
// only the nodes whose values differ from what that CUgraphExec last had
// (cuGraphExec*NodeSetParams); a buffer executed with the same binding table
// updates nothing but its host nodes, whose user data is the execute's
// context. The kernels read their bindings as parameters, so the doc's
// preferred scheme (one copy of the bases into a buffer the kernels read)
// would need an indirect-binding kernel ABI: not done.
//
// A CUgraphExec does not run concurrently with itself: each range keeps a
// pool of up to GRAPH_POOL_MAX, and an execute takes one that last ran on
// its own queue (stream order serializes them anyway) or whose last launch
// has ended, instantiating another while the pool is not full.
//
// Failure: a host node that fails (a HOST_CALL, or a WAIT whose semaphore
// failed) fails the queue at the EXECUTE's seq with "command buffer "NAME"
// command #I (KIND) failed: WHY", and fails the execute's SIGNALs after
// command I; the host nodes after it are skipped. Device nodes already
// launched still run (as on the queue: CUDA cannot take them back).
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lock.h"
#include "drv/cuda/cuda_internal.h"

// CUgraphExecs per range: one per concurrent execute of a reentrant buffer.
#define GRAPH_POOL_MAX 4u

// The parameters of the kernel ABI's CUDA layout, at most this many (as
// cuda_module.c).
#define GRAPH_MAX_PARAMS 259u

#define NO_SLOT UINT32_MAX

typedef enum host_role {
  ROLE_HOST_CALL,  // fn(user_data)
  ROLE_TIMESTAMP,  // store the device time of an event record
  ROLE_SIGNAL,     // raise the semaphore (no stream memory operations)
  ROLE_WAIT_CHECK, // after a device wait: fail if the semaphore failed
  ROLE_WAIT,       // wait on the host (no stream memory operations)
  ROLE_DONE,       // the launch ended (no stream memory operations)
} host_role_t;

typedef struct graph_ctx graph_ctx_t;

// What one host node of one execute does (its user data).
typedef struct host_slot {
  graph_ctx_t *ctx;
  uint32_t command;  // index in the recording
  uint32_t role;     // host_role_t
  accel_host_fn_t fn;
  void *user_data;
  accel_drv_semaphore_t *semaphore;
  uint64_t value;
  _Atomic uint64_t *word;  // timestamp slot, or the done word
} host_slot_t;

// One execute's context: held by the EXECUTE's pending entry until the
// stream passed it, so that its host nodes may read it.
struct graph_ctx {
  accel_object_t object;  // first
  accel_drv_queue_t *queue;
  const accel_drv_recording_t *recording;
  uint64_t seq;
  uint32_t signal_count;
  struct {
    uint32_t command;
    accel_drv_semaphore_t *semaphore;
  } *signals;
  host_slot_t slots[];
};

// The nodes of one recorded command in a range's graph.
typedef struct cmd_nodes {
  CUgraphNode before;  // SIGNAL: the timestamp host node, or NULL
  CUgraphNode main;
  CUgraphNode after;   // WAIT: the check host node, or NULL
  uint32_t host_before, host_main, host_after;  // host slots, or NO_SLOT
} cmd_nodes_t;

typedef struct graph_exec {
  CUgraphExec exec;
  uint32_t index;  // in the range's pool: its done word
  uint64_t launches;  // launches so far (the range's lock)
  const accel_drv_queue_t *last_queue;  // compared only, never dereferenced
  bool claimed;  // the range's lock: an execute is updating or launching it
  // Per command of the range: the words its nodes last had, and a device
  // launch's parameter bytes (launch_blob).
  uint64_t (*words)[4];
  uint8_t **blobs;
  uint8_t *scratch;  // blob_max bytes (the claimer's)
} graph_exec_t;

typedef struct graph_range {
  struct graph_range *next;
  uint32_t first, count;
  CUgraph graph;
  cmd_nodes_t *nodes;  // count entries
  CUgraphNode done;
  uint32_t done_slot;  // host slot of the done node, or NO_SLOT
  uint32_t host_count;
  host_slot_t *host;   // the slots' fixed part (command, role)
  // Pinned, device-mapped words, one per pool entry: the number of its
  // launches that ended.
  _Atomic uint64_t *done_words;
  CUdeviceptr done_device;
  // The graph's values as built, which a new CUgraphExec starts from.
  uint64_t (*words)[4];
  uint8_t **blobs;
  size_t blob_max;
  uint32_t exec_count;
  graph_exec_t execs[GRAPH_POOL_MAX];
} graph_range_t;

struct accel_drv_recording {
  accel_drv_device_t *device;
  char name[64];
  uint32_t command_count;
  accel_cmd_t *commands;  // launch payloads point at |launches| copies
  accel_drv_patch_t *patches;
  uint32_t *patch_starts;  // command_count + 1
  accel_drv_recorded_launch_t **launches;  // per command, or NULL
  void **patterns;  // per command: pinned 8-byte pattern buffer, or NULL
  pthread_mutex_t lock;  // guards |ranges| and the pools' claims
  graph_range_t *ranges;
};

static const accel_cuda_api_t *api_of(const accel_drv_recording_t *r) {
  return r->device->cu;
}

// ---- the values of a command in one execute ---------------------------------

// Command |i| of |r| with its patched words filled from |bases|.
static accel_cmd_t patched(const accel_drv_recording_t *r, uint32_t i,
                           const uint64_t *bases) {
  accel_cmd_t c = r->commands[i];
  uint64_t *words = (uint64_t *)&c;
  for (uint32_t p = r->patch_starts[i]; p < r->patch_starts[i + 1]; ++p) {
    words[r->patches[p].word] =
        bases[r->patches[p].base] + r->patches[p].offset;
  }
  return c;
}

static void words_of(const accel_cmd_t *c, uint64_t out[4]) {
  memcpy(out, (const uint64_t *)c + 2, 4 * sizeof(uint64_t));
}

static CUDA_MEMSET_NODE_PARAMS memset_params(const accel_cmd_t *c) {
  uint64_t v = c->fill.pattern;
  uint32_t elem = accel_cuda_fill_narrow(&v, c->fill.pattern_size);
  return (CUDA_MEMSET_NODE_PARAMS){.dst = c->fill.dst,
                                   .pitch = c->fill.size_bytes,
                                   .value = (unsigned int)v,
                                   .elementSize = elem,
                                   .width = c->fill.size_bytes / elem,
                                   .height = 1};
}

static CUDA_MEMCPY3D copy_1d(CUmemorytype dst_type, uint64_t dst,
                             CUmemorytype src_type, uint64_t src,
                             uint64_t size) {
  CUDA_MEMCPY3D m;
  memset(&m, 0, sizeof(m));
  m.srcMemoryType = src_type;
  if (src_type == CU_MEMORYTYPE_HOST) {
    m.srcHost = (const void *)(uintptr_t)src;
  } else {
    m.srcDevice = src;
  }
  m.dstMemoryType = dst_type;
  if (dst_type == CU_MEMORYTYPE_HOST) {
    m.dstHost = (void *)(uintptr_t)dst;
  } else {
    m.dstDevice = dst;
  }
  m.srcPitch = m.dstPitch = size;
  m.srcHeight = m.dstHeight = 1;
  m.WidthInBytes = size;
  m.Height = 1;
  m.Depth = 1;
  return m;
}

// The memcpy node of a COPY, or of an 8-byte FILL from its pattern buffer.
static CUDA_MEMCPY3D memcpy_params(const accel_drv_recording_t *r, uint32_t i,
                                   const accel_cmd_t *c) {
  if (c->kind == ACCEL_CMD_FILL) {
    return copy_1d(CU_MEMORYTYPE_DEVICE, c->fill.dst, CU_MEMORYTYPE_HOST,
                   (uint64_t)(uintptr_t)r->patterns[i], c->fill.size_bytes);
  }
  return copy_1d(c->flags == ACCEL_COPY_DEVICE_TO_HOST ? CU_MEMORYTYPE_HOST
                                                       : CU_MEMORYTYPE_DEVICE,
                 c->copy.dst,
                 c->flags == ACCEL_COPY_HOST_TO_DEVICE ? CU_MEMORYTYPE_HOST
                                                       : CU_MEMORYTYPE_DEVICE,
                 c->copy.src, c->copy.size_bytes);
}

// A graph's memcpy node must not overlap itself (cuMemcpy has no memmove
// semantics); the queue splits such copies, a node cannot change shape per
// execute.
static accel_status_t check_copy(const accel_drv_recording_t *r, uint32_t i,
                                 const accel_cmd_t *c) {
  uint64_t d = c->copy.dst, s = c->copy.src, n = c->copy.size_bytes;
  if (c->kind == ACCEL_CMD_COPY && c->flags == ACCEL_COPY_DEVICE_TO_DEVICE &&
      d < s + n && s < d + n) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "command buffer \"%s\" command #%u (copy): %llu bytes "
                       "from 0x%llx to 0x%llx overlap, which a CUDA graph's "
                       "memcpy node cannot copy",
                       r->name, i, (unsigned long long)n,
                       (unsigned long long)s, (unsigned long long)d);
  }
  return ACCEL_OK;
}

// One 64-bit stream memory operation: a wait (GEQ) or a write of |value| at
// |address|, as the queue's cuStreamWaitValue64 / cuStreamWriteValue64.
static CUDA_BATCH_MEM_OP_NODE_PARAMS memop(const accel_drv_device_t *d,
                                           CUstreamBatchMemOpParams *op,
                                           bool wait, CUdeviceptr address,
                                           uint64_t value) {
  memset(op, 0, sizeof(*op));
  if (wait) {
    op->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    op->waitValue.address = address;
    op->waitValue.value64 = value;
    op->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  } else {
    op->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op->writeValue.address = address;
    op->writeValue.value64 = value;
    op->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  return (CUDA_BATCH_MEM_OP_NODE_PARAMS){
      .ctx = d->ctx, .count = 1, .paramArray = op, .flags = 0};
}

// Adds a mem-op node (memop) after |*prev| and makes it |*prev|.
static CUresult add_memop(const accel_drv_device_t *d, CUgraph graph,
                          CUgraphNode *prev, CUgraphNode *out, bool wait,
                          CUdeviceptr address, uint64_t value) {
  CUstreamBatchMemOpParams op;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp = memop(d, &op, wait, address, value);
  CUresult res =
      d->cu->cuGraphAddBatchMemOpNode(out, graph, prev, *prev != NULL, &bp);
  if (res == CUDA_SUCCESS) {
    *prev = *out;
  }
  return res;
}

// Sets a mem-op node of |exec| to a new address and value.
static CUresult set_memop(const accel_drv_device_t *d, CUgraphExec exec,
                          CUgraphNode node, bool wait, CUdeviceptr address,
                          uint64_t value) {
  CUstreamBatchMemOpParams op;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp = memop(d, &op, wait, address, value);
  return d->cu->cuGraphExecBatchMemOpNodeSetParams(exec, node, &bp);
}

// Bytes of a device launch's parameter values (launch_blob).
static size_t blob_size(const accel_drv_recorded_launch_t *l) {
  return 16u * l->binding_count + 16u + l->constants_size;
}

// Lays out the kernel ABI's parameter values of |l| for |bases| in |blob|
// (addresses, lengths, workspace, constants) and points |params| at them;
// returns the parameter count.
static uint32_t launch_blob(const accel_drv_recorded_launch_t *l,
                            const uint64_t *bases, uint8_t *blob,
                            void **params) {
  uint32_t n = l->binding_count, p = 0;
  uint64_t *addresses = (uint64_t *)blob, *lengths = addresses + n;
  for (uint32_t i = 0; i < n; ++i) {
    const accel_drv_recorded_binding_t *b = &l->bindings[i];
    addresses[i] = b->address + (b->address_base != ACCEL_DRV_BASE_NONE
                                     ? bases[b->address_base]
                                     : 0);
    lengths[i] = b->length_base != ACCEL_DRV_BASE_NONE
                     ? bases[b->length_base] - b->address
                     : b->length;
    params[p++] = &addresses[i];
  }
  for (uint32_t i = 0; i < n; ++i) {
    params[p++] = &lengths[i];
  }
  uint64_t *workspace = lengths + n;
  workspace[0] = l->workspace_address;
  workspace[1] = l->workspace_bytes;
  if (l->workspace_bytes > 0) {
    params[p++] = &workspace[0];
    params[p++] = &workspace[1];
  }
  uint8_t *constants = (uint8_t *)(workspace + 2);
  if (l->constants_size > 0) {
    const void *from =
        l->constants_base != ACCEL_DRV_BASE_NONE
            ? (const void *)(uintptr_t)(bases[l->constants_base] +
                                        l->constants_offset)
            : l->constants;
    memcpy(constants, from, l->constants_size);
    params[p++] = constants;
  }
  return p;
}

static CUDA_KERNEL_NODE_PARAMS kernel_params(const accel_drv_recorded_launch_t *l,
                                             void **params, uint32_t count) {
  CUDA_KERNEL_NODE_PARAMS k;
  memset(&k, 0, sizeof(k));
  k.func = l->kernel->function;
  k.gridDimX = l->grid[0];
  k.gridDimY = l->grid[1];
  k.gridDimZ = l->grid[2];
  k.blockDimX = l->block[0];
  k.blockDimY = l->block[1];
  k.blockDimZ = l->block[2];
  k.sharedMemBytes = l->shared_bytes;
  k.kernelParams = count > 0 ? params : NULL;
  return k;
}

// ---- host nodes ----------------------------------------------------------------

// Command |index| of the execute failed with |status|: fails the queue at
// the EXECUTE's seq naming the command, and the execute's SIGNALs after it.
static void execute_fail(graph_ctx_t *c, uint32_t index, uint32_t kind,
                         accel_status_t status, const char *why) {
  char message[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(message, sizeof(message),
           "command buffer \"%s\" command #%u (%s) failed: %s",
           c->recording->name, index, accel_cmd_kind_name(kind), why);
  accel_drv_queue_t *q = c->queue;
  accel_cuda_queue_fail(q, c->seq, ACCEL_CMD_EXECUTE, status, message);
  accel_status_t code = accel_error_state_code(&q->error);
  for (uint32_t i = 0; i < c->signal_count; ++i) {
    if (c->signals[i].command > index) {
      accel_cuda_semaphore_fail(c->signals[i].semaphore, code,
                                q->error.message);
    }
  }
}

static void CUDA_CB host_node(void *arg) {
  host_slot_t *h = arg;
  graph_ctx_t *c = h->ctx;
  switch (h->role) {
    case ROLE_HOST_CALL:
      if (!accel_cuda_queue_failed(c->queue)) {
        accel_error_clear();
        accel_status_t st = h->fn(h->user_data);
        if (st != ACCEL_OK) {
          char why[ACCEL_ERROR_MESSAGE_MAX];
          const char *msg = accel_last_error();
          snprintf(why, sizeof(why), "host function returned %s%s%s",
                   accel_status_name(st), msg[0] != '\0' ? ": " : "", msg);
          execute_fail(c, h->command, ACCEL_CMD_HOST_CALL, st, why);
        }
      }
      break;
    case ROLE_TIMESTAMP:
      if (h->word != NULL) {
        // Release: the elapsed-time reader acquires it after the signal.
        atomic_store_explicit(h->word, accel_cuda_now_ns(),
                              memory_order_release);
      }
      break;
    case ROLE_SIGNAL: {
      uint64_t cur =
          atomic_load_explicit(h->semaphore->word, memory_order_relaxed);
      // Release: the work before the signal is visible to its waiters.
      while (cur < h->value &&
             !atomic_compare_exchange_weak_explicit(
                 h->semaphore->word, &cur, h->value, memory_order_release,
                 memory_order_relaxed)) {
      }
      break;
    }
    case ROLE_WAIT_CHECK: {
      accel_status_t st = accel_error_state_code(&h->semaphore->error);
      if (st != ACCEL_OK) {
        execute_fail(c, h->command, ACCEL_CMD_WAIT, st,
                     h->semaphore->error.message);
      }
      break;
    }
    case ROLE_WAIT:
      if (!accel_cuda_queue_failed(c->queue)) {
        accel_status_t st = accel_cuda_semaphore_wait_ex(
            1, &h->semaphore, &h->value, ACCEL_WAIT_ALL,
            ACCEL_TIMEOUT_INFINITE, NULL, false);
        if (st != ACCEL_OK) {
          execute_fail(c, h->command, ACCEL_CMD_WAIT, st, accel_last_error());
        }
      }
      break;
    case ROLE_DONE:
      // Release: whoever sees the launch ended sees its work.
      atomic_store_explicit(h->word, h->value, memory_order_release);
      break;
  }
}

// ---- building a range's graph ---------------------------------------------------

static bool grow_host(graph_range_t *g, uint32_t *cap) {
  if (g->host_count < *cap) {
    return true;
  }
  uint32_t next = *cap ? *cap * 2 : 16;
  host_slot_t *p = realloc(g->host, next * sizeof(*p));
  if (p == NULL) {
    return false;
  }
  g->host = p;
  *cap = next;
  return true;
}

// Adds a host node of |role| for command |i| after |*prev|.
static CUresult add_host(accel_drv_recording_t *r, graph_range_t *g,
                         uint32_t *cap, uint32_t i, uint32_t role,
                         CUgraphNode *prev, CUgraphNode *out,
                         uint32_t *out_slot) {
  if (!grow_host(g, cap)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint32_t slot = g->host_count++;
  g->host[slot] = (host_slot_t){.command = i, .role = role};
  // The execute's context replaces the user data before each launch.
  CUDA_HOST_NODE_PARAMS hp = {.fn = host_node, .userData = &g->host[slot]};
  CUresult res = api_of(r)->cuGraphAddHostNode(out, g->graph, prev,
                                               *prev != NULL, &hp);
  if (res == CUDA_SUCCESS) {
    *prev = *out;
    *out_slot = slot;
  }
  return res;
}

// Adds command |i| (|c|, patched for the first execute) to |g|'s chain.
static accel_status_t add_command(accel_drv_recording_t *r, graph_range_t *g,
                                  uint32_t *cap, uint32_t i,
                                  const accel_cmd_t *c, const uint64_t *bases,
                                  CUgraphNode *prev) {
  const accel_cuda_api_t *cu = api_of(r);
  accel_drv_device_t *d = r->device;
  cmd_nodes_t *n = &g->nodes[i - g->first];
  n->host_before = n->host_main = n->host_after = NO_SLOT;
  bool memops = d->stream_mem_ops;
  CUresult res = CUDA_SUCCESS;
  switch (c->kind) {
    case ACCEL_CMD_HOST_CALL:
      res = add_host(r, g, cap, i, ROLE_HOST_CALL, prev, &n->main,
                     &n->host_main);
      break;
    case ACCEL_CMD_FILL:
    case ACCEL_CMD_COPY:
      if (c->kind == ACCEL_CMD_FILL && r->patterns[i] == NULL) {
        CUDA_MEMSET_NODE_PARAMS mp = memset_params(c);
        res = cu->cuGraphAddMemsetNode(&n->main, g->graph, prev,
                                       *prev != NULL, &mp, d->ctx);
      } else {
        ACCEL_RETURN_IF_ERROR(check_copy(r, i, c));
        CUDA_MEMCPY3D mp = memcpy_params(r, i, c);
        res = cu->cuGraphAddMemcpyNode(&n->main, g->graph, prev,
                                       *prev != NULL, &mp, d->ctx);
      }
      *prev = n->main;
      break;
    case ACCEL_CMD_SIGNAL: {
      bool timed = c->signal.timestamp_out != NULL;
      for (uint32_t p = r->patch_starts[i]; p < r->patch_starts[i + 1]; ++p) {
        timed = timed || r->patches[p].word == 4;
      }
      if (timed) {
        res = add_host(r, g, cap, i, ROLE_TIMESTAMP, prev, &n->before,
                       &n->host_before);
        if (res != CUDA_SUCCESS) {
          break;
        }
      }
      if (!memops) {
        res = add_host(r, g, cap, i, ROLE_SIGNAL, prev, &n->main,
                       &n->host_main);
        break;
      }
      res = add_memop(d, g->graph, prev, &n->main, false,
                      c->signal.semaphore->word_device, c->signal.value);
      break;
    }
    case ACCEL_CMD_WAIT: {
      if (!memops) {
        res = add_host(r, g, cap, i, ROLE_WAIT, prev, &n->main,
                       &n->host_main);
        break;
      }
      // Built on the semaphore's word; an abortable queue's execute moves
      // it to the queue's gate word (execute_apply).
      res = add_memop(d, g->graph, prev, &n->main, true,
                      c->wait.semaphore->word_device, c->wait.value);
      if (res == CUDA_SUCCESS) {
        res = add_host(r, g, cap, i, ROLE_WAIT_CHECK, prev, &n->after,
                       &n->host_after);
      }
      break;
    }
    case ACCEL_CMD_LAUNCH: {
      const accel_drv_recorded_launch_t *l = r->launches[i];
      size_t size = blob_size(l);
      uint8_t *blob = malloc(size);
      if (blob == NULL) {
        return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                           "command buffer \"%s\" command #%u (launch): "
                           "cannot allocate %zu bytes",
                           r->name, i, size);
      }
      g->blobs[i - g->first] = blob;
      g->blob_max = size > g->blob_max ? size : g->blob_max;
      void *params[GRAPH_MAX_PARAMS];
      uint32_t count = launch_blob(l, bases, blob, params);
      CUDA_KERNEL_NODE_PARAMS kp = kernel_params(l, params, count);
      res = cu->cuGraphAddKernelNode(&n->main, g->graph, prev,
                                     *prev != NULL, &kp);
      *prev = n->main;
      break;
    }
    default:
      return accel_error(ACCEL_ERROR_INTERNAL,
                         "command buffer \"%s\" command #%u: kind %u in a "
                         "recording",
                         r->name, i, c->kind);
  }
  if (res != CUDA_SUCCESS) {
    return accel_cuda_check(d, res,
                            "command buffer \"%s\" command #%u (%s): graph "
                            "node",
                            r->name, i, accel_cmd_kind_name(c->kind));
  }
  return ACCEL_OK;
}

static void blobs_free(uint8_t **blobs, uint32_t count) {
  for (uint32_t i = 0; blobs != NULL && i < count; ++i) {
    free(blobs[i]);
  }
  free(blobs);
}

static void exec_free(const accel_drv_recording_t *r, graph_range_t *g,
                      graph_exec_t *e) {
  if (e->exec != NULL) {
    (void)api_of(r)->cuGraphExecDestroy(e->exec);
  }
  blobs_free(e->blobs, g->count);
  free(e->words);
  free(e->scratch);
  memset(e, 0, sizeof(*e));
}

static void range_free(const accel_drv_recording_t *r, graph_range_t *g) {
  for (uint32_t k = 0; k < g->exec_count; ++k) {
    exec_free(r, g, &g->execs[k]);
  }
  if (g->graph != NULL) {
    (void)api_of(r)->cuGraphDestroy(g->graph);
  }
  if (g->done_words != NULL) {
    (void)api_of(r)->cuMemFreeHost((void *)g->done_words);
  }
  blobs_free(g->blobs, g->count);
  free(g->words);
  free(g->nodes);
  free(g->host);
  free(g);
}

// Builds the graph of commands [first, first + count) of |r| with the values
// of the execute at hand (|bases|).
static accel_status_t range_build(accel_drv_recording_t *r, uint32_t first,
                                  uint32_t count, const uint64_t *bases,
                                  graph_range_t **out) {
  accel_drv_device_t *d = r->device;
  const accel_cuda_api_t *cu = d->cu;
  graph_range_t *g = calloc(1, sizeof(*g));
  if (g == NULL) {
    goto err_oom;
  }
  g->first = first;
  g->count = count;
  g->done_slot = NO_SLOT;
  g->nodes = calloc(count, sizeof(*g->nodes));
  g->words = calloc(count, sizeof(*g->words));
  g->blobs = calloc(count, sizeof(*g->blobs));
  if (g->nodes == NULL || g->words == NULL || g->blobs == NULL) {
    goto err_oom;
  }
  void *words = NULL;
  CUresult res = cu->cuMemHostAlloc(
      &words, GRAPH_POOL_MAX * sizeof(uint64_t),
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (res == CUDA_SUCCESS) {
    g->done_words = words;
    res = cu->cuMemHostGetDevicePointer(&g->done_device, words, 0);
  }
  if (res == CUDA_SUCCESS) {
    for (uint32_t k = 0; k < GRAPH_POOL_MAX; ++k) {
      atomic_init(&g->done_words[k], 0);
    }
    res = cu->cuGraphCreate(&g->graph, 0);
  }
  if (res != CUDA_SUCCESS) {
    accel_status_t st = accel_cuda_check(
        d, res, "command buffer \"%s\": graph of commands [%u, %u)", r->name,
        first, first + count);
    range_free(r, g);
    return st;
  }
  uint32_t cap = 0;
  CUgraphNode prev = NULL;
  for (uint32_t i = first; i < first + count; ++i) {
    accel_cmd_t c = patched(r, i, bases);
    words_of(&c, g->words[i - first]);
    if (c.kind == ACCEL_CMD_WAIT && d->stream_mem_ops) {
      g->words[i - first][0] = c.wait.semaphore->word_device;  // the node's
    }
    accel_status_t st = add_command(r, g, &cap, i, &c, bases, &prev);
    if (st != ACCEL_OK) {
      range_free(r, g);
      return st;
    }
  }
  // The launch's end, in the done word of the CUgraphExec that runs it.
  if (d->stream_mem_ops) {
    res = add_memop(d, g->graph, &prev, &g->done, false, g->done_device, 0);
  } else {
    res = add_host(r, g, &cap, first + count, ROLE_DONE, &prev, &g->done,
                   &g->done_slot);
  }
  if (res != CUDA_SUCCESS) {
    accel_status_t st = accel_cuda_check(
        d, res, "command buffer \"%s\": graph of commands [%u, %u)", r->name,
        first, first + count);
    range_free(r, g);
    return st;
  }
  *out = g;
  return ACCEL_OK;

err_oom:
  if (g != NULL) {
    range_free(r, g);
  }
  return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "command buffer \"%s\": cannot build the graph of %u "
                     "commands",
                     r->name, count);
}

// The range [first, first + count) of |r|, built on first use.
static accel_status_t range_get(accel_drv_recording_t *r, uint32_t first,
                                uint32_t count, const uint64_t *bases,
                                graph_range_t **out) {
  pthread_mutex_lock(&r->lock);
  graph_range_t *g = r->ranges;
  while (g != NULL && (g->first != first || g->count != count)) {
    g = g->next;
  }
  accel_status_t st = ACCEL_OK;
  if (g == NULL) {
    st = range_build(r, first, count, bases, &g);
    if (st == ACCEL_OK) {
      g->next = r->ranges;
      r->ranges = g;
    }
  }
  pthread_mutex_unlock(&r->lock);
  *out = g;
  return st;
}

// ---- the pool of CUgraphExecs ---------------------------------------------------

static accel_status_t exec_instantiate_locked(accel_drv_recording_t *r,
                                              graph_range_t *g,
                                              graph_exec_t *e, uint32_t index) {
  ACCEL_ASSERT_HELD(&r->lock);
  accel_drv_device_t *d = r->device;
  e->index = index;
  e->words = malloc(g->count * sizeof(*e->words));
  e->blobs = calloc(g->count, sizeof(*e->blobs));
  e->scratch = malloc(g->blob_max > 0 ? g->blob_max : 1);
  bool ok = e->words != NULL && e->blobs != NULL && e->scratch != NULL;
  for (uint32_t i = 0; ok && i < g->count; ++i) {
    if (g->blobs[i] != NULL) {
      size_t size = blob_size(r->launches[g->first + i]);
      e->blobs[i] = malloc(size);
      ok = e->blobs[i] != NULL;
      if (ok) {
        memcpy(e->blobs[i], g->blobs[i], size);
      }
    }
  }
  if (!ok) {
    exec_free(r, g, e);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "command buffer \"%s\": cannot allocate a graph "
                       "execution's state",
                       r->name);
  }
  memcpy(e->words, g->words, g->count * sizeof(*e->words));
  CUresult res = d->cu->cuGraphInstantiateWithFlags(&e->exec, g->graph, 0);
  if (res != CUDA_SUCCESS) {
    e->exec = NULL;
    exec_free(r, g, e);
    return accel_cuda_check(d, res,
                            "command buffer \"%s\": instantiating the graph "
                            "of commands [%u, %u)",
                            r->name, g->first, g->first + g->count);
  }
  return ACCEL_OK;
}

// Takes a CUgraphExec of |g| for an execute on |q|: one that last ran on
// |q| or whose launches all ended, else a new one while the pool has room,
// else (every one busy on another queue) the first one not being submitted,
// whose launch CUDA then orders after its last.
static accel_status_t exec_claim(accel_drv_recording_t *r, graph_range_t *g,
                                 const accel_drv_queue_t *q,
                                 graph_exec_t **out) {
  for (;;) {
    pthread_mutex_lock(&r->lock);
    graph_exec_t *pick = NULL, *fallback = NULL;
    for (uint32_t k = 0; k < g->exec_count && pick == NULL; ++k) {
      graph_exec_t *e = &g->execs[k];
      if (e->claimed) {
        continue;
      }
      // Acquire: pairs with the done node's release.
      uint64_t ended = atomic_load_explicit(&g->done_words[e->index],
                                            memory_order_acquire);
      if (e->last_queue == q || ended >= e->launches) {
        pick = e;
      } else if (fallback == NULL) {
        fallback = e;
      }
    }
    accel_status_t st = ACCEL_OK;
    if (pick == NULL && g->exec_count < GRAPH_POOL_MAX) {
      pick = &g->execs[g->exec_count];
      st = exec_instantiate_locked(r, g, pick, g->exec_count);
      if (st == ACCEL_OK) {
        g->exec_count++;
      } else {
        pick = NULL;
      }
    }
    if (pick == NULL) {
      pick = fallback;
    }
    if (pick != NULL) {
      pick->claimed = true;
    }
    pthread_mutex_unlock(&r->lock);
    if (st != ACCEL_OK || pick != NULL) {
      *out = pick;
      return st;
    }
    sched_yield();  // every CUgraphExec is being submitted right now
  }
}

static void exec_unclaim(accel_drv_recording_t *r, graph_exec_t *e,
                         const accel_drv_queue_t *q, bool launched) {
  pthread_mutex_lock(&r->lock);
  if (launched) {
    e->launches++;
    e->last_queue = q;
  }
  e->claimed = false;
  pthread_mutex_unlock(&r->lock);
}

// ---- executes -----------------------------------------------------------------

static void ctx_destroy(accel_object_t *object) {
  graph_ctx_t *c = (graph_ctx_t *)object;
  free(c->signals);
  free(c);
}

// Brings the nodes of command |i| in |e| to this execute's values and fills
// its host slots in |c|; notes its SIGNAL in |c| and its gated WAIT in
// |gates|.
static accel_status_t execute_apply(accel_drv_recording_t *r, graph_range_t *g,
                                    graph_exec_t *e, graph_ctx_t *c,
                                    accel_drv_queue_t *q, uint32_t i,
                                    const uint64_t *bases,
                                    cuda_pending_t *gates, uint32_t *gate_n) {
  accel_drv_device_t *d = r->device;
  const accel_cuda_api_t *cu = d->cu;
  uint32_t j = i - g->first;
  const cmd_nodes_t *n = &g->nodes[j];
  accel_cmd_t cmd = r->patch_starts[i] != r->patch_starts[i + 1]
                        ? patched(r, i, bases)
                        : r->commands[i];
  uint64_t words[4];
  words_of(&cmd, words);
  bool changed = memcmp(words, e->words[j], sizeof(words)) != 0;
  CUresult res = CUDA_SUCCESS;
  switch (cmd.kind) {
    case ACCEL_CMD_HOST_CALL:
      c->slots[n->host_main].fn = cmd.host_call.fn;
      c->slots[n->host_main].user_data = cmd.host_call.user_data;
      break;
    case ACCEL_CMD_FILL:
    case ACCEL_CMD_COPY:
      if (!changed) {
        break;
      }
      if (cmd.kind == ACCEL_CMD_FILL && r->patterns[i] == NULL) {
        CUDA_MEMSET_NODE_PARAMS mp = memset_params(&cmd);
        res = cu->cuGraphExecMemsetNodeSetParams(e->exec, n->main, &mp,
                                                 d->ctx);
      } else {
        ACCEL_RETURN_IF_ERROR(check_copy(r, i, &cmd));
        CUDA_MEMCPY3D mp = memcpy_params(r, i, &cmd);
        res = cu->cuGraphExecMemcpyNodeSetParams(e->exec, n->main, &mp,
                                                 d->ctx);
      }
      break;
    case ACCEL_CMD_SIGNAL:
      c->signals[c->signal_count].command = i;
      c->signals[c->signal_count++].semaphore = cmd.signal.semaphore;
      if (n->host_before != NO_SLOT) {
        c->slots[n->host_before].word = cmd.signal.timestamp_out;
      }
      if (n->host_main != NO_SLOT) {
        c->slots[n->host_main].semaphore = cmd.signal.semaphore;
        c->slots[n->host_main].value = cmd.signal.value;
      } else if (changed) {
        res = set_memop(d, e->exec, n->main, false,
                        cmd.signal.semaphore->word_device, cmd.signal.value);
      }
      break;
    case ACCEL_CMD_WAIT: {
      uint32_t slot = n->host_main != NO_SLOT ? n->host_main : n->host_after;
      c->slots[slot].semaphore = cmd.wait.semaphore;
      c->slots[slot].value = cmd.wait.value;
      if (n->host_main != NO_SLOT) {
        break;
      }
      CUdeviceptr address = cmd.wait.semaphore->word_device;
      uint64_t value = cmd.wait.value;
      if (q->gate_word != NULL) {
        // An abortable queue waits on its gate word, which the reaper
        // raises once the semaphore is reached and destroy opens.
        address = q->gate_word_device;
        value = ++q->gate_count;
        gates[(*gate_n)++] = (cuda_pending_t){.seq = c->seq,
                                              .wait = cmd.wait.semaphore,
                                              .value = cmd.wait.value,
                                              .gate = value};
      }
      words[0] = address;  // what the node has (the compare below)
      words[1] = value;
      changed = memcmp(words, e->words[j], sizeof(words)) != 0;
      if (changed) {
        res = set_memop(d, e->exec, n->main, true, address, value);
      }
      break;
    }
    case ACCEL_CMD_LAUNCH: {
      const accel_drv_recorded_launch_t *l = r->launches[i];
      void *params[GRAPH_MAX_PARAMS];
      uint32_t count = launch_blob(l, bases, e->scratch, params);
      size_t size = blob_size(l);
      if (memcmp(e->scratch, e->blobs[j], size) == 0) {
        break;
      }
      CUDA_KERNEL_NODE_PARAMS kp = kernel_params(l, params, count);
      res = cu->cuGraphExecKernelNodeSetParams(e->exec, n->main, &kp);
      if (res == CUDA_SUCCESS) {
        memcpy(e->blobs[j], e->scratch, size);
      }
      break;
    }
    default:
      break;
  }
  if (res != CUDA_SUCCESS) {
    return accel_cuda_check(d, res,
                            "command buffer \"%s\" command #%u (%s): graph "
                            "node update",
                            r->name, i, accel_cmd_kind_name(cmd.kind));
  }
  memcpy(e->words[j], words, sizeof(words));
  return ACCEL_OK;
}

// Points every host node of |e| at this execute's slots.
static accel_status_t execute_host_nodes(accel_drv_recording_t *r,
                                         graph_range_t *g, graph_exec_t *e,
                                         graph_ctx_t *c) {
  const accel_cuda_api_t *cu = api_of(r);
  for (uint32_t j = 0; j < g->count; ++j) {
    const cmd_nodes_t *n = &g->nodes[j];
    const CUgraphNode nodes[3] = {n->before, n->main, n->after};
    const uint32_t slots[3] = {n->host_before, n->host_main, n->host_after};
    for (int k = 0; k < 3; ++k) {
      if (slots[k] == NO_SLOT) {
        continue;
      }
      CUDA_HOST_NODE_PARAMS hp = {.fn = host_node,
                                  .userData = &c->slots[slots[k]]};
      CUresult res = cu->cuGraphExecHostNodeSetParams(e->exec, nodes[k], &hp);
      if (res != CUDA_SUCCESS) {
        return accel_cuda_check(r->device, res,
                                "command buffer \"%s\" command #%u: host "
                                "node update",
                                r->name, g->first + j);
      }
    }
  }
  if (g->done_slot != NO_SLOT) {
    CUDA_HOST_NODE_PARAMS hp = {.fn = host_node,
                                .userData = &c->slots[g->done_slot]};
    CUresult res = cu->cuGraphExecHostNodeSetParams(e->exec, g->done, &hp);
    if (res != CUDA_SUCCESS) {
      return accel_cuda_check(r->device, res,
                              "command buffer \"%s\": host node update",
                              r->name);
    }
  }
  return ACCEL_OK;
}

// The execute's SIGNALs and gated WAITs join the queue's pending list, so
// that a failure before them fails their semaphores and the reaper opens
// their gates; the context is held until the stream passed the EXECUTE.
static accel_status_t execute_pending(accel_drv_queue_t *q, graph_ctx_t *c,
                                      const cuda_pending_t *gates,
                                      uint32_t gate_n, bool *out_held) {
  cuda_pending_t held = {.seq = c->seq, .refs = {&c->object, NULL}};
  ACCEL_RETURN_IF_ERROR(accel_cuda_queue_pending_push(q, held));
  *out_held = true;
  for (uint32_t k = 0; k < gate_n; ++k) {
    ACCEL_RETURN_IF_ERROR(accel_cuda_queue_pending_push(q, gates[k]));
  }
  for (uint32_t k = 0; k < c->signal_count; ++k) {
    cuda_pending_t p = {.seq = c->seq, .signal = c->signals[k].semaphore};
    ACCEL_RETURN_IF_ERROR(accel_cuda_queue_pending_push(q, p));
  }
  // A host function that failed the queue since this submit began scanned
  // the pending list before these signals were in it. Seq_cst: pairs with
  // accel_cuda_queue_fail's store.
  if (atomic_load_explicit(&q->failed, memory_order_seq_cst) != 0) {
    for (uint32_t k = 0; k < c->signal_count; ++k) {
      accel_cuda_semaphore_fail(c->signals[k].semaphore,
                                accel_error_state_code(&q->error),
                                q->error.message);
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_cuda_graph_execute(accel_drv_queue_t *q,
                                        const accel_cmd_t *cmd, uint64_t seq) {
  accel_drv_recording_t *r = cmd->execute.recording;
  const uint64_t *bases = cmd->execute.bases;
  uint32_t first = cmd->execute.first, count = cmd->execute.count;
  graph_range_t *g = NULL;
  ACCEL_RETURN_IF_ERROR(range_get(r, first, count, bases, &g));
  graph_ctx_t *c =
      calloc(1, sizeof(*c) + g->host_count * sizeof(host_slot_t));
  cuda_pending_t *gates = calloc(count, sizeof(*gates));
  if (c != NULL) {
    c->signals = calloc(count, sizeof(*c->signals));
  }
  if (c == NULL || gates == NULL || c->signals == NULL) {
    if (c != NULL) {
      free(c->signals);
    }
    free(c);
    free(gates);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "command buffer \"%s\": cannot allocate an execute's "
                       "context",
                       r->name);
  }
  accel_object_init(&c->object, ctx_destroy);
  c->queue = q;
  c->recording = r;
  c->seq = seq;
  for (uint32_t k = 0; k < g->host_count; ++k) {
    c->slots[k] = g->host[k];
    c->slots[k].ctx = c;
  }
  graph_exec_t *e = NULL;
  accel_status_t st = exec_claim(r, g, q, &e);
  uint32_t gate_n = 0;
  for (uint32_t i = first; st == ACCEL_OK && i < first + count; ++i) {
    st = execute_apply(r, g, e, c, q, i, bases, gates, &gate_n);
  }
  if (st == ACCEL_OK) {
    uint64_t launch = e->launches + 1;  // e is ours: |launches| is stable
    if (g->done_slot != NO_SLOT) {
      c->slots[g->done_slot].word = &g->done_words[e->index];
      c->slots[g->done_slot].value = launch;
    } else {
      CUresult res = set_memop(r->device, e->exec, g->done, false,
                               g->done_device + e->index * sizeof(uint64_t),
                               launch);
      if (res != CUDA_SUCCESS) {
        st = accel_cuda_check(r->device, res,
                              "command buffer \"%s\": done node update",
                              r->name);
      }
    }
  }
  if (st == ACCEL_OK) {
    st = execute_host_nodes(r, g, e, c);
  }
  bool launched = false;
  if (st == ACCEL_OK) {
    CUresult res = r->device->cu->cuGraphLaunch(e->exec, q->stream);
    launched = res == CUDA_SUCCESS;
    if (!launched) {
      st = accel_cuda_check(r->device, res,
                            "command buffer \"%s\": cuGraphLaunch of commands "
                            "[%u, %u)",
                            r->name, first, first + count);
    }
  }
  if (e != NULL) {
    exec_unclaim(r, e, q, launched);
  }
  if (!launched) {
    ctx_destroy(&c->object);
    free(gates);
    return st;
  }
  bool held = false;
  st = execute_pending(q, c, gates, gate_n, &held);
  free(gates);
  if (st != ACCEL_OK) {
    // Out of host memory for the list: keep what the launch reads alive by
    // waiting for the stream instead.
    (void)r->device->cu->cuStreamSynchronize(q->stream);
    if (!held) {
      ctx_destroy(&c->object);
    }
  }
  return st;
}

// ---- recordings -----------------------------------------------------------------

void accel_cuda_recording_destroy(accel_drv_recording_t *r) {
  bool entered = accel_cuda_enter(r->device) == ACCEL_OK;
  accel_error_clear();  // a lost device still frees what it can
  while (r->ranges != NULL) {
    graph_range_t *g = r->ranges;
    r->ranges = g->next;
    range_free(r, g);
  }
  for (uint32_t i = 0; i < r->command_count; ++i) {
    free(r->launches[i]);
    if (r->patterns[i] != NULL && entered) {
      (void)r->device->cu->cuMemFreeHost(r->patterns[i]);
    }
  }
  pthread_mutex_destroy(&r->lock);
  free(r->launches);
  free(r->patterns);
  free(r->patch_starts);
  free(r->patches);
  free(r->commands);
  free(r);
}

// Copies a recorded device launch (bindings and recorded constants with it).
static accel_drv_recorded_launch_t *launch_copy(
    const accel_drv_recorded_launch_t *l) {
  size_t bindings = l->binding_count * sizeof(accel_drv_recorded_binding_t);
  bool recorded = l->constants_base == ACCEL_DRV_BASE_NONE;
  size_t total = sizeof(*l) + bindings + (recorded ? l->constants_size : 0);
  accel_drv_recorded_launch_t *copy = malloc(total);
  if (copy == NULL) {
    return NULL;
  }
  *copy = *l;
  accel_drv_recorded_binding_t *b = (accel_drv_recorded_binding_t *)(copy + 1);
  if (bindings > 0) {
    memcpy(b, l->bindings, bindings);
  }
  copy->bindings = b;
  if (recorded && l->constants_size > 0) {
    memcpy((uint8_t *)b + bindings, l->constants, l->constants_size);
    copy->constants = (uint8_t *)b + bindings;
  }
  return copy;
}

// Checks command |i| of |p| and keeps what the graph needs beyond it.
static accel_status_t recording_keep(accel_drv_recording_t *r, uint32_t i,
                                     const accel_cmd_t *c) {
  accel_drv_device_t *d = r->device;
  if (c->kind == ACCEL_CMD_LAUNCH) {
    if (c->flags != ACCEL_CMD_LAUNCH_DEVICE ||
        c->launch.payload == NULL) {
      return accel_error(ACCEL_ERROR_UNSUPPORTED,
                         "command buffer \"%s\" command #%u (launch): the "
                         "CUDA device runs no host code objects",
                         r->name, i);
    }
    const accel_drv_recorded_launch_t *l = c->launch.payload;
    if (2u * l->binding_count + 3u > GRAPH_MAX_PARAMS) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "command buffer \"%s\" command #%u (launch): %u "
                         "bindings exceed the %u kernel parameters",
                         r->name, i, l->binding_count, GRAPH_MAX_PARAMS);
    }
    r->launches[i] = launch_copy(l);
    if (r->launches[i] == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "command buffer \"%s\" command #%u (launch): cannot "
                         "copy it",
                         r->name, i);
    }
    r->commands[i].launch.payload = r->launches[i];
    return ACCEL_OK;
  }
  if (c->kind == ACCEL_CMD_FILL) {
    uint64_t v = c->fill.pattern;
    if (accel_cuda_fill_narrow(&v, c->fill.pattern_size) != 8) {
      return ACCEL_OK;
    }
    // The pattern, repeated, for a memcpy node (see the top of the file).
    void *buffer = NULL;
    CUresult res = d->cu->cuMemHostAlloc(&buffer, c->fill.size_bytes,
                                         CU_MEMHOSTALLOC_PORTABLE);
    if (res != CUDA_SUCCESS) {
      return accel_cuda_check(d, res,
                              "command buffer \"%s\" command #%u (fill): "
                              "%llu-byte pattern buffer",
                              r->name, i,
                              (unsigned long long)c->fill.size_bytes);
    }
    for (uint64_t at = 0; at < c->fill.size_bytes; at += 8) {
      memcpy((uint8_t *)buffer + at, &c->fill.pattern, 8);
    }
    r->patterns[i] = buffer;
    return ACCEL_OK;
  }
  if (c->kind > ACCEL_CMD_WAIT) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "command buffer \"%s\" command #%u: %s cannot be "
                       "recorded",
                       r->name, i, accel_cmd_kind_name(c->kind));
  }
  return ACCEL_OK;
}

accel_status_t accel_cuda_recording_create(
    accel_drv_device_t *device, const accel_drv_recording_params_t *params,
    accel_drv_recording_t **out_recording) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  uint32_t n = params->command_count;
  accel_drv_recording_t *r = calloc(1, sizeof(*r));
  if (r == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda recording: cannot allocate %zu bytes",
                       sizeof(*r));
  }
  r->device = device;
  snprintf(r->name, sizeof(r->name), "%s",
           params->name != NULL ? params->name : "");
  r->command_count = n;
  pthread_mutex_init(&r->lock, NULL);
  r->commands = malloc((n + 1) * sizeof(accel_cmd_t));
  r->patches = malloc((params->patch_count + 1) * sizeof(accel_drv_patch_t));
  r->patch_starts = calloc(n + 1, sizeof(uint32_t));
  r->launches = calloc(n + 1, sizeof(*r->launches));
  r->patterns = calloc(n + 1, sizeof(*r->patterns));
  if (r->commands == NULL || r->patches == NULL || r->patch_starts == NULL ||
      r->launches == NULL || r->patterns == NULL) {
    accel_cuda_recording_destroy(r);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda recording \"%s\": cannot copy %u commands",
                       params->name, n);
  }
  if (n > 0) {
    memcpy(r->commands, params->commands, n * sizeof(accel_cmd_t));
  }
  if (params->patch_count > 0) {
    memcpy(r->patches, params->patches,
           params->patch_count * sizeof(accel_drv_patch_t));
  }
  uint32_t p = 0;
  for (uint32_t i = 0; i < n; ++i) {
    r->patch_starts[i] = p;
    while (p < params->patch_count && params->patches[p].command == i) {
      ++p;
    }
    accel_status_t st = recording_keep(r, i, &params->commands[i]);
    if (st != ACCEL_OK) {
      accel_cuda_recording_destroy(r);
      return st;
    }
  }
  r->patch_starts[n] = p;
  *out_recording = r;
  return ACCEL_OK;
}
