#include "kernel_runner.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

struct kernel_lib {
  void *handle;
  const accel_kernel_library_t *library;
};

kernel_lib_t *kernel_lib_open(const char *path) {
  if (path == NULL) {
    fail_msg("no code object path (set by meson in the environment)");
  }
  kernel_lib_t *lib = calloc(1, sizeof(*lib));
  assert_non_null(lib);
  lib->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == NULL) {
    fail_msg("cannot load %s: %s", path, dlerror());
  }
  accel_kernel_library_query_fn_t query = (accel_kernel_library_query_fn_t)(
      uintptr_t)dlsym(lib->handle, ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL);
  assert_non_null(query);
  lib->library = query(ACCEL_KERNEL_ABI_VERSION);
  assert_non_null(lib->library);
  if (lib->library->init != NULL) {
    assert_int_equal(lib->library->init(), 0);
  }
  return lib;
}

void kernel_lib_close(kernel_lib_t *lib) {
  if (lib->library->fini != NULL) {
    lib->library->fini();
  }
  dlclose(lib->handle);
  free(lib);
}

accel_kernel_fn_t kernel_lib_find(kernel_lib_t *lib, const char *name) {
  for (uint32_t i = 0; i < lib->library->export_count; ++i) {
    if (strcmp(lib->library->exports[i].name, name) == 0) {
      return lib->library->exports[i].fn;
    }
  }
  fail_msg("%s exports no kernel \"%s\"", lib->library->name, name);
  return NULL;
}

typedef struct run_state {
  accel_kernel_dispatch_t dispatch;
  const accel_kernel_fn_t *fn;
  accel_kernel_workgroup_t *order;
  uint64_t count;
  _Atomic uint64_t next;
  _Atomic int32_t result;
  pthread_mutex_t lock;  // guards message
  char *message;
  uint64_t message_size;
} run_state_t;

static int32_t take_message(const accel_kernel_dispatch_t *d,
                            const accel_kernel_workgroup_t *wg, uint32_t kind,
                            const char *text) {
  run_state_t *st = (run_state_t *)(uintptr_t)d;  // dispatch is first
  if (wg == NULL || kind > ACCEL_KERNEL_MESSAGE_ASSERT) {
    return -1;
  }
  if (kind == ACCEL_KERNEL_MESSAGE_ASSERT) {
    pthread_mutex_lock(&st->lock);
    if (st->message[0] == '\0') {
      snprintf(st->message, st->message_size, "%s", text ? text : "");
    }
    pthread_mutex_unlock(&st->lock);
  }
  return 0;
}

static void *run_thread(void *arg) {
  run_state_t *st = arg;
  for (;;) {
    // Relaxed: the counter only hands out distinct indices; results are
    // published by pthread_join.
    uint64_t i = atomic_fetch_add_explicit(&st->next, 1, memory_order_relaxed);
    if (i >= st->count) {
      return NULL;
    }
    int32_t rc = (*st->fn)(&st->dispatch, &st->order[i]);
    if (rc != 0) {
      int32_t zero = 0;
      // Relaxed: the first failure wins; read after pthread_join.
      atomic_compare_exchange_strong_explicit(&st->result, &zero, rc,
                                              memory_order_relaxed,
                                              memory_order_relaxed);
    }
  }
}

int32_t kernel_run(const kernel_launch_t *launch, char *message,
                   uint64_t message_size) {
  run_state_t *st = calloc(1, sizeof(*st));
  assert_non_null(st);
  st->fn = &launch->fn;
  st->count = (uint64_t)launch->grid[0] * launch->grid[1] * launch->grid[2];
  st->order = calloc(st->count, sizeof(*st->order));
  assert_non_null(st->order);
  uint64_t i = 0;
  for (uint32_t z = 0; z < launch->grid[2]; ++z) {
    for (uint32_t y = 0; y < launch->grid[1]; ++y) {
      for (uint32_t x = 0; x < launch->grid[0]; ++x) {
        st->order[i++] = (accel_kernel_workgroup_t){.id = {x, y, z}};
      }
    }
  }
  // A Fisher-Yates shuffle of the work-groups by |order_seed| (0: in order).
  uint64_t r = launch->order_seed;
  for (uint64_t k = st->count; r != 0 && k > 1; --k) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    uint64_t j = r % k;
    accel_kernel_workgroup_t t = st->order[k - 1];
    st->order[k - 1] = st->order[j];
    st->order[j] = t;
  }
  st->dispatch = (accel_kernel_dispatch_t){
      .struct_size = sizeof(accel_kernel_dispatch_t),
      .abi_version = ACCEL_KERNEL_ABI_VERSION,
      .workgroup_count = {launch->grid[0], launch->grid[1], launch->grid[2]},
      .workgroup_size = {1, 1, 1},
      .binding_count = launch->binding_count,
      .constants_size = launch->constants_size,
      .bindings = launch->binding_count ? launch->bindings : NULL,
      .constants = launch->constants,
      .message = take_message};
  char dummy[1];
  st->message = message != NULL ? message : dummy;
  st->message_size = message != NULL ? message_size : sizeof(dummy);
  st->message[0] = '\0';
  pthread_mutex_init(&st->lock, NULL);
  uint32_t n = launch->threads ? launch->threads : 1;
  pthread_t threads[64];
  assert_true(n <= 64);
  for (uint32_t t = 0; t < n; ++t) {
    assert_int_equal(pthread_create(&threads[t], NULL, run_thread, st), 0);
  }
  for (uint32_t t = 0; t < n; ++t) {
    pthread_join(threads[t], NULL);
  }
  int32_t result = atomic_load_explicit(&st->result, memory_order_relaxed);
  pthread_mutex_destroy(&st->lock);
  free(st->order);
  free(st);
  return result;
}
