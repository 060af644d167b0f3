// The etcd store's wire format: base64 against RFC 4648's vectors and a
// random round trip (seed printed), and the checks of etcd's snapshot reply
// on the files of tests/data/cluster (also the fuzzer's seed corpus).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd_json.h"
#include "test_support.h"

static const char *k_prefix = "/accel/cluster/g/";

// RFC 4648 section 10 vectors encode and decode both ways.
static void test_b64_matches_rfc4648_vectors(void **state) {
  (void)state;
  const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                         "Zm9vYmFy"};
  for (int i = 0; i < 7; ++i) {
    char *e = accel_cluster_b64_encode(plain[i], strlen(plain[i]));
    assert_string_equal(e, coded[i]);
    size_t n = 0;
    char *d = accel_cluster_b64_decode(coded[i], &n);
    assert_int_equal(n, strlen(plain[i]));
    assert_memory_equal(d, plain[i], n);
    free(e);
    free(d);
  }
}

// Random bytes survive encode then decode; malformed text is refused.
static void test_b64_round_trips_random_and_refuses_malformed(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int t = 0; t < 200; ++t) {
    size_t n = test_rng_range(&rng, 0, 300);
    char *in = malloc(n + 1);
    for (size_t i = 0; i < n; ++i) {
      in[i] = (char)test_rng_next(&rng);
    }
    char *e = accel_cluster_b64_encode(in, n);
    size_t m = 0;
    char *d = accel_cluster_b64_decode(e, &m);
    assert_non_null(d);
    assert_int_equal(m, n);
    assert_memory_equal(d, in, n);
    free(in);
    free(e);
    free(d);
  }
  const char *bad[] = {"Zg=", "Z===", "Zg=a", "=Zga", "Zm9v!A==", "Zm=vYg=="};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    size_t m = 0;
    assert_null(accel_cluster_b64_decode(bad[i], &m));
  }
}

static accel_status_t parse_file(const char *name, accel_cluster_record_t *rec,
                                 accel_cluster_live_t *live) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", ACCEL_CLUSTER_DATA_DIR, name);
  json_object *reply = json_object_from_file(path);
  assert_non_null(reply);
  accel_status_t s = accel_cluster_etcd_parse_snapshot(reply, strlen(k_prefix),
                                                       rec, live);
  json_object_put(reply);
  return s;
}

// A well-formed reply gives the record (epoch, members, version) and the
// registered members with pid and host.
static void test_snapshot_reads_record_and_members(void **state) {
  (void)state;
  static accel_cluster_record_t rec;
  static accel_cluster_live_t live;
  assert_accel_ok(parse_file("snapshot_good.json", &rec, &live));
  assert_int_equal(rec.epoch, 3);
  assert_int_equal(rec.count, 2);
  assert_int_equal(rec.members[0], 0x2040a212550d350full);
  assert_int_equal(rec.members[1], 0x2040a212550d3511ull);
  assert_int_equal(rec.version, 7);
  assert_int_equal(live.count, 2);
  assert_int_equal(live.members[1].pid, 13);
  assert_string_equal(live.members[1].host, "b");
  assert_accel_ok(parse_file("snapshot_empty.json", &rec, &live));
  assert_int_equal(rec.epoch, 0);
  assert_int_equal(live.count, 0);
}

// A repeated member is refused; a malformed member list or key leaves those
// members out rather than inventing ids.
static void test_snapshot_refuses_or_skips_malformed_parts(void **state) {
  (void)state;
  static accel_cluster_record_t rec;
  static accel_cluster_live_t live;
  assert_accel_status(parse_file("snapshot_repeated_member.json", &rec, &live),
                      ACCEL_ERROR_FORMAT);
  assert_accel_ok(parse_file("snapshot_kvs_not_array.json", &rec, &live));
  assert_int_equal(live.count, 0);
  assert_accel_ok(parse_file("snapshot_bad_base64.json", &rec, &live));
  assert_int_equal(live.count, 1);
  assert_accel_status(accel_cluster_etcd_parse_snapshot(NULL, 0, &rec, &live),
                      ACCEL_ERROR_FORMAT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_b64_matches_rfc4648_vectors),
      cmocka_unit_test(test_b64_round_trips_random_and_refuses_malformed),
      cmocka_unit_test(test_snapshot_reads_record_and_members),
      cmocka_unit_test(test_snapshot_refuses_or_skips_malformed_parts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
