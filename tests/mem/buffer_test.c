// The front door, statistics, reports, tags and every misuse of lib/mem.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static accel_buffer_t *alloc_ok(accel_device_t *dev, uint64_t size,
                                const char *tag) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size,
                           .tag = tag};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(dev, &d, &b));
  return b;
}

static accel_mem_stats_t dev_stats(accel_device_t *dev) {
  accel_mem_stats_t s = {.struct_size = sizeof(s)};
  assert_accel_ok(accel_device_mem_stats(dev, &s));
  return s;
}

// Small, mid and large requests all give aligned, host-visible, writable
// memory of the requested size.
static void test_buffer_alloc_serves_every_size_aligned(void **state) {
  test_env_t *env = *state;
  static const uint64_t sizes[] = {1, 255, 256, 4000, 65536, 65537,
                                   1 << 20, (2 << 20) + 1, 9 << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    accel_buffer_t *b = alloc_ok(env->device, sizes[i], NULL);
    assert_int_equal(accel_buffer_size(b), sizes[i]);
    assert_int_equal(accel_buffer_address(b) % 256, 0);
    assert_ptr_equal(accel_buffer_device(b), env->device);
    void *p = NULL;
    assert_accel_ok(accel_buffer_host_pointer(b, &p));
    memset(p, 0xab, sizes[i]);
    assert_accel_ok(accel_buffer_free(b));
  }
}

// Larger alignments are honoured by every allocator.
static void test_buffer_alloc_honours_alignment(void **state) {
  test_env_t *env = *state;
  static const uint64_t aligns[] = {512, 4096, 65536, 1 << 21};
  static const uint64_t sizes[] = {300, 70000, 3 << 20};
  for (size_t a = 0; a < 4; ++a) {
    for (size_t s = 0; s < 3; ++s) {
      accel_buffer_desc_t d = {.struct_size = sizeof(d),
                               .size_bytes = sizes[s],
                               .alignment = aligns[a]};
      accel_buffer_t *b = NULL;
      assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
      assert_int_equal(accel_buffer_address(b) % aligns[a], 0);
      accel_buffer_release(b);
    }
  }
}

// Every invalid argument is rejected with a message and no output.
static void test_buffer_alloc_rejects_bad_arguments(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = (accel_buffer_t *)0x1;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 64};
  assert_accel_status(accel_buffer_alloc(NULL, &d, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_alloc(env->device, NULL, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_alloc(env->device, &d, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_buffer_desc_t bad = d;
  bad.size_bytes = 0;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.alignment = 384;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.kind = 7;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.flags = 1u << 20;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.struct_size = 8;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.flags = ACCEL_BUFFER_FLAG_NUMA_NODE;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.size_bytes = UINT64_MAX - 5;
  assert_accel_status(accel_buffer_alloc(env->device, &bad, &b),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_ptr_equal(b, (accel_buffer_t *)0x1);
}

// A caller compiled against the 0.1 descriptor (no pool fields) still works.
static void test_buffer_alloc_accepts_old_descriptor(void **state) {
  test_env_t *env = *state;
  accel_buffer_desc_t d = {.struct_size = offsetof(accel_buffer_desc_t, pool),
                           .size_bytes = 1000};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  accel_buffer_release(b);
}

// ACCEL_BUFFER_FLAG_ZERO clears reused slab memory.
static void test_buffer_zero_flag_clears_reused_memory(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_ok(env->device, 1024, NULL);
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  memset(p, 0x5a, 1024);
  uint64_t addr = accel_buffer_address(b);
  accel_buffer_release(b);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 1024,
                           .flags = ACCEL_BUFFER_FLAG_ZERO};
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_int_equal(accel_buffer_address(b), addr);  // LIFO reuse
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  for (int i = 0; i < 1024; ++i) {
    assert_int_equal(((unsigned char *)p)[i], 0);
  }
  accel_buffer_release(b);
}

// A second free of the same handle is an error, not a corruption.
static void test_buffer_double_free_is_detected(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_ok(env->device, 512, NULL);
  accel_buffer_t *big = alloc_ok(env->device, 3 << 20, NULL);
  assert_accel_ok(accel_buffer_free(b));
  assert_accel_status(accel_buffer_free(b), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "double free"));
  assert_accel_ok(accel_buffer_free(big));
  assert_accel_status(accel_buffer_free(big), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_free(NULL), ACCEL_ERROR_INVALID_ARGUMENT);
  // A pointer that is not a buffer handle at all.
  uint64_t fake[64];
  memset(fake, 0x5a, sizeof(fake));
  assert_accel_status(accel_buffer_free((accel_buffer_t *)fake),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "not a buffer handle"));
}

// Freeing by address: foreign addresses, interior addresses and double
// frees are errors naming what was wrong.
static void test_mem_free_rejects_foreign_interior_and_double(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *small = alloc_ok(env->device, 1000, NULL);
  accel_buffer_t *mid = alloc_ok(env->device, 200000, NULL);
  accel_buffer_t *big = alloc_ok(env->device, 5 << 20, NULL);
  int on_stack = 0;
  assert_accel_status(accel_mem_free(env->device, (uint64_t)(uintptr_t)&on_stack),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "no allocator"));
  accel_buffer_t *all[] = {small, mid, big};
  for (int i = 0; i < 3; ++i) {
    uint64_t a = accel_buffer_address(all[i]);
    assert_accel_status(accel_mem_free(env->device, a + 256),
                        ACCEL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(accel_last_error(), "inside buffer"));
    assert_accel_ok(accel_mem_free(env->device, a));
    assert_accel_status(accel_mem_free(env->device, a),
                        ACCEL_ERROR_INVALID_ARGUMENT);
  }
  assert_accel_status(accel_mem_free(NULL, 0), ACCEL_ERROR_INVALID_ARGUMENT);
}

