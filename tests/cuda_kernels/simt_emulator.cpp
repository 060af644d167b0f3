// The SIMT emulator (simt_emulator.h): one ucontext fiber per CUDA thread,
// a round-robin scheduler per block whose order the launch chooses, block
// barriers and warp barriers that check what CUDA requires of them.
#include "simt_emulator.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <mutex>
#include <vector>

#include "simt.h"

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_ASAN 1
#endif
#endif
#ifdef SIMT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define SIMT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIMT_TSAN 1
#endif
#endif
#ifdef SIMT_TSAN
#include <sanitizer/tsan_interface.h>
#endif

// Every __shared__ variable of the kernels linked with the emulator lies in
// this section (simt.h); the linker defines its bounds. Weak: a program
// without shared variables has no section.
extern "C" {
extern char __start_accel_simt_shared[] __attribute__((weak));
extern char __stop_accel_simt_shared[] __attribute__((weak));
}

namespace {

// Fiber stacks: kernels keep their arrays in __shared__ or registers, so a
// frame is small; sanitizers grow it several times.
#if defined(SIMT_ASAN) || defined(SIMT_TSAN)
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 128 * 1024;
#endif

enum fiber_state { RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct fiber {
  ucontext_t ctx;
  char *stack;
  fiber_state state;
  accel_simt_coords_t coords;
  uint32_t lane, warp;
  // The pending warp operation and its result.
  int op;
  uint32_t mask;
  uint64_t value, result;
  int32_t arg, width;
  void *fake_stack;  // ASan's fake stack while switched out
  void *tsan_fiber;  // ThreadSanitizer's fiber, or NULL
  uint32_t tsan_uses;  // blocks run on |tsan_fiber|
};

struct block_run {
  const accel_simt_launch_t *launch;
  std::vector<fiber> fibers;
  uint32_t threads;
  ucontext_t sched;
  fiber *current;
  const void *sched_bottom;  // the scheduler's stack, for ASan
  size_t sched_size;
  void *tsan_sched;  // ThreadSanitizer's fiber of the scheduler, or NULL
  int result;
  char message[1024];
};

thread_local block_run *t_run;
std::mutex g_lock;  // __shared__ variables are process-wide

uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void set_result(block_run *run, int result, const char *format, va_list args) {
  if (run->result != ACCEL_SIMT_OK) {
    return;  // the first failure wins
  }
  run->result = result;
  vsnprintf(run->message, sizeof(run->message), format, args);
}

__attribute__((format(printf, 3, 4))) void fail(block_run *run, int result,
                                                const char *format, ...) {
  va_list args;
  va_start(args, format);
  set_result(run, result, format, args);
  va_end(args);
}

// Switches from the running fiber back to the scheduler.
void yield_to_scheduler(block_run *run, fiber *f, bool dying) {
#ifdef SIMT_ASAN
  __sanitizer_start_switch_fiber(dying ? nullptr : &f->fake_stack,
                                 run->sched_bottom, run->sched_size);
#else
  (void)dying;
#endif
#ifdef SIMT_TSAN
  // Switching synchronizes (flag 0): the fibers run one at a time.
  __tsan_switch_to_fiber(run->tsan_sched, 0);
#endif
  swapcontext(&f->ctx, &run->sched);
#ifdef SIMT_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &run->sched_bottom,
                                  &run->sched_size);
#endif
}

void fiber_main() {
  block_run *run = t_run;
  fiber *f = run->current;
#ifdef SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &run->sched_bottom,
                                  &run->sched_size);
#endif
  run->launch->kernel->run(run->launch->params);
  f->state = DONE;
  yield_to_scheduler(run, f, true);
  // Never resumed: the scheduler does not switch to a DONE fiber.
}

void switch_to(block_run *run, fiber *f) {
  run->current = f;
#ifdef SIMT_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f->stack, kStackBytes);
#endif
#ifdef SIMT_TSAN
  __tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
  swapcontext(&run->sched, &f->ctx);
#ifdef SIMT_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  run->current = nullptr;
}

const char *op_name(int op) {
  static const char *const names[] = {"__shfl_sync", "__shfl_up_sync",
                                      "__shfl_down_sync", "__shfl_xor_sync",
                                      "__ballot_sync", "__any_sync",
                                      "__all_sync", "__syncwarp"};
  return op >= 0 && op < 8 ? names[op] : "?";
}

