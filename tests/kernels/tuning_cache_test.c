// The tuning cache (lib/abi/tuning_cache.c, tuning.c): the file is parsed
// with every field checked and refused with the line named, written and
// read back unchanged; an executable takes the entries of its device's
// fingerprint, its kernels' versions and declared values only (stale ones
// are ignored), launches apply them to the constants and grid, and
// ACCEL_TUNING=off ignores the cache.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/tuning.h"
#include "accel/accel.h"
#include "kernel_params.h"

static char g_path[128];

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void expect_refused(const char *text, accel_status_t want,
                           const char *needle) {
  accel_tuning_cache_t c;
  accel_status_t st = accel_tuning_cache_parse(text, strlen(text), &c);
  accel_tuning_cache_fini(&c);
  if (st != want || strstr(accel_last_error(), needle) == NULL) {
    fail_msg("\"%s\": got %s \"%s\", want %s with \"%s\"", text,
             accel_status_name(st), accel_last_error(),
             accel_status_name(want), needle);
  }
}

// Every malformed line is refused with its line number and the field.
static void test_parse_refuses_malformed_files(void **state) {
  (void)state;
  expect_refused("", ACCEL_ERROR_FORMAT, "empty file");
  expect_refused("accel-tuning 1\n", ACCEL_ERROR_FORMAT, "line 1");
  expect_refused("accel-tuning-cache 2\n", ACCEL_ERROR_VERSION, "version 2");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000\n", ACCEL_ERROR_FORMAT,
                 "line 2: bad fields");
  expect_refused("accel-tuning-cache 1\nf/p k 1 00000000 a=1\n",
                 ACCEL_ERROR_FORMAT, "bad fingerprint");
  expect_refused("accel-tuning-cache 1\nfp k x1 00000000 a=1\n",
                 ACCEL_ERROR_FORMAT, "bad version");
  expect_refused("accel-tuning-cache 1\n\nfp k 1 000000 a=1\n",
                 ACCEL_ERROR_FORMAT, "line 3: bad constants");
  expect_refused("accel-tuning-cache 1\nfp k 1 0000000G a=1\n",
                 ACCEL_ERROR_FORMAT, "bad constants");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=0\n",
                 ACCEL_ERROR_FORMAT, "bad values");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=1,a=2\n",
                 ACCEL_ERROR_FORMAT, "bad values");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=1,\n",
                 ACCEL_ERROR_FORMAT, "bad values");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 A=1\n",
                 ACCEL_ERROR_FORMAT, "bad values");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=4294967296\n",
                 ACCEL_ERROR_FORMAT, "bad values");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=1 ratio=-1\n",
                 ACCEL_ERROR_FORMAT, "bad ratio");
  // Below what four decimals write (the fuzzer's find: it was written as
  // 0.0000, which did not read back).
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=1 "
                 "ratio=0.0000000002\n", ACCEL_ERROR_FORMAT, "bad ratio");
  expect_refused("accel-tuning-cache 1\nfp k 1 00000000 a=1 ratio=1 x\n",
                 ACCEL_ERROR_FORMAT, "bad fields");
  static char longline[8192];
  memset(longline, 'a', sizeof(longline) - 1);
  memcpy(longline, "accel-tuning-cache 1\n", 21);
  expect_refused(longline, ACCEL_ERROR_FORMAT, "longer than");
  const char nul[] = "accel-tuning-cache 1\nfp k 1 00000000 a=1\0\n";
  accel_tuning_cache_t c;
  assert_int_equal(accel_tuning_cache_parse(nul, sizeof(nul) - 1, &c),
                   ACCEL_ERROR_FORMAT);
  accel_tuning_cache_fini(&c);
}