static accel_status_t gate_fn(void *user) {
  accel_semaphore_t *gate = user;
  return accel_semaphore_wait(gate, 1, ACCEL_TIMEOUT_INFINITE);
}

// Freeing a buffer that a pending command uses defers the release until the
// command completes; the command still writes valid memory.
static void test_buffer_free_while_command_pending_is_deferred(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED};
  accel_mempool_t *pool = NULL;
  assert_accel_ok(accel_mempool_create(env->device, &pd, &pool));
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 4 << 20,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  uint32_t out = 0;
  assert_accel_ok(accel_stream_host_call(s, gate_fn, gate));
  assert_accel_ok(accel_stream_fill(s, b, 0, 4 << 20, 0x77, 1));
  assert_accel_ok(accel_stream_copy_to_host(s, &out, b, (4 << 20) - 4, 4));
  assert_accel_ok(accel_buffer_free(b));
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.live_count, 1);  // still held by the commands
  assert_accel_status(accel_mempool_destroy(pool), ACCEL_ERROR_BUSY);
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(out, 0x77777777u);
  // The queue drops a command's references just after signalling its
  // completion: wait for that.
  uint64_t deadline = test_now_ns() + 5000000000ull;
  do {
    assert_accel_ok(accel_mempool_stats(pool, &st));
  } while ((st.live_count != 0 || st.bytes_in_use != 0) &&
           test_now_ns() < deadline);
  assert_int_equal(st.live_count, 0);
  assert_int_equal(st.bytes_in_use, 0);
  assert_accel_ok(accel_mempool_destroy(pool));
  accel_semaphore_release(gate);
  accel_stream_destroy(s);
}

// Statistics count bytes in use, live buffers, peaks and allocations, and
// return to the start once everything is freed.
static void test_device_stats_track_use_and_peak(void **state) {
  test_env_t *env = *state;
  accel_mem_stats_t before = dev_stats(env->device);
  accel_buffer_t *a = alloc_ok(env->device, 1000, NULL);
  accel_buffer_t *b = alloc_ok(env->device, 300000, NULL);
  accel_buffer_t *c = alloc_ok(env->device, 3 << 20, NULL);
  accel_mem_stats_t mid = dev_stats(env->device);
  assert_int_equal(mid.bytes_in_use - before.bytes_in_use,
                   1000 + 300000 + (3 << 20));
  assert_int_equal(mid.live_count - before.live_count, 3);
  assert_true(mid.alloc_count >= before.alloc_count + 3);
  assert_true(mid.bytes_reserved >= mid.bytes_in_use);
  assert_true(mid.fragmentation >= 1.0);
  accel_buffer_release(a);
  accel_buffer_release(b);
  accel_buffer_release(c);
  accel_mem_stats_t after = dev_stats(env->device);
  assert_int_equal(after.bytes_in_use, before.bytes_in_use);
  assert_int_equal(after.live_count, before.live_count);
  assert_true(after.peak_bytes_in_use >= 300000 + (3 << 20));
  accel_mem_stats_t tiny = {.struct_size = 4};
  assert_accel_status(accel_device_mem_stats(env->device, &tiny),
                      ACCEL_ERROR_INVALID_ARGUMENT);
}

