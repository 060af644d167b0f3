// Cluster options: defaults, ACCEL_CLUSTER_* overrides and validation, done
// once for every entry point that names a group (create, status, remove).
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "accel/cluster.h"
#include "accel/topology.h"
#include "cluster/group_impl.h"
#include "core/error.h"
#include "core/runtime_impl.h"

#define KNOWN_FLAGS ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS

void accel_cluster_options_init(accel_cluster_options_t *opts) {
  if (opts == NULL) {
    return;
  }
  memset(opts, 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
  opts->store = ACCEL_CLUSTER_STORE_SHM;
  opts->min_size = 1;
  opts->max_size = 1;
}

static bool name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > ACCEL_CLUSTER_NAME_MAX) {
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) {
      return false;
    }
  }
  return name[0] != '.';
}

// Reads a millisecond override |var| into |*ns|.
static accel_status_t env_ms(const char *var, uint64_t *ns) {
  uint64_t ms = 0;
  bool invalid = false;
  if (accel_env_u64(var, &ms, &invalid)) {
    if (invalid || ms == 0 || ms > 3600000ull) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s=\"%s\": expected milliseconds from 1 to 3600000",
                         var, getenv(var));
    }
    *ns = ms * 1000000ull;
  }
  return ACCEL_OK;
}

accel_status_t accel_cluster_resolve(const accel_cluster_options_t *opts,
                                     const char *fn,
                                     accel_cluster_resolved_t *out) {
  // The options before |device| are the smallest a caller may pass.
  const size_t min_size = offsetof(accel_cluster_options_t, device);
  if (opts == NULL || opts->struct_size < min_size) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: opts is NULL or its struct_size is below %zu", fn,
                       min_size);
  }
  if (opts->name == NULL || !name_ok(opts->name)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: group name \"%s\" must be 1 to %d characters of "
                       "[A-Za-z0-9_.-], not starting with '.'", fn,
                       opts->name == NULL ? "(null)" : opts->name,
                       ACCEL_CLUSTER_NAME_MAX);
  }
  if (opts->flags & ~(uint32_t)KNOWN_FLAGS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%s: unknown flags 0x%x",
                       fn, opts->flags & ~(uint32_t)KNOWN_FLAGS);
  }
  if (opts->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: reserved0 must be 0", fn);
  }
  accel_cluster_resolved_t r;
  memset(&r, 0, sizeof(r));
  snprintf(r.name, sizeof(r.name), "%s", opts->name);
  r.store = opts->store;
  const char *store_env = getenv("ACCEL_CLUSTER_STORE");
  if (store_env != NULL && store_env[0] != '\0') {
    if (strcasecmp(store_env, "shm") == 0) {
      r.store = ACCEL_CLUSTER_STORE_SHM;
    } else if (strcasecmp(store_env, "etcd") == 0) {
      r.store = ACCEL_CLUSTER_STORE_ETCD;
    } else {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "ACCEL_CLUSTER_STORE=\"%s\": expected shm or etcd",
                         store_env);
    }
  }
  if (r.store > ACCEL_CLUSTER_STORE_ETCD) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: unknown store kind %u", fn, r.store);
  }
  const char *endpoints = getenv("ACCEL_CLUSTER_ETCD_ENDPOINTS");
  if (endpoints == NULL || endpoints[0] == '\0') {
    endpoints = opts->etcd_endpoints;
  }
  if (endpoints == NULL || endpoints[0] == '\0') {
    endpoints = ACCEL_CLUSTER_ETCD_DEFAULT_ENDPOINT;
  }
  if (strlen(endpoints) >= sizeof(r.endpoints)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: etcd endpoint list of %zu bytes exceeds %zu", fn,
                       strlen(endpoints), sizeof(r.endpoints) - 1);
  }
  snprintf(r.endpoints, sizeof(r.endpoints), "%s", endpoints);
  bool etcd = r.store == ACCEL_CLUSTER_STORE_ETCD;
  r.interval_ns = opts->heartbeat_interval_ns != 0
                      ? opts->heartbeat_interval_ns
                      : (etcd ? ACCEL_CLUSTER_ETCD_INTERVAL_NS
                              : ACCEL_CLUSTER_SHM_INTERVAL_NS);
  r.timeout_ns = opts->heartbeat_timeout_ns != 0
                     ? opts->heartbeat_timeout_ns
                     : (etcd ? ACCEL_CLUSTER_ETCD_TIMEOUT_NS
                             : ACCEL_CLUSTER_SHM_TIMEOUT_NS);
  ACCEL_RETURN_IF_ERROR(env_ms("ACCEL_CLUSTER_HEARTBEAT_INTERVAL_MS",
                               &r.interval_ns));
  ACCEL_RETURN_IF_ERROR(env_ms("ACCEL_CLUSTER_HEARTBEAT_TIMEOUT_MS",
                               &r.timeout_ns));
  if (r.timeout_ns < 2 * r.interval_ns) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: heartbeat timeout %llu ns is below twice the "
                       "interval %llu ns", fn,
                       (unsigned long long)r.timeout_ns,
                       (unsigned long long)r.interval_ns);
  }
  r.min_size = opts->min_size == 0 ? 1 : opts->min_size;
  r.max_size = opts->max_size == 0 ? r.min_size : opts->max_size;
  if (r.max_size < r.min_size || r.max_size > ACCEL_CLUSTER_MAX_RANKS) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: sizes min %u, max %u: need 1 <= min <= max <= %d",
                       fn, r.min_size, r.max_size, ACCEL_CLUSTER_MAX_RANKS);
  }
  r.settle_ns = opts->settle_ns != 0 ? opts->settle_ns : r.timeout_ns;
  r.flags = opts->flags;
  r.topology_json = opts->topology_json;
  r.on_stop = opts->on_stop;
  r.on_resume = opts->on_resume;
  r.callback_user = opts->callback_user;
  r.clock = opts->clock;
  r.clock_user = opts->clock_user;
  if (opts->struct_size >= offsetof(accel_cluster_options_t, device) +
                               sizeof(opts->device)) {
    r.device = opts->device;
  }
  *out = r;
  return ACCEL_OK;
}