// The source lane of shuffle |f| (its own lane when out of its segment).
uint32_t shuffle_source(const fiber &f) {
  uint32_t w = (uint32_t)f.width, lane = f.lane, base = lane & ~(w - 1);
  switch (f.op) {
    case ACCEL_SIMT_SHFL_IDX:
      return base + ((uint32_t)f.arg & (w - 1));
    case ACCEL_SIMT_SHFL_UP:
      return (lane - base) < (uint32_t)f.arg ? lane : lane - (uint32_t)f.arg;
    case ACCEL_SIMT_SHFL_DOWN:
      return (lane - base) + (uint32_t)f.arg >= w ? lane
                                                   : lane + (uint32_t)f.arg;
    default: {  // XOR
      uint32_t src = lane ^ (uint32_t)f.arg;
      return (src & ~(w - 1)) != base ? lane : src;
    }
  }
}

// Completes the warp operations whose lanes have all arrived. Returns true
// when some fiber became runnable; records misuse in |run|.
bool resolve_warps(block_run *run) {
  bool released = false;
  uint32_t warps = (run->threads + 31) / 32;
  for (uint32_t w = 0; w < warps && run->result == ACCEL_SIMT_OK; ++w) {
    fiber *lanes = &run->fibers[w * 32];
    uint32_t n = run->threads - w * 32 < 32 ? run->threads - w * 32 : 32;
    for (uint32_t l = 0; l < n; ++l) {
      fiber &f = lanes[l];
      if (f.state != AT_WARP) {
        continue;
      }
      if (!(f.mask >> l & 1u)) {
        fail(run, ACCEL_SIMT_MISUSE,
             "%s: thread %u passed mask 0x%08x without its own lane %u",
             op_name(f.op), w * 32 + l, f.mask, l);
        return false;
      }
      bool ready = true;
      for (uint32_t m = 0; m < 32 && ready; ++m) {
        if (!(f.mask >> m & 1u)) {
          continue;
        }
        if (m >= n || lanes[m].state == DONE) {
          fail(run, ACCEL_SIMT_MISUSE,
               "%s: thread %u's mask 0x%08x names lane %u, which %s",
               op_name(f.op), w * 32 + l, f.mask, m,
               m >= n ? "the block does not have" : "has exited");
          return false;
        }
        if (lanes[m].state != AT_WARP) {
          ready = false;
        } else if (lanes[m].mask != f.mask || lanes[m].op != f.op) {
          fail(run, ACCEL_SIMT_MISUSE,
               "warp %u: thread %u is at %s with mask 0x%08x, thread %u at "
               "%s with mask 0x%08x",
               w, w * 32 + l, op_name(f.op), f.mask, w * 32 + m,
               op_name(lanes[m].op), lanes[m].mask);
          return false;
        }
      }
      if (!ready) {
        continue;
      }
      // Every lane of the mask is here with the same operation: resolve.
      uint32_t mask = f.mask;
      uint32_t ballot = 0;
      for (uint32_t m = 0; m < 32; ++m) {
        if ((mask >> m & 1u) && lanes[m].value != 0) ballot |= 1u << m;
      }
      for (uint32_t m = 0; m < 32; ++m) {
        if (!(mask >> m & 1u)) continue;
        fiber &g = lanes[m];
        switch (g.op) {
          case ACCEL_SIMT_BALLOT:
            g.result = ballot;
            break;
          case ACCEL_SIMT_ANY:
            g.result = ballot != 0;
            break;
          case ACCEL_SIMT_ALL:
            g.result = ballot == mask;
            break;
          case ACCEL_SIMT_SYNCWARP:
            g.result = 0;
            break;
          default: {
            if (g.width < 1 || g.width > 32 || (g.width & (g.width - 1))) {
              fail(run, ACCEL_SIMT_MISUSE,
                   "%s: thread %u passed width %d (a power of 2 up to 32)",
                   op_name(g.op), w * 32 + m, g.width);
              return false;
            }
            uint32_t src = shuffle_source(g);
            if (!(mask >> src & 1u)) {
              fail(run, ACCEL_SIMT_MISUSE,
                   "%s: thread %u reads lane %u outside mask 0x%08x",
                   op_name(g.op), w * 32 + m, src, mask);
              return false;
            }
            g.result = lanes[src].value;
            break;
          }
        }
      }
      for (uint32_t m = 0; m < 32; ++m) {
        if (mask >> m & 1u) lanes[m].state = RUNNABLE;
      }
      released = true;
    }
  }
  return released;
}