// The report lists allocators and caller tags with their live bytes.
static void test_mem_report_lists_allocators_and_tags(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *a = alloc_ok(env->device, 4096, "kv-cache");
  accel_buffer_t *b = alloc_ok(env->device, 4096, "kv-cache");
  accel_buffer_t *c = alloc_ok(env->device, 100, "weights");
  size_t need = 0;
  assert_accel_ok(accel_mem_report(env->device, NULL, 0, &need));
  char *text = malloc(need + 1);
  size_t len = 0;
  assert_accel_ok(accel_mem_report(env->device, text, need + 1, &len));
  assert_int_equal(len, need);
  assert_non_null(strstr(text, "slab"));
  assert_non_null(strstr(text, "paged"));
  assert_non_null(strstr(text, "page-source"));
  char *kv = strstr(text, "kv-cache");
  assert_non_null(kv);
  long long bytes = 0, live = 0;
  assert_int_equal(sscanf(kv + strlen("kv-cache"), "%lld %lld", &bytes, &live),
                   2);
  assert_int_equal(bytes, 8192);
  assert_int_equal(live, 2);
  char small[16];
  assert_accel_ok(accel_mem_report(env->device, small, sizeof(small), &len));
  assert_int_equal(strlen(small), sizeof(small) - 1);
  assert_accel_status(accel_mem_report(env->device, NULL, 10, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  free(text);
  accel_buffer_release(a);
  accel_buffer_release(b);
  accel_buffer_release(c);
}

// A pool at its limit fails with a message giving the request and what is
// held, counts the failure, and works again once memory is freed.
static void test_pool_exhaustion_reports_and_recovers(void **state) {
  test_env_t *env = *state;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED,
                             .max_bytes = 8 << 20,
                             .release_threshold_bytes = UINT64_MAX};
  accel_mempool_t *pool = NULL;
  assert_accel_ok(accel_mempool_create(env->device, &pd, &pool));
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 4 << 20,
                           .pool = pool};
  accel_buffer_t *a = NULL, *b = NULL, *c = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &a));
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_accel_status(accel_buffer_alloc(env->device, &d, &c),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(accel_last_error(), "4194304 bytes"));
  assert_non_null(strstr(accel_last_error(), "limit"));
  assert_null(c);
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.failure_count, 1);
  accel_buffer_release(a);
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &c));
  accel_buffer_release(b);
  accel_buffer_release(c);
  assert_accel_ok(accel_mempool_destroy(pool));

  accel_mempool_desc_t sd = {.struct_size = sizeof(sd),
                             .type = ACCEL_MEMPOOL_TYPE_SLAB,
                             .max_bytes = 4 << 20};
  assert_accel_ok(accel_mempool_create(env->device, &sd, &pool));
  accel_buffer_t *blocks[65];
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = 65536,
                            .pool = pool};
  int n = 0;
  accel_status_t s = ACCEL_OK;
  while (n < 65 && (s = accel_buffer_alloc(env->device, &bd, &blocks[n])) ==
                       ACCEL_OK) {
    n++;
  }
  assert_int_equal(s, ACCEL_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(accel_last_error(), "chunks"));
  assert_int_equal(n, 64);  // two 2 MiB chunks of 32 blocks
  for (int i = 0; i < n; ++i) {
    accel_buffer_release(blocks[i]);
  }
  assert_accel_ok(accel_buffer_alloc(env->device, &bd, &blocks[0]));
  accel_buffer_release(blocks[0]);
  assert_accel_ok(accel_mempool_destroy(pool));
}

