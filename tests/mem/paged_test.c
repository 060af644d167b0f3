// Paged pools: growth in place, fixed-size block pools, page reuse, trim,
// and clearing of pages that pass from one pool to another.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/driver_memory.h"
#include "core/runtime_impl.h"
#include "test_support.h"

static accel_mempool_t *paged_pool(accel_device_t *dev, uint64_t page,
                                   uint64_t block, uint64_t threshold) {
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED,
                             .page_size_bytes = page,
                             .block_size_bytes = block,
                             .release_threshold_bytes = threshold};
  accel_mempool_t *pool = NULL;
  assert_accel_ok(accel_mempool_create(dev, &pd, &pool));
  return pool;
}

static unsigned char *host(accel_buffer_t *b) {
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  return p;
}

// Sizes nothing can hold are refused and leave the buffer as it was: a grow
// to 2^64-1 (it returned OK and the buffer reported 2^64-1 bytes), a grow
// of a freed buffer, a max_size_bytes below size_bytes, and an alignment
// beyond 1 GiB (it failed as "mmap of 8 EiB failed") (issue 15).
static void test_paged_refuses_impossible_sizes_unchanged(void **state) {
  test_env_t *env = *state;
  accel_mempool_t *pool = paged_pool(env->device, 0, 0, UINT64_MAX);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 3 << 20,
                           .max_size_bytes = 8 << 20, .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  uint64_t addr = accel_buffer_address(b);
  assert_accel_status(accel_buffer_grow(b, UINT64_MAX),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(accel_last_error(), "keeps its 3145728 bytes"));
  assert_accel_status(accel_buffer_grow(b, (1ull << 56) + 1),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_int_equal(accel_buffer_size(b), 3 << 20);
  assert_int_equal(accel_buffer_address(b), addr);
  memset(host(b), 0x33, 3 << 20);  // still usable as it was
  assert_accel_ok(accel_buffer_free(b));
  assert_accel_status(accel_buffer_grow(b, 4 << 20),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "was freed"));
  d.max_size_bytes = (2 << 20);
  assert_accel_status(accel_buffer_alloc(env->device, &d, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "max_size_bytes 2097152 is below"));
  accel_buffer_desc_t a = {.struct_size = sizeof(a), .size_bytes = 4096,
                           .alignment = 1ull << 63};
  assert_accel_status(accel_buffer_alloc(env->device, &a, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "alignment 9223372036854775808"));
  a.alignment = 1ull << 30;  // the largest: honoured
  assert_accel_ok(accel_buffer_alloc(env->device, &a, &b));
  assert_int_equal(accel_buffer_address(b) % (1ull << 30), 0);
  assert_accel_ok(accel_buffer_free(b));
  accel_mempool_destroy(pool);
}

// A buffer grows in place: same address, old bytes kept, new bytes usable,
// up to its max size and past it while the range behind it is free.
static void test_paged_grow_keeps_address_and_contents(void **state) {
  test_env_t *env = *state;
  accel_mempool_t *pool = paged_pool(env->device, 0, 0, UINT64_MAX);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 3 << 20,
                           .max_size_bytes = 64 << 20, .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  uint64_t addr = accel_buffer_address(b);
  memset(host(b), 0x11, 3 << 20);
  for (uint64_t size = 5 << 20; size <= (64 << 20); size += 7 << 20) {
    assert_accel_ok(accel_buffer_grow(b, size));
    assert_int_equal(accel_buffer_address(b), addr);
    assert_int_equal(accel_buffer_size(b), size);
    host(b)[size - 1] = 0x22;
  }
  for (uint64_t i = 0; i < (3 << 20); i += 4096) {
    assert_int_equal(host(b)[i], 0x11);
  }
  assert_accel_ok(accel_buffer_grow(b, 1024));  // shrink request: no-op
  assert_int_equal(accel_buffer_size(b), 61 << 20);
  // Past max_size_bytes: the range behind is free in a fresh pool.
  assert_accel_ok(accel_buffer_grow(b, 80 << 20));
  assert_int_equal(accel_buffer_address(b), addr);
  // A neighbour right behind blocks further growth with a clear message.
  accel_buffer_desc_t nd = {.struct_size = sizeof(nd), .size_bytes = 2 << 20,
                            .pool = pool};
  accel_buffer_t *n = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &nd, &n));
  assert_int_equal(accel_buffer_address(n), addr + (80 << 20));
  assert_accel_status(accel_buffer_grow(b, 90 << 20),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(accel_last_error(), "max_size_bytes"));
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.bytes_in_use, (80 << 20) + (2 << 20));
  assert_int_equal(st.bytes_reserved, (80 << 20) + (2 << 20));
  accel_buffer_release(b);
  accel_buffer_release(n);
  assert_accel_ok(accel_mempool_destroy(pool));
}