// Points |f|'s context at the start of fiber_main on its own stack. Not
// inlined: getcontext returns twice, which must not touch the caller's
// locals.
__attribute__((noinline)) void make_fiber_context(fiber *f) {
#ifdef SIMT_TSAN
  // A fiber's ThreadSanitizer state is kept from block to block (creating
  // one costs far more than a block): each block leaves fiber_main's two
  // frames on its shadow stack (fiber_main never returns), so it is renewed
  // every 1024 blocks.
  if (f->tsan_fiber == nullptr || ++f->tsan_uses % 1024 == 0) {
    if (f->tsan_fiber != nullptr) __tsan_destroy_fiber(f->tsan_fiber);
    f->tsan_fiber = __tsan_create_fiber(0);
  }
#endif
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = kStackBytes;
  f->ctx.uc_link = nullptr;
  makecontext(&f->ctx, fiber_main, 0);
}

// Runs block |block| of the launch on |run|'s fibers.
void run_block(block_run *run, const uint32_t block[3], uint64_t *rng) {
  const accel_simt_launch_t *l = run->launch;
  // Poison shared memory: f32 NaN, integers -1. What a block reads before
  // a barrier made it valid is garbage, never a previous block's value.
  if (__start_accel_simt_shared != nullptr) {
    memset(__start_accel_simt_shared, 0xff,
           (size_t)(__stop_accel_simt_shared - __start_accel_simt_shared));
  }
  for (uint32_t t = 0; t < run->threads; ++t) {
    fiber &f = run->fibers[t];
    f.state = RUNNABLE;
    f.coords.thread_idx = {t % l->block[0], t / l->block[0] % l->block[1],
                           t / (l->block[0] * l->block[1])};
    f.coords.block_idx = {block[0], block[1], block[2]};
    f.coords.block_dim = {l->block[0], l->block[1], l->block[2]};
    f.coords.grid_dim = {l->grid[0], l->grid[1], l->grid[2]};
    f.lane = t % 32;
    f.warp = t / 32;
    f.fake_stack = nullptr;
    make_fiber_context(&f);
  }
  std::vector<uint32_t> order(run->threads);
  for (;;) {
    for (uint32_t t = 0; t < run->threads; ++t) {
      order[t] = l->order == ACCEL_SIMT_ORDER_REVERSE ? run->threads - 1 - t : t;
    }
    if (l->order == ACCEL_SIMT_ORDER_RANDOM) {
      for (uint32_t t = run->threads - 1; t > 0; --t) {
        uint32_t j = (uint32_t)(splitmix(rng) % (t + 1));
        uint32_t tmp = order[t];
        order[t] = order[j];
        order[j] = tmp;
      }
    }
    bool ran = false;
    for (uint32_t t : order) {
      if (run->fibers[t].state == RUNNABLE) {
        switch_to(run, &run->fibers[t]);
        ran = true;
      }
    }
    if (run->result == ACCEL_SIMT_MISUSE) {
      return;
    }
    bool released = resolve_warps(run);
    if (run->result == ACCEL_SIMT_MISUSE) {
      return;
    }
    uint32_t live = 0, at_barrier = 0, at_warp = 0;
    for (const fiber &f : run->fibers) {
      live += f.state != DONE;
      at_barrier += f.state == AT_BARRIER;
      at_warp += f.state == AT_WARP;
    }
    if (live == 0) {
      return;
    }
    // __syncthreads: released when every thread that has not exited waits
    // at it (exited threads count as arrived, as on sm_70 and later).
    if (at_barrier == live) {
      for (fiber &f : run->fibers) {
        if (f.state == AT_BARRIER) f.state = RUNNABLE;
      }
      released = true;
    }
    if (!ran && !released) {
      fail(run, ACCEL_SIMT_MISUSE,
           "block (%u, %u, %u) deadlocked: %u of %u live threads wait at "
           "__syncthreads, %u at warp operations",
           block[0], block[1], block[2], at_barrier, live, at_warp);
      return;
    }
  }
}

}  // namespace

extern "C" const accel_simt_coords_t *accel_simt_coords(void) {
  return &t_run->current->coords;
}

extern "C" void accel_simt_syncthreads(void) {
  block_run *run = t_run;
  fiber *f = run->current;
  f->state = AT_BARRIER;
  yield_to_scheduler(run, f, false);
}