// A file parses into its entries (a repeated key keeps the last), is
// written and read back the same, and a missing file is an empty cache.
static void test_parse_write_read_round_trip(void **state) {
  (void)state;
  const char *text =
      "accel-tuning-cache 1\n# comment\n\n"
      "host-1 qmatmul_int8 1 0100000002000000 tile_n=32,workgroups=4 "
      "ratio=0.75\n"
      "host-1 qmatmul_int8 1 0100000003000000 workgroups=2\n"
      "host-1 qmatmul_int8 1 0100000002000000 tile_n=64\n";
  accel_tuning_cache_t c;
  assert_int_equal(accel_tuning_cache_parse(text, strlen(text), &c), ACCEL_OK);
  assert_int_equal(c.count, 2);
  assert_string_equal(c.entries[0].kernel, "qmatmul_int8");
  assert_int_equal(c.entries[0].constants_size, 8);
  assert_int_equal(c.entries[0].value_count, 1);  // replaced by the last
  assert_int_equal(c.entries[0].values[0], 64);
  assert_int_equal(c.entries[1].values[0], 2);
  assert_int_equal(accel_tuning_cache_write(g_path, &c), ACCEL_OK);
  accel_tuning_cache_t d;
  assert_int_equal(accel_tuning_cache_read(g_path, &d), ACCEL_OK);
  assert_int_equal(d.count, c.count);
  for (uint32_t i = 0; i < c.count; ++i) {
    assert_memory_equal(&c.entries[i], &d.entries[i], sizeof(c.entries[i]));
  }
  accel_tuning_cache_fini(&c);
  accel_tuning_cache_fini(&d);
  // The range's ends read back after "%.4f" (999999.99999 is written as
  // 1000000.0000).
  const char *ends =
      "accel-tuning-cache 1\n"
      "host-1 k 1 00000000 a=1 ratio=0.0001\n"
      "host-1 k 1 01000000 a=1 ratio=999999.99999\n";
  assert_int_equal(accel_tuning_cache_parse(ends, strlen(ends), &c), ACCEL_OK);
  assert_int_equal(accel_tuning_cache_write(g_path, &c), ACCEL_OK);
  assert_int_equal(accel_tuning_cache_read(g_path, &d), ACCEL_OK);
  assert_int_equal(d.count, 2);
  accel_tuning_cache_fini(&c);
  accel_tuning_cache_fini(&d);
  unlink(g_path);
  assert_int_equal(accel_tuning_cache_read(g_path, &d), ACCEL_OK);
  assert_int_equal(d.count, 0);
  accel_tuning_cache_fini(&d);
}

typedef struct loaded {
  accel_runtime_t *rt;
  accel_device_t *dev;
  accel_executable_t *exe;
  accel_kernel_t *qmm;
} loaded_t;

static void load(loaded_t *l) {
  assert_int_equal(accel_runtime_create(NULL, &l->rt), ACCEL_OK);
  assert_int_equal(accel_device_get(l->rt, 0, &l->dev), ACCEL_OK);
  assert_int_equal(accel_executable_load_file(
                       l->rt, l->dev, getenv("ACCEL_TEST_REFERENCE_AXE"), 0,
                       &l->exe),
                   ACCEL_OK);
  assert_int_equal(accel_executable_kernel(l->exe, "qmatmul_int8", &l->qmm),
                   ACCEL_OK);
}

static void unload(loaded_t *l) {
  accel_executable_release(l->exe);
  accel_runtime_destroy(l->rt);
}

// Writes a cache with the entry |values| for qmatmul_int8 at |c| (key made
// for |fingerprint| and |version|) plus the stale entries of |stale|.
static void add_entry(accel_tuning_cache_t *cache, const char *fingerprint,
                      const accel_kernel_t *k, uint32_t version,
                      const accel_kp_qmatmul_constants_t *c,
                      const char *names, const uint32_t *values,
                      uint32_t count) {
  accel_tuning_entry_t e;
  assert_int_equal(accel_tuning_key(fingerprint, "qmatmul_int8", k->meta, c,
                                    sizeof(*c), &e),
                   ACCEL_OK);
  e.version = version;
  const char *n = names;
  for (uint32_t i = 0; i < count; ++i) {
    size_t len = strcspn(n, ",");
    memcpy(e.names[i], n, len);
    e.names[i][len] = '\0';
    e.values[i] = values[i];
    n += len + (n[len] == ',');
  }
  e.value_count = count;
  assert_int_equal(accel_tuning_cache_put(cache, &e), ACCEL_OK);
}

static accel_kernel_dispatch_t dispatch_of(const accel_kp_qmatmul_constants_t *c) {
  return (accel_kernel_dispatch_t){.struct_size = sizeof(accel_kernel_dispatch_t),
                                   .workgroup_count = {5, 1, 1},
                                   .constants_size = sizeof(*c),
                                   .constants = c};
}