// A block pool hands out fixed-size blocks carved from pages, reuses them,
// and rejects larger requests and growth.
static void test_block_pool_serves_fixed_blocks(void **state) {
  test_env_t *env = *state;
  accel_mempool_t *pool = paged_pool(env->device, 0, 512 << 10, UINT64_MAX);
  accel_buffer_desc_t d = {.struct_size = sizeof(d),
                           .size_bytes = 512 << 10, .pool = pool};
  accel_buffer_t *b[12];
  for (int i = 0; i < 12; ++i) {
    assert_accel_ok(accel_buffer_alloc(env->device, &d, &b[i]));
    memset(host(b[i]), i, 512 << 10);
  }
  for (int i = 0; i < 12; ++i) {
    for (int j = i + 1; j < 12; ++j) {
      uint64_t x = accel_buffer_address(b[i]), y = accel_buffer_address(b[j]);
      assert_true(x + (512 << 10) <= y || y + (512 << 10) <= x);
    }
    assert_int_equal(host(b[i])[(512 << 10) - 1], i);
  }
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.bytes_reserved, 3 * (2 << 20));  // 4 blocks a page
  assert_accel_status(accel_buffer_grow(b[0], 1 << 20),
                      ACCEL_ERROR_UNSUPPORTED);
  d.size_bytes = (512 << 10) + 1;
  accel_buffer_t *big = NULL;
  assert_accel_status(accel_buffer_alloc(env->device, &d, &big),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  uint64_t reused = accel_buffer_address(b[5]);
  accel_buffer_release(b[5]);
  d.size_bytes = 1000;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b[5]));
  assert_int_equal(accel_buffer_address(b[5]), reused);
  for (int i = 0; i < 12; ++i) {
    accel_buffer_release(b[i]);
  }
  assert_accel_ok(accel_mempool_trim(NULL, pool, 0));
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.bytes_reserved, 0);
  assert_accel_ok(accel_mempool_destroy(pool));
}

// Freed pages are reused by the next buffer without new reservations, and
// trim returns them.
static void test_paged_reuses_freed_pages_and_trims(void **state) {
  test_env_t *env = *state;
  accel_mempool_t *pool = paged_pool(env->device, 0, 0, UINT64_MAX);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 8 << 20,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  accel_buffer_release(b);
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.bytes_reserved, 8 << 20);
  assert_int_equal(st.bytes_in_use, 0);
  d.size_bytes = 6 << 20;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.bytes_reserved, 8 << 20);
  assert_int_equal(st.peak_bytes_reserved, 8 << 20);
  accel_buffer_release(b);
  assert_accel_ok(accel_mempool_trim(NULL, pool, 2 << 20));
  assert_accel_ok(accel_mempool_stats(pool, &st));
  assert_int_equal(st.bytes_reserved, 2 << 20);
  assert_accel_ok(accel_mempool_destroy(pool));
}