extern "C" uint64_t accel_simt_warp(int op, uint32_t mask, uint64_t value,
                                    int32_t arg, int32_t width) {
  block_run *run = t_run;
  fiber *f = run->current;
  f->op = op;
  f->mask = mask;
  f->value = value;
  f->arg = arg;
  f->width = width;
  f->state = AT_WARP;
  yield_to_scheduler(run, f, false);
  return f->result;
}

extern "C" void accel_simt_fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  set_result(t_run, ACCEL_SIMT_KERNEL_FAILED, format, args);
  va_end(args);
}

extern "C" int accel_simt_run(const accel_simt_launch_t *launch, char *message,
                              size_t message_size) {
  if (message_size > 0) message[0] = '\0';
  const char *bad = nullptr;
  uint64_t threads = 1, blocks = 1;
  if (launch == nullptr || launch->kernel == nullptr) {
    bad = "no launch or no kernel";
  } else {
    for (int i = 0; i < 3; ++i) {
      threads *= launch->block[i];
      blocks *= launch->grid[i];
    }
    if (threads == 0 || threads > 1024) {
      bad = "blockDim must hold 1 to 1024 threads";
    } else if (blocks == 0) {
      bad = "gridDim must be at least 1 in every dimension";
    } else if (launch->kernel->param_count > 0 && launch->params == nullptr) {
      bad = "no kernel parameters";
    }
  }
  if (bad != nullptr) {
    if (message_size > 0) snprintf(message, message_size, "%s", bad);
    return ACCEL_SIMT_MISUSE;
  }
  std::lock_guard<std::mutex> guard(g_lock);
  block_run run;
  run.launch = launch;
  run.threads = (uint32_t)threads;
  run.current = nullptr;
  run.sched_bottom = nullptr;
  run.sched_size = 0;
  run.result = ACCEL_SIMT_OK;
  run.message[0] = '\0';
  run.tsan_sched = nullptr;
#ifdef SIMT_TSAN
  run.tsan_sched = __tsan_get_current_fiber();
#endif
  run.fibers.resize(threads);
  // Fiber stacks stay mapped from one launch to the next (under g_lock):
  // mapping and unmapping them per launch costs the sanitizers' shadow
  // memory far more than the kernels' work.
  static char *s_stacks;
  static uint64_t s_stack_count;
  if (s_stack_count < threads) {
    char *stacks = (char *)mmap(nullptr, kStackBytes * threads,
                                PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                -1, 0);
    if (stacks == MAP_FAILED) {
      if (message_size > 0) {
        snprintf(message, message_size, "no memory for %llu fiber stacks",
                 (unsigned long long)threads);
      }
      return ACCEL_SIMT_MISUSE;
    }
    if (s_stacks != nullptr) munmap(s_stacks, kStackBytes * s_stack_count);
    s_stacks = stacks;
    s_stack_count = threads;
  }
  char *stacks = s_stacks;
  for (uint64_t t = 0; t < threads; ++t) {
    run.fibers[t].stack = stacks + t * kStackBytes;
    run.fibers[t].tsan_fiber = nullptr;
    run.fibers[t].tsan_uses = 0;
  }
  block_run *saved = t_run;
  t_run = &run;
  // Blocks in a seeded order: a kernel must not depend on it.
  std::vector<uint64_t> block_order(blocks);
  for (uint64_t b = 0; b < blocks; ++b) block_order[b] = b;
  uint64_t rng = launch->seed ^ 0x5eedb10cull;
  for (uint64_t b = blocks - 1; b > 0; --b) {
    uint64_t j = splitmix(&rng) % (b + 1);
    uint64_t tmp = block_order[b];
    block_order[b] = block_order[j];
    block_order[j] = tmp;
  }
  for (uint64_t i = 0; i < blocks && run.result == ACCEL_SIMT_OK; ++i) {
    uint64_t b = block_order[i];
    uint32_t id[3] = {(uint32_t)(b % launch->grid[0]),
                      (uint32_t)(b / launch->grid[0] % launch->grid[1]),
                      (uint32_t)(b / ((uint64_t)launch->grid[0] *
                                      launch->grid[1]))};
    uint64_t block_rng = launch->seed + b * 0x9e3779b97f4a7c15ull;
    run_block(&run, id, &block_rng);
  }
  t_run = saved;
#ifdef SIMT_TSAN
  for (fiber &f : run.fibers) {
    if (f.tsan_fiber != nullptr) __tsan_destroy_fiber(f.tsan_fiber);
  }
#endif
  if (message_size > 0) snprintf(message, message_size, "%s", run.message);
  return run.result;
}
