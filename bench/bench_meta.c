// Where a benchmark run ran: the metadata every report carries, so that a
// figure in the history can be told apart from the machine it came from.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_build_info.h"

extern char **environ;

// The load averages when the run began (bench_meta_begin); negative: not
// taken.
static double g_load_before[3] = {-1, -1, -1};

void bench_meta_begin(void) {
  if (getloadavg(g_load_before, 3) != 3) {
    g_load_before[0] = g_load_before[1] = g_load_before[2] = -1;
  }
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; ++c) {
    if (*c == '"' || *c == '\\') {
      fprintf(f, "\\%c", *c);
    } else if (*c < 0x20) {
      fprintf(f, "\\u%04x", *c);
    } else {
      fputc(*c, f);
    }
  }
  fputc('"', f);
}

// The first line of |path|, without its newline, into |out|; false when the
// file cannot be read.
static bool read_line(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return false;
  }
  bool ok = fgets(out, (int)size, f) != NULL;
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
  return ok;
}

static void cpu_model(char *out, size_t size) {
  snprintf(out, size, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) {
    return;
  }
  char line[256];
  while (fgets(line, sizeof(line), f) != NULL) {
    char *colon = strchr(line, ':');
    if (colon != NULL && (strncmp(line, "model name", 10) == 0 ||
                          strncmp(line, "Model", 5) == 0)) {
      colon += colon[1] == ' ' ? 2 : 1;
      colon[strcspn(colon, "\n")] = '\0';
      snprintf(out, size, "%s", colon);
      break;
    }
  }
  fclose(f);
}

// Environment variables that change what the runtime or its libraries do.
static bool env_changes_behaviour(const char *entry) {
  static const char *const k_prefixes[] = {
      "ACCEL_", "OMP_", "OPENBLAS_", "GOMP_", "MALLOC_", "GLIBC_TUNABLES=",
      "LD_PRELOAD=", "LD_BIND_NOW=", "CUDA_VISIBLE_DEVICES=", "LTTNG_"};
  for (size_t i = 0; i < sizeof(k_prefixes) / sizeof(k_prefixes[0]); ++i) {
    if (strncmp(entry, k_prefixes[i], strlen(k_prefixes[i])) == 0) {
      return true;
    }
  }
  return false;
}

static void write_env(FILE *f) {
  fprintf(f, "\"env\": {");
  int n = 0;
  for (char **e = environ; e != NULL && *e != NULL; ++e) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL || !env_changes_behaviour(*e)) {
      continue;
    }
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)(eq - *e), *e);
    fprintf(f, n++ ? ", " : "");
    json_string(f, name);
    fprintf(f, ": ");
    json_string(f, eq + 1);
  }
  fprintf(f, "}");
}

static void write_loads(FILE *f, const char *key, const double *load) {
  if (load[0] < 0) {
    fprintf(f, "\"%s\": null, ", key);
  } else {
    fprintf(f, "\"%s\": [%.2f, %.2f, %.2f], ", key, load[0], load[1],
            load[2]);
  }
}

void bench_meta_write_json(FILE *f) {
  char buf[256];
  fprintf(f, "\"commit\": ");
  json_string(f, BENCH_COMMIT);
  fprintf(f, ", \"build_type\": ");
  json_string(f, BENCH_BUILD_TYPE);
  cpu_model(buf, sizeof(buf));
  fprintf(f, ", \"cpu_model\": ");
  json_string(f, buf);
  fprintf(f, ", \"cores\": %ld, \"governor\": ", sysconf(_SC_NPROCESSORS_ONLN));
  if (read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", buf,
                sizeof(buf))) {
    json_string(f, buf);
  } else {
    fprintf(f, "null");
  }
  fprintf(f, ", ");
  double after[3] = {-1, -1, -1};
  if (getloadavg(after, 3) != 3) {
    after[0] = -1;
  }
  write_loads(f, "load_before", g_load_before);
  write_loads(f, "load_after", after);
  if (gethostname(buf, sizeof(buf)) != 0) {
    snprintf(buf, sizeof(buf), "unknown");
  }
  buf[sizeof(buf) - 1] = '\0';
  fprintf(f, "\"host\": ");
  json_string(f, buf);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(f, ", \"time\": \"%s\", ", buf);
  write_env(f);
}
