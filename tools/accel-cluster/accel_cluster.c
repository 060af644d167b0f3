// accel-cluster: look at and take part in cluster groups (include/accel/cluster.h).
//   accel-cluster status --name G [--store etcd --endpoints URLS] [--json]
//       the group's epoch, members with rank, health and heartbeat age, and
//       the joiners waiting for the next epoch
//   accel-cluster join --name G [--min N --max N] [--duration-ms MS]
//       joins as a rank and prints one JSON line per event (stop, resume,
//       failed) with CLOCK_MONOTONIC times: for scripts and tests
//   accel-cluster remove --name G
//       removes the group's record from its store
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "accel/accel.h"
#include "tool_cli.h"

static const accel_tool_option_t k_options[] = {
    {"--name", "NAME", 0, "the group's name (required)"},
    {"--store", "KIND", 0, "membership store: shm (default) or etcd"},
    {"--endpoints", "URLS", 0,
     "etcd client URLs, comma-separated (default http://127.0.0.1:2379)"},
    {"--json", NULL, 0, "status: print one JSON object"},
    {"--min", "N", 0, "join: fewest ranks of an epoch (default 1)"},
    {"--max", "N", 0, "join: most ranks of an epoch (default --min)"},
    {"--interval-ms", "MS", 0, "heartbeat period (default: the store's)"},
    {"--timeout-ms", "MS", 0,
     "heartbeat timeout after which a rank is failed (default: the store's)"},
    {"--duration-ms", "MS", 0,
     "join: leave after this long (default: run until killed or failed)"},
    {"--fail-after-ms", "MS", 0,
     "join: report a failure of this rank (as a lost device would) after "
     "this long"},
};
enum { OPT_NAME, OPT_STORE, OPT_ENDPOINTS, OPT_JSON, OPT_MIN, OPT_MAX,
       OPT_INTERVAL, OPT_TIMEOUT, OPT_DURATION, OPT_FAIL_AFTER };