// An executable takes the entry for its device, kernel version and declared
// values; the launch's tile_n (0 = default) and grid become the tuned ones,
// a tile_n the caller chose stays, and other shapes are untouched. Entries
// of another fingerprint, version or with a value the kernel does not
// declare are stale and ignored; ACCEL_TUNING=off ignores the cache.
static void test_executable_applies_fresh_entries_only(void **state) {
  (void)state;
  loaded_t l;
  load(&l);
  assert_null(l.qmm->tuning);  // no cache file yet
  char fp[ACCEL_TUNING_MAX_TOKEN + 1];
  accel_tuning_fingerprint(l.dev, fp);
  assert_non_null(strstr(fp, "host-"));
  accel_kp_qmatmul_constants_t tuned = {.m = 1, .n = 1024, .k = 1024};
  accel_kp_qmatmul_constants_t stale_fp = {.m = 1, .n = 256, .k = 1024};
  accel_kp_qmatmul_constants_t stale_ver = {.m = 1, .n = 2816, .k = 1024};
  accel_kp_qmatmul_constants_t stale_val = {.m = 1, .n = 1024, .k = 2816};
  accel_tuning_cache_t cache = {0};
  add_entry(&cache, fp, l.qmm, 1, &tuned, "tile_n,workgroups",
            (const uint32_t[]){32, 2}, 2);
  add_entry(&cache, "host-0000000000000000", l.qmm, 1, &stale_fp,
            "workgroups", (const uint32_t[]){2}, 1);
  add_entry(&cache, fp, l.qmm, 99, &stale_ver, "workgroups",
            (const uint32_t[]){2}, 1);
  add_entry(&cache, fp, l.qmm, 1, &stale_val, "tile_n",
            (const uint32_t[]){17}, 1);
  assert_int_equal(accel_tuning_cache_write(g_path, &cache), ACCEL_OK);
  accel_tuning_cache_fini(&cache);
  unload(&l);

  load(&l);
  assert_non_null(l.qmm->tuning);
  accel_kernel_dispatch_t in = dispatch_of(&tuned), out;
  uint8_t buf[ACCEL_TUNING_MAX_CONSTANTS];
  assert_true(accel_tuning_apply(l.qmm, &in, &out, buf));
  const accel_kp_qmatmul_constants_t *oc = out.constants;
  assert_int_equal(oc->tile_n, 32);
  assert_int_equal(out.workgroup_count[0], 2);
  assert_int_equal(tuned.tile_n, 0);  // the caller's constants untouched
  accel_kp_qmatmul_constants_t chosen = tuned;
  chosen.tile_n = 128;
  in = dispatch_of(&chosen);
  assert_true(accel_tuning_apply(l.qmm, &in, &out, buf));
  oc = out.constants;
  assert_int_equal(oc->tile_n, 128);
  const accel_kp_qmatmul_constants_t *others[] = {&stale_fp, &stale_ver,
                                                  &stale_val};
  for (int i = 0; i < 3; ++i) {
    in = dispatch_of(others[i]);
    assert_false(accel_tuning_apply(l.qmm, &in, &out, buf));
  }
  unload(&l);

  setenv("ACCEL_TUNING", "off", 1);
  load(&l);
  assert_null(l.qmm->tuning);
  unload(&l);
  unsetenv("ACCEL_TUNING");

  // A broken cache is ignored (with a line on stderr), never fatal.
  write_text(g_path, "accel-tuning-cache 1\ngarbage\n");
  load(&l);
  assert_null(l.qmm->tuning);
  unload(&l);
  unlink(g_path);
}

int main(void) {
  snprintf(g_path, sizeof(g_path), "/tmp/accel-tuning-cache-test-%ld/cache",
           (long)getpid());
  setenv("ACCEL_TUNING_CACHE", g_path, 1);
  unsetenv("ACCEL_TUNING");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_refuses_malformed_files),
      cmocka_unit_test(test_parse_write_read_round_trip),
      cmocka_unit_test(test_executable_applies_fresh_entries_only),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  char dir[128];
  snprintf(dir, sizeof(dir), "/tmp/accel-tuning-cache-test-%ld",
           (long)getpid());
  rmdir(dir);
  return r;
}