void accel_cluster_hostname(char out[64]) {
  if (gethostname(out, 64) != 0) {
    out[0] = '\0';
  }
  out[63] = '\0';
}

static void store_config_of(const accel_cluster_resolved_t *cfg,
                            accel_cluster_store_config_t *config) {
  memset(config, 0, sizeof(*config));
  snprintf(config->name, sizeof(config->name), "%s", cfg->name);
  config->etcd_endpoints = cfg->endpoints;
  config->interval_ns = cfg->interval_ns;
  config->timeout_ns = cfg->timeout_ns;
  config->min_size = cfg->min_size;
  config->max_size = cfg->max_size;
}

accel_status_t accel_cluster_store_open(const accel_cluster_resolved_t *cfg,
                                        bool create,
                                        accel_cluster_store_t **out_store) {
  accel_cluster_store_config_t config;
  store_config_of(cfg, &config);
  if (cfg->store == ACCEL_CLUSTER_STORE_ETCD) {
    return accel_cluster_etcd_open(&config, out_store);
  }
  return accel_cluster_shm_open(&config, create, out_store);
}

accel_status_t accel_cluster_topology_text(const char *json, char **out_text,
                                           size_t *out_length) {
  if (json != NULL) {
    size_t n = strlen(json);
    char *copy = malloc(n + 1);
    if (copy == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster group: no memory");
    }
    memcpy(copy, json, n + 1);
    *out_text = copy;
    *out_length = n;
    return ACCEL_OK;
  }
  accel_topology_t *topology = NULL;
  accel_status_t status = accel_topology_load(NULL, &topology);
  if (status != ACCEL_OK) {
    return accel_error_context(status, "cluster group: this rank's topology");
  }
  size_t length = 0;
  accel_topology_format(topology, ACCEL_TOPOLOGY_FORMAT_JSON, NULL, 0, &length);
  char *text = malloc(length + 1);
  if (text == NULL) {
    accel_topology_destroy(topology);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster group: no memory");
  }
  status = accel_topology_format(topology, ACCEL_TOPOLOGY_FORMAT_JSON, text,
                                 length + 1, &length);
  accel_topology_destroy(topology);
  if (status != ACCEL_OK) {
    free(text);
    return status;
  }
  *out_text = text;
  *out_length = length;
  return ACCEL_OK;
}

accel_status_t accel_cluster_group_create(const accel_cluster_options_t *opts,
                                          accel_cluster_group_t **out_group) {
  ACCEL_CHECK_ARG(out_group != NULL, "out_group (NULL)");
  accel_cluster_resolved_t cfg;
  ACCEL_RETURN_IF_ERROR(accel_cluster_resolve(opts, __func__, &cfg));
  return accel_cluster_group_open(&cfg, out_group);
}

accel_status_t accel_cluster_remove(const accel_cluster_options_t *opts) {
  accel_cluster_resolved_t cfg;
  ACCEL_RETURN_IF_ERROR(accel_cluster_resolve(opts, __func__, &cfg));
  if (cfg.store == ACCEL_CLUSTER_STORE_SHM) {
    return accel_cluster_shm_remove(cfg.name);
  }
  accel_cluster_store_config_t config;
  store_config_of(&cfg, &config);
  return accel_cluster_etcd_remove(&config);
}