// Pages that leave one pool and enter another arrive zeroed: a second
// tenant never reads the first one's bytes.
static void test_pages_passing_between_pools_are_zeroed(void **state) {
  test_env_t *env = *state;
  for (int round = 0; round < 2; ++round) {
    // Round 0: 2 MiB pages (through the shared page source); round 1: other
    // page sizes (through the driver).
    uint64_t page = round == 0 ? 0 : 1 << 20;
    accel_mempool_t *a = paged_pool(env->device, page, 0, 0);
    accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 16 << 20,
                             .pool = a};
    accel_buffer_t *b = NULL;
    assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
    memset(host(b), 0xee, 16 << 20);
    accel_buffer_release(b);
    assert_accel_ok(accel_mempool_destroy(a));
    accel_mempool_t *p2 = paged_pool(env->device, page, 0, 0);
    d.pool = p2;
    assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
    const unsigned char *h = host(b);
    for (uint64_t i = 0; i < (16 << 20); i += 512) {
      assert_int_equal(h[i], 0);
    }
    accel_buffer_release(b);
    assert_accel_ok(accel_mempool_destroy(p2));
  }
  // Slab chunks: fill, free, trim (chunks go back to the page source), and
  // a paged pool taking those pages sees zeros.
  accel_mempool_desc_t sd = {.struct_size = sizeof(sd),
                             .type = ACCEL_MEMPOOL_TYPE_SLAB};
  accel_mempool_t *slab = NULL;
  assert_accel_ok(accel_mempool_create(env->device, &sd, &slab));
  accel_buffer_t *blocks[64];
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = 65536,
                            .pool = slab};
  for (int i = 0; i < 64; ++i) {
    assert_accel_ok(accel_buffer_alloc(env->device, &bd, &blocks[i]));
    memset(host(blocks[i]), 0xcd, 65536);
  }
  for (int i = 0; i < 64; ++i) {
    accel_buffer_release(blocks[i]);
  }
  assert_accel_ok(accel_mempool_destroy(slab));
  accel_mempool_t *p3 = paged_pool(env->device, 0, 0, 0);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 4 << 20,
                           .pool = p3};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  for (uint64_t i = 0; i < (4 << 20); i += 256) {
    assert_int_equal(host(b)[i], 0);
  }
  accel_buffer_release(b);
  assert_accel_ok(accel_mempool_destroy(p3));
}

// The host backend's phys_clear (what a paged pool's pages of other sizes
// go through before they return to the driver): every byte of every
// mapping reads zero afterwards, touched or not, and the memory stays
// usable.
static void test_host_phys_clear_zeroes_every_mapping(void **state) {
  test_env_t *env = *state;
  accel_device_t *dev = env->device;
  const accel_drv_memory_ops_t *m = dev->driver->memory;
  assert_non_null(m->phys_clear);
  const uint64_t size = 1 << 20;
  accel_drv_phys_t *phys = NULL;
  assert_accel_ok(m->phys_create(dev->drv, size, 0, &phys));
  uint64_t va[2];
  for (int i = 0; i < 2; ++i) {
    assert_accel_ok(m->va_reserve(dev->drv, size, 0, &va[i]));
    assert_accel_ok(m->phys_map(dev->drv, va[i], phys, 0, size));
  }
  unsigned char *a = m->host_pointer(dev->drv, va[0]);
  unsigned char *b = m->host_pointer(dev->drv, va[1]);
  memset(a, 0xab, size / 2);  // the second half never touched
  assert_int_equal(b[size / 2 - 1], 0xab);
  assert_accel_ok(m->phys_clear(phys));
  for (uint64_t i = 0; i < size; i += 64) {
    assert_int_equal(a[i], 0);
    assert_int_equal(b[i], 0);
  }
  a[7] = 3;
  assert_int_equal(b[7], 3);
  for (int i = 0; i < 2; ++i) {
    m->phys_unmap(dev->drv, va[i], size);
    m->va_release(dev->drv, va[i], size);
  }
  m->phys_release(phys);
}

// A pool with live buffers refuses destruction; default allocators cannot
// be destroyed as pools.
static void test_mempool_destroy_refuses_live_buffers(void **state) {
  test_env_t *env = *state;
  accel_mempool_t *pool = paged_pool(env->device, 0, 0, 0);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 1 << 20,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_accel_status(accel_mempool_destroy(pool), ACCEL_ERROR_BUSY);
  assert_non_null(strstr(accel_last_error(), "1 live"));
  accel_buffer_release(b);
  assert_accel_ok(accel_mempool_destroy(pool));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paged_refuses_impossible_sizes_unchanged),
      cmocka_unit_test(test_paged_grow_keeps_address_and_contents),
      cmocka_unit_test(test_block_pool_serves_fixed_blocks),
      cmocka_unit_test(test_paged_reuses_freed_pages_and_trims),
      cmocka_unit_test(test_pages_passing_between_pools_are_zeroed),
      cmocka_unit_test(test_host_phys_clear_zeroes_every_mapping),
      cmocka_unit_test(test_mempool_destroy_refuses_live_buffers),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