// Pool creation and destruction validate their arguments.
static void test_mempool_create_rejects_bad_descriptors(void **state) {
  test_env_t *env = *state;
  accel_mempool_t *pool = NULL;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd), .type = 9};
  assert_accel_status(accel_mempool_create(env->device, &pd, &pool),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  pd.type = ACCEL_MEMPOOL_TYPE_PAGED;
  pd.page_size_bytes = 1000;
  assert_accel_status(accel_mempool_create(env->device, &pd, &pool),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  pd.page_size_bytes = 0;
  pd.block_size_bytes = 4 << 20;
  assert_accel_status(accel_mempool_create(env->device, &pd, &pool),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  pd.type = ACCEL_MEMPOOL_TYPE_SLAB;
  pd.block_size_bytes = 4096;
  assert_accel_status(accel_mempool_create(env->device, &pd, &pool),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  pd.struct_size = 4;
  assert_accel_status(accel_mempool_create(env->device, &pd, &pool),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(pool);
  assert_accel_ok(accel_mempool_destroy(NULL));
  assert_accel_status(accel_mempool_trim(NULL, NULL, 0),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_mempool_trim(env->device, NULL, 0));
}

// Growing a buffer that is not paged is unsupported, with a message.
static void test_buffer_grow_of_slab_buffer_is_unsupported(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_ok(env->device, 512, NULL);
  assert_accel_status(accel_buffer_grow(b, 1024), ACCEL_ERROR_UNSUPPORTED);
  assert_accel_status(accel_buffer_grow(NULL, 1024),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_buffer_release(b);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

// Under AddressSanitizer, freed slab and block-pool memory is poisoned (a
// use after free is reported) and live memory is not.
static void test_freed_device_memory_is_poisoned_under_asan(void **state) {
#if defined(__SANITIZE_ADDRESS__)
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_ok(env->device, 3000, NULL);
  unsigned char *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, (void **)&p));
  assert_int_equal(__asan_address_is_poisoned(p), 0);
  assert_int_equal(__asan_address_is_poisoned(p + 2999), 0);
  accel_buffer_release(b);
  assert_int_not_equal(__asan_address_is_poisoned(p), 0);
  assert_int_not_equal(__asan_address_is_poisoned(p + 2999), 0);
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED,
                             .block_size_bytes = 65536,
                             .release_threshold_bytes = UINT64_MAX};
  accel_mempool_t *pool = NULL;
  assert_accel_ok(accel_mempool_create(env->device, &pd, &pool));
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 65536,
                           .pool = pool};
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_accel_ok(accel_buffer_host_pointer(b, (void **)&p));
  p[100] = 1;
  accel_buffer_release(b);
  assert_int_not_equal(__asan_address_is_poisoned(p + 100), 0);
  assert_accel_ok(accel_mempool_destroy(pool));
#else
  (void)state;
  skip();  // only meaningful in an AddressSanitizer build
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buffer_alloc_serves_every_size_aligned),
      cmocka_unit_test(test_buffer_alloc_honours_alignment),
      cmocka_unit_test(test_buffer_alloc_rejects_bad_arguments),
      cmocka_unit_test(test_buffer_alloc_accepts_old_descriptor),
      cmocka_unit_test(test_buffer_zero_flag_clears_reused_memory),
      cmocka_unit_test(test_buffer_double_free_is_detected),
      cmocka_unit_test(test_mem_free_rejects_foreign_interior_and_double),
      cmocka_unit_test(test_buffer_free_while_command_pending_is_deferred),
      cmocka_unit_test(test_device_stats_track_use_and_peak),
      cmocka_unit_test(test_mem_report_lists_allocators_and_tags),
      cmocka_unit_test(test_pool_exhaustion_reports_and_recovers),
      cmocka_unit_test(test_mempool_create_rejects_bad_descriptors),
      cmocka_unit_test(test_buffer_grow_of_slab_buffer_is_unsupported),
      cmocka_unit_test(test_freed_device_memory_is_poisoned_under_asan),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
