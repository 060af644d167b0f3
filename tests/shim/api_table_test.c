// The C shim's table: version rules of accel_get_api, every entry present
// and equal to the function of its name, and the table covering every
// exported function (lib/accel.symbols).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#define NAME_(fn) #fn,
static const char *const k_names[] = {ACCEL_API_ENTRIES(NAME_)};
#define COUNT (sizeof(k_names) / sizeof(k_names[0]))

// The library's own version gets a table that says so.
static void test_get_api_returns_table_of_library_version(void **state) {
  (void)state;
  const accel_api_t *api =
      accel_get_api(ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR);
  assert_non_null(api);
  assert_int_equal(api->struct_size, sizeof(accel_api_t));
  assert_int_equal(api->api_version, accel_api_version());
  assert_true(ACCEL_API_TABLE_HAS(api, accel_status_name));
  assert_true(ACCEL_API_TABLE_HAS(api, accel_buffer_from_dlpack_legacy));
}

// Every older minor of the major gets the same table (a consumer compiled
// against an older header reads its prefix).
static void test_get_api_accepts_every_older_minor(void **state) {
  (void)state;
  const accel_api_t *api =
      accel_get_api(ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR);
  for (uint32_t m = 0; m <= ACCEL_API_VERSION_MINOR; ++m) {
    assert_ptr_equal(accel_get_api(ACCEL_API_VERSION_MAJOR, m), api);
  }
}

// A newer minor or another major gets NULL and a message naming both.
static void test_get_api_refuses_newer_minor_and_other_major(void **state) {
  (void)state;
  assert_null(accel_get_api(ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR + 1));
  char want[64];
  snprintf(want, sizeof(want), "version %d.%d was asked for",
           ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR + 1);
  assert_non_null(strstr(accel_last_error(), want));
  assert_null(accel_get_api(ACCEL_API_VERSION_MAJOR + 1, 0));
  assert_non_null(strstr(accel_last_error(), "this library implements"));
  assert_null(accel_get_api(UINT32_MAX, UINT32_MAX));
}

// Each entry is non-NULL and is the function of the same name.
static void test_table_entries_are_the_functions_of_their_names(void **state) {
  (void)state;
  const accel_api_t *api = accel_get_api(ACCEL_API_VERSION_MAJOR, 0);
  void (*const *entries)(void) =
      (void (*const *)(void))((const char *)api + 8);
  uint32_t n = (api->struct_size - 8) / sizeof(void (*)(void));
  assert_int_equal(n, COUNT);
  for (uint32_t i = 0; i < n; ++i) {
    if (entries[i] == NULL) {
      fail_msg("entry %u (%s) is NULL", i, k_names[i]);
    }
  }
#define SAME_(fn) assert_true((void (*)(void))api->fn == (void (*)(void))fn);
  ACCEL_API_ENTRIES(SAME_)
}

// A call through the table behaves as the direct call, errors included.
static void test_call_through_table_sets_same_error(void **state) {
  test_env_t *env = *state;
  const accel_api_t *api = accel_get_api(ACCEL_API_VERSION_MAJOR, 0);
  accel_buffer_t *b = NULL;
  assert_int_equal(api->accel_buffer_alloc(env->device, NULL, &b),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  char via_table[512];
  snprintf(via_table, sizeof(via_table), "%s", api->accel_last_error());
  assert_int_equal(accel_buffer_alloc(env->device, NULL, &b),
                   ACCEL_ERROR_INVALID_ARGUMENT);
  assert_string_equal(via_table, accel_last_error());
  assert_null(b);
}

// Every exported function but accel_get_api has an entry, and every entry
// is exported.
static void test_table_covers_every_exported_function(void **state) {
  (void)state;
  const char *path = getenv("ACCEL_SYMBOLS");
  assert_non_null(path);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  uint32_t exported = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '#' || line[0] == '\0' ||
        strcmp(line, "accel_get_api") == 0) {
      continue;
    }
    ++exported;
    bool found = false;
    for (size_t i = 0; i < COUNT && !found; ++i) {
      found = strcmp(k_names[i], line) == 0;
    }
    if (!found) {
      fail_msg("exported %s has no entry in accel_api_t (append it)", line);
    }
  }
  fclose(f);
  assert_int_equal(exported, COUNT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_api_returns_table_of_library_version),
      cmocka_unit_test(test_get_api_accepts_every_older_minor),
      cmocka_unit_test(test_get_api_refuses_newer_minor_and_other_major),
      cmocka_unit_test(test_table_entries_are_the_functions_of_their_names),
      cmocka_unit_test(test_call_through_table_sets_same_error),
      cmocka_unit_test(test_table_covers_every_exported_function),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