static const accel_tool_spec_t k_spec = {
    .name = "accel-cluster",
    .synopsis = "status|join|remove --name NAME [--store shm|etcd] "
                "[--endpoints URLS] [--json] [--min N] [--max N] "
                "[--interval-ms MS] [--timeout-ms MS] [--duration-ms MS] "
                "[--fail-after-ms MS]",
    .description = "Shows a cluster group's epoch, members, health and "
                   "heartbeat ages (status), joins a group as a rank and "
                   "prints its events as JSON lines (join), or removes a "
                   "group's record (remove).",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 1,
    .max_positional = 1,
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int parse_u64(const char *text, const char *what, uint64_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (text[0] == '\0' || text[0] == '-' || *end != '\0') {
    return accel_tool_usage_error(&k_spec, "%s \"%s\": expected a number", what,
                                  text);
  }
  *out = v;
  return 0;
}

static int fill_options(const accel_tool_args_t *a, accel_cluster_options_t *o) {
  accel_cluster_options_init(o);
  o->name = a->values[OPT_NAME];
  if (o->name == NULL) {
    return accel_tool_usage_error(&k_spec, "--name is required");
  }
  const char *store = a->values[OPT_STORE];
  if (store != NULL && strcasecmp(store, "etcd") == 0) {
    o->store = ACCEL_CLUSTER_STORE_ETCD;
  } else if (store != NULL && strcasecmp(store, "shm") != 0) {
    return accel_tool_usage_error(&k_spec, "--store \"%s\": expected shm or etcd",
                                  store);
  }
  o->etcd_endpoints = a->values[OPT_ENDPOINTS];
  uint64_t v = 0;
  int rc = 0;
  if (a->values[OPT_MIN] != NULL) {
    if ((rc = parse_u64(a->values[OPT_MIN], "--min", &v)) != 0) return rc;
    o->min_size = (uint32_t)v;
  }
  o->max_size = o->min_size;
  if (a->values[OPT_MAX] != NULL) {
    if ((rc = parse_u64(a->values[OPT_MAX], "--max", &v)) != 0) return rc;
    o->max_size = (uint32_t)v;
  }
  if (a->values[OPT_INTERVAL] != NULL) {
    if ((rc = parse_u64(a->values[OPT_INTERVAL], "--interval-ms", &v)) != 0) return rc;
    o->heartbeat_interval_ns = v * 1000000ull;
  }
  if (a->values[OPT_TIMEOUT] != NULL) {
    if ((rc = parse_u64(a->values[OPT_TIMEOUT], "--timeout-ms", &v)) != 0) return rc;
    o->heartbeat_timeout_ns = v * 1000000ull;
  }
  return 0;
}

static const char *k_health[] = {"alive", "late", "failed"};

static void print_age(char *out, size_t size, uint64_t age) {
  if (age == UINT64_MAX) {
    snprintf(out, size, "-");
  } else {
    snprintf(out, size, "%.1f ms", (double)age / 1e6);
  }
}

static int cmd_status(const accel_cluster_options_t *o, bool json) {
  accel_cluster_status_t *st = NULL;
  accel_status_t s = accel_cluster_status_load(o, &st);
  if (s != ACCEL_OK) {
    fprintf(stderr, "accel-cluster: status of \"%s\": %s (%s)\n", o->name,
            accel_last_error(), accel_status_name(s));
    return 1;
  }
  uint32_t count = 0;
  uint64_t epoch = accel_cluster_status_epoch(st, &count);
  if (json) {
    printf("{\"group\": \"%s\", \"store\": \"%s\", \"epoch\": %" PRIu64
           ", \"members\": [", o->name,
           o->store == ACCEL_CLUSTER_STORE_ETCD ? "etcd" : "shm", epoch);
  } else {
    printf("group %s (%s): epoch %" PRIu64 "\n", o->name,
           o->store == ACCEL_CLUSTER_STORE_ETCD ? "etcd" : "shm", epoch);
    printf("%-6s %-18s %-8s %-12s %-8s %s\n", "rank", "member", "health",
           "heartbeat", "pid", "host");
  }
  for (uint32_t i = 0; i < count; ++i) {
    accel_cluster_member_info_t m = {.struct_size = sizeof(m)};
    accel_cluster_status_member(st, i, &m);
    const char *health = m.health < 3 ? k_health[m.health] : "?";
    if (json) {
      printf("%s{\"rank\": %s%d, \"member\": \"%016" PRIx64 "\", \"health\": "
             "\"%s\", \"heartbeat_age_ms\": ", i ? ", " : "",
             "", m.rank == ACCEL_CLUSTER_NO_RANK ? -1 : (int)m.rank,
             m.member_id, health);
      if (m.heartbeat_age_ns == UINT64_MAX) {
        printf("null");
      } else {
        printf("%.3f", (double)m.heartbeat_age_ns / 1e6);
      }
      printf(", \"pid\": %d, \"host\": \"%s\"}", m.pid, m.host);
    } else {
      char rank[16], age[32];
      if (m.rank == ACCEL_CLUSTER_NO_RANK) {
        snprintf(rank, sizeof(rank), "join");
      } else {
        snprintf(rank, sizeof(rank), "%u", m.rank);
      }
      print_age(age, sizeof(age), m.heartbeat_age_ns);
      printf("%-6s %016" PRIx64 "   %-8s %-12s %-8d %s\n", rank, m.member_id,
             health, age, m.pid, m.host);
    }
  }
  if (json) {
    printf("]}\n");
  }
  accel_cluster_status_destroy(st);
  return 0;
}

static void print_members(accel_cluster_group_t *g) {
  uint64_t ids[ACCEL_CLUSTER_MAX_RANKS];
  uint32_t n = 0;
  accel_cluster_epoch_members(g, ids, ACCEL_CLUSTER_MAX_RANKS, &n);
  printf("[");
  for (uint32_t i = 0; i < n; ++i) {
    printf("%s\"%016" PRIx64 "\"", i ? "," : "", ids[i]);
  }
  printf("]");
}

static void on_stop(accel_cluster_group_t *g, uint64_t epoch, void *user) {
  (void)g;
  (void)user;
  printf("{\"event\":\"stop\",\"epoch\":%" PRIu64 ",\"t_ns\":%" PRIu64 "}\n",
         epoch, now_ns());
  fflush(stdout);
}

static void on_resume(accel_cluster_group_t *g,
                      const accel_cluster_epoch_info_t *info, void *user) {
  (void)user;
  printf("{\"event\":\"resume\",\"epoch\":%" PRIu64 ",\"rank\":%u,\"size\":%u,"
         "\"member\":\"%016" PRIx64 "\",\"t_ns\":%" PRIu64 ",\"members\":",
         info->epoch, info->rank, info->size, info->member_id, now_ns());
  print_members(g);
  printf("}\n");
  fflush(stdout);
}

static int cmd_join(accel_cluster_options_t *o, const accel_tool_args_t *a) {
  uint64_t duration_ms = 0, fail_after_ms = 0;
  int rc = 0;
  if (a->values[OPT_DURATION] != NULL &&
      (rc = parse_u64(a->values[OPT_DURATION], "--duration-ms", &duration_ms)) != 0) {
    return rc;
  }
  if (a->values[OPT_FAIL_AFTER] != NULL &&
      (rc = parse_u64(a->values[OPT_FAIL_AFTER], "--fail-after-ms",
                      &fail_after_ms)) != 0) {
    return rc;
  }
  o->on_stop = on_stop;
  o->on_resume = on_resume;
  accel_cluster_group_t *g = NULL;
  accel_status_t s = accel_cluster_group_create(o, &g);
  if (s != ACCEL_OK) {
    fprintf(stderr, "accel-cluster: join \"%s\": %s (%s)\n", o->name,
            accel_last_error(), accel_status_name(s));
    return 1;
  }
  accel_cluster_epoch_info_t info = {.struct_size = sizeof(info)};
  accel_cluster_current(g, &info);
  printf("{\"event\":\"joined\",\"member\":\"%016" PRIx64 "\",\"pid\":%d,"
         "\"t_ns\":%" PRIu64 "}\n", info.member_id, (int)getpid(), now_ns());
  fflush(stdout);
  uint64_t start = now_ns();
  bool reported = false;
  for (;;) {
    uint64_t elapsed_ms = (now_ns() - start) / 1000000ull;
    if (duration_ms != 0 && elapsed_ms >= duration_ms) {
      break;
    }
    if (fail_after_ms != 0 && !reported && elapsed_ms >= fail_after_ms) {
      accel_cluster_report_failure(g, "accel-cluster --fail-after-ms");
      reported = true;
    }
    s = accel_cluster_wait_epoch(g, UINT64_MAX - 1, 20000000ull, &info);
    if (s == ACCEL_ERROR_ABORTED) {
      char message[512];
      snprintf(message, sizeof(message), "%s", accel_last_error());
      for (char *c = message; *c != '\0'; ++c) {
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
          *c = '\'';  // keep the line valid JSON
        }
      }
      printf("{\"event\":\"failed\",\"t_ns\":%" PRIu64 ",\"message\":\"%s\"}\n",
             now_ns(), message);
      fflush(stdout);
      accel_cluster_group_destroy(g);
      return 3;
    }
  }
  accel_cluster_group_destroy(g);
  printf("{\"event\":\"left\",\"t_ns\":%" PRIu64 "}\n", now_ns());
  return 0;
}

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int rc = accel_tool_parse(&k_spec, argc, argv, &args);
  if (rc != ACCEL_TOOL_CONTINUE) {
    return rc;
  }
  const char *cmd = args.positional[0];
  accel_cluster_options_t opts;
  if ((rc = fill_options(&args, &opts)) != 0) {
    return rc;
  }
  if (strcmp(cmd, "status") == 0) {
    return cmd_status(&opts, args.values[OPT_JSON] != NULL);
  }
  if (strcmp(cmd, "join") == 0) {
    return cmd_join(&opts, &args);
  }
  if (strcmp(cmd, "remove") == 0) {
    accel_status_t s = accel_cluster_remove(&opts);
    if (s != ACCEL_OK) {
      fprintf(stderr, "accel-cluster: remove \"%s\": %s (%s)\n", opts.name,
              accel_last_error(), accel_status_name(s));
      return 1;
    }
    return 0;
  }
  return accel_tool_usage_error(&k_spec,
                                "unknown command \"%s\" (status, join, remove)",
                                cmd);
}
