// The .axe corpus (tests/data/abi, listed in expected.txt): every malicious
// file is rejected by both the validator and the loader with the expected
// status and a message naming the broken field; well-formed files pass.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/axe_format.h"
#include "test_support.h"

typedef struct entry {
  char file[128];
  char status[64];
  char substring[256];
} entry_t;

static char g_dir[4096];
static entry_t g_entries[256];
static int g_count;

static void load_expected(void) {
  const char *dir = getenv("ACCEL_TEST_DATA");
  assert_non_null(dir);
  snprintf(g_dir, sizeof(g_dir), "%s", dir);
  char path[4200];
  snprintf(path, sizeof(path), "%s/expected.txt", g_dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  g_count = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (line[0] == '#' || line[0] == '\n') {
      continue;
    }
    entry_t *e = &g_entries[g_count++];
    int used = 0;
    assert_int_equal(sscanf(line, "%127s %63s %n", e->file, e->status, &used),
                     2);
    snprintf(e->substring, sizeof(e->substring), "%s", line + used);
    e->substring[strcspn(e->substring, "\n")] = '\0';
  }
  fclose(f);
  assert_true(g_count >= 40);
}

// Reads a corpus file into a 64-byte aligned buffer.
static void *read_file(const char *name, uint64_t *out_size) {
  char path[4400];
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *data = aligned_alloc(64, (size_t)(n + 64) / 64 * 64);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_size = (uint64_t)n;
  return data;
}

static void check_result(const entry_t *e, accel_status_t st, const char *how) {
  if (strcmp(accel_status_name(st), e->status) != 0) {
    print_error("%s (%s): got %s (%s), expected %s\n", e->file, how,
                accel_status_name(st), accel_last_error(), e->status);
    fail();
  }
  if (st != ACCEL_OK && strstr(accel_last_error(), e->substring) == NULL) {
    print_error("%s (%s): message \"%s\" lacks \"%s\"\n", e->file, how,
                accel_last_error(), e->substring);
    fail();
  }
}

// Every corpus file gets the status and message expected.txt gives it from
// the validator alone.
static void test_corpus_verify_gives_expected_status_and_message(void **state) {
  (void)state;
  for (int i = 0; i < g_count; ++i) {
    uint64_t size;
    void *data = read_file(g_entries[i].file, &size);
    check_result(&g_entries[i], accel_executable_verify(data, size, 0),
                 "verify");
    free(data);
  }
}

// The loader rejects the malicious files the same way before it touches
// code or weights.
static void test_corpus_load_rejects_malicious_files(void **state) {
  test_env_t *env = *state;
  for (int i = 0; i < g_count; ++i) {
    if (strcmp(g_entries[i].status, "ACCEL_OK") == 0) {
      continue;
    }
    uint64_t size;
    void *data = read_file(g_entries[i].file, &size);
    accel_executable_t *exe = (accel_executable_t *)0x1;
    accel_status_t st = size == 0 ? accel_executable_verify(data, 0, 0)
                                  : accel_executable_load_memory(
                                        env->runtime, env->device, data, size,
                                        0, &exe);
    check_result(&g_entries[i], st, "load");
    assert_ptr_equal(exe, (accel_executable_t *)0x1);  // untouched
    free(data);
  }
}

// Loading from a file path reports the path along with the field.
static void test_corpus_load_file_names_path_and_field(void **state) {
  test_env_t *env = *state;
  char path[4400];
  snprintf(path, sizeof(path), "%s/bad_magic.axe", g_dir);
  accel_executable_t *exe = NULL;
  assert_accel_status(accel_executable_load_file(env->runtime, env->device,
                                                 path, 0, &exe),
                      ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "bad_magic.axe"));
  assert_non_null(strstr(accel_last_error(), "header field magic"));
  assert_null(exe);
}

// Hash checking can be skipped for trusted files, but structure never is.
static void test_corpus_skip_hashes_skips_only_hashes(void **state) {
  (void)state;
  uint64_t size;
  void *data = read_file("wrong_section_hash.axe", &size);
  assert_accel_status(accel_executable_verify(data, size, 0),
                      ACCEL_ERROR_FORMAT);
  assert_accel_ok(
      accel_executable_verify(data, size, ACCEL_EXECUTABLE_LOAD_SKIP_HASHES));
  free(data);
  data = read_file("overlapping_sections.axe", &size);
  assert_accel_status(
      accel_executable_verify(data, size, ACCEL_EXECUTABLE_LOAD_SKIP_HASHES),
      ACCEL_ERROR_FORMAT);
  free(data);
}

// Every prefix of a valid file is rejected without reading past its end.
static void test_corpus_every_truncation_is_rejected(void **state) {
  (void)state;
  uint64_t size;
  uint8_t *data = read_file("valid_base.axe", &size);
  for (uint64_t n = 0; n < size; n += (n < 1024 ? 1 : 97)) {
    void *copy = aligned_alloc(64, (size_t)(n + 64) / 64 * 64);
    memcpy(copy, data, (size_t)n);
    assert_accel_status(accel_executable_verify(copy, n, 0),
                        ACCEL_ERROR_FORMAT);
    free(copy);
  }
  free(data);
}

// Random single-byte corruptions: a byte covered by the header, the section
// table or a section is always rejected (by a check or by a hash); a byte of
// the zero padding between sections is outside every hash and is accepted.
static void test_corpus_random_corruption_is_handled(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint64_t size;
  uint8_t *data = read_file("valid_base.axe", &size);
  uint8_t *copy = aligned_alloc(64, (size_t)(size + 64) / 64 * 64);
  uint8_t *covered = calloc(1, size);
  const axe_header_t *h = (const axe_header_t *)data;
  const axe_section_t *t =
      (const axe_section_t *)(data + h->section_table_offset);
  memset(covered, 1, h->section_table_offset +
                         (uint64_t)h->section_count * AXE_SECTION_ENTRY_SIZE);
  for (uint32_t i = 0; i < h->section_count; ++i) {
    memset(covered + t[i].offset, 1, t[i].size);
  }
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    memcpy(copy, data, size);
    uint64_t at = test_rng_range(&rng, 0, size - 1);
    copy[at] ^= (uint8_t)test_rng_range(&rng, 1, 255);
    accel_status_t st = accel_executable_verify(copy, size, 0);
    if (covered[at]) {
      if (st != ACCEL_ERROR_FORMAT && st != ACCEL_ERROR_VERSION) {
        print_error("corrupting byte %llu was accepted\n",
                    (unsigned long long)at);
        fail();
      }
      rejected++;
    } else {
      assert_accel_ok(st);
    }
  }
  assert_true(rejected > 100);
  free(covered);
  free(copy);
  free(data);
}

static int group_setup(void **state) {
  load_expected();
  return test_env_setup(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_verify_gives_expected_status_and_message),
      cmocka_unit_test(test_corpus_load_rejects_malicious_files),
      cmocka_unit_test(test_corpus_load_file_names_path_and_field),
      cmocka_unit_test(test_corpus_skip_hashes_skips_only_hashes),
      cmocka_unit_test(test_corpus_every_truncation_is_rejected),
      cmocka_unit_test(test_corpus_random_corruption_is_handled),
  };
  return cmocka_run_group_tests(tests, group_setup, test_env_teardown);
}
