#include "run.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "history.h"
#include "results.h"

// The benchmark options passed through to each child, and whether each
// takes a value.
static const struct {
  const char *name;
  bool has_value;
} k_forwarded[] = {{"--quick", false},    {"--budget", true},
                   {"--precision", true}, {"--filter", true},
                   {"--min-pairs", true}};

// Runs `accel-bench |bench| --json |opts...|` and returns its stdout (free
// it), or NULL after printing why.
static char *run_child(const char *bench, char **opts, int nopts) {
  int fds[2];
  if (pipe(fds) != 0) {
    fprintf(stderr, "accel-bench run: pipe: %s\n", strerror(errno));
    return NULL;
  }
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "accel-bench run: fork: %s\n", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return NULL;
  }
  if (pid == 0) {
    char *argv[32] = {"accel-bench", (char *)bench, "--json"};
    int n = 3;
    for (int i = 0; i < nopts && n < 31; ++i) {
      argv[n++] = opts[i];
    }
    argv[n] = NULL;
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fds[1]);
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  ssize_t got = 1;
  while (out != NULL && got > 0) {
    if (cap - len < 4096) {
      char *bigger = realloc(out, cap * 2);
      if (bigger == NULL) {
        free(out);
        out = NULL;
        break;
      }
      out = bigger;
      cap *= 2;
    }
    got = read(fds[0], out + len, cap - len - 1);
    if (got < 0 && errno == EINTR) {
      got = 1;
      continue;
    }
    len += got > 0 ? (size_t)got : 0;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (out == NULL || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "accel-bench run: benchmark \"%s\" failed (%s %d)\n",
            bench, WIFEXITED(status) ? "exit" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    free(out);
    return NULL;
  }
  out[len] = '\0';
  return out;
}

// Writes |text| to |path| through a temporary file in the same folder,
// renamed over |path| once complete: a reader never sees half a file.
static int write_atomically(const char *path, const char *text) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (tmp == NULL) {
    return 1;
  }
  snprintf(tmp, n, "%s.tmpXXXXXX", path);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL && fd >= 0) {
    close(fd);
  }
  bool ok = f != NULL && fputs(text, f) >= 0 && fputc('\n', f) != EOF &&
            fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (f != NULL && fclose(f) != 0) {
    ok = false;
  }
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "accel-bench run: cannot write %s: %s\n", path,
            strerror(errno));
    unlink(tmp);
    free(tmp);
    return 1;
  }
  free(tmp);
  return 0;
}

// The results document of the children's reports |texts|: the first one's
// run metadata (its load average after the run from the last one), and
// every report under "benches". Returns JSON text (free it) or NULL.
static char *combine(char **texts, const char *const *benches, int n) {
  json_object *doc = json_object_new_object();
  json_object *list = json_object_new_array();
  json_object *meta = NULL;
  char *out = NULL;
  for (int i = 0; i < n; ++i) {
    json_object *one = json_tokener_parse(texts[i]);
    json_object *run = NULL;
    json_object *skip = NULL;
    if (one != NULL && !json_object_object_get_ex(one, "run", &run) &&
        json_object_object_get_ex(one, "skipped", &skip)) {
      // A benchmark that cannot run here (cuda without a CUDA device)
      // says why; the run goes on without it.
      fprintf(stderr, "accel-bench run: benchmark \"%s\" skipped: %s\n",
              benches[i], json_object_get_string(skip));
      json_object_put(one);
      continue;
    }
    if (one == NULL || run == NULL) {
      fprintf(stderr, "accel-bench run: benchmark \"%s\" printed no report\n",
              benches[i]);
      json_object_put(one);
      goto out;
    }
    if (meta == NULL) {
      json_object_deep_copy(run, &meta, NULL);
    }
    json_object *after = NULL;
    if (json_object_object_get_ex(run, "load_after", &after) && meta != NULL) {
      json_object_object_add(meta, "load_after", json_object_get(after));
    }
    json_object_array_add(list, one);
  }
  json_object_object_add(doc, "format",
                         json_object_new_string("accel-bench-results/1"));
  json_object_object_add(doc, "run", meta);
  meta = NULL;
  json_object_object_add(doc, "benches", list);
  list = NULL;
  out = strdup(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_SPACED));
out:
  json_object_put(meta);
  json_object_put(list);
  json_object_put(doc);
  return out;
}

static int run_usage(void) {
  fprintf(stderr,
          "usage: accel-bench run (--all | NAME...) [--out FILE] [--save DB]\n"
          "         [--quick] [--budget S] [--precision X] [--filter G] "
          "[--min-pairs N]\n");
  return 2;
}

int accel_bench_run_main(int argc, char **argv, const char *const *names,
                         int name_count) {
  const char *out_path = NULL, *db = NULL;
  const char *benches[64];
  char *opts[16];
  int nbench = 0, nopts = 0;
  bool all = false;
  for (int i = 0; i < argc; ++i) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    size_t f = 0;
    while (f < sizeof(k_forwarded) / sizeof(k_forwarded[0]) &&
           strcmp(argv[i], k_forwarded[f].name) != 0) {
      f++;
    }
    if (strcmp(argv[i], "--all") == 0) {
      all = true;
    } else if (strcmp(argv[i], "--out") == 0 && next != NULL) {
      out_path = argv[++i];
    } else if (strcmp(argv[i], "--save") == 0 && next != NULL) {
      db = argv[++i];
    } else if (f < sizeof(k_forwarded) / sizeof(k_forwarded[0])) {
      if (k_forwarded[f].has_value && next == NULL) {
        return run_usage();
      }
      opts[nopts++] = argv[i];
      if (k_forwarded[f].has_value) {
        opts[nopts++] = argv[++i];
      }
    } else if (argv[i][0] != '-' && nbench < 64) {
      int k = 0;
      while (k < name_count && strcmp(names[k], argv[i]) != 0) {
        k++;
      }
      if (k == name_count) {
        fprintf(stderr, "accel-bench run: no benchmark \"%s\"\n", argv[i]);
        return 2;
      }
      benches[nbench++] = names[k];
    } else {
      fprintf(stderr, "accel-bench run: unexpected \"%s\"\n", argv[i]);
      return run_usage();
    }
  }
  if (all) {
    nbench = 0;
    for (int k = 0; k < name_count && k < 64; ++k) {
      benches[nbench++] = names[k];
    }
  }
  if (nbench == 0) {
    return run_usage();
  }
  char *texts[64] = {NULL};
  int rc = 1;
  char *doc = NULL;
  for (int i = 0; i < nbench; ++i) {
    fprintf(stderr, "accel-bench run: %s\n", benches[i]);
    texts[i] = run_child(benches[i], opts, nopts);
    if (texts[i] == NULL) {
      goto out;
    }
  }
  doc = combine(texts, benches, nbench);
  bench_run_t run;
  if (doc == NULL || bench_run_parse(doc, "accel-bench run", &run) != 0) {
    goto out;
  }
  int64_t id = 0;
  rc = out_path != NULL ? write_atomically(out_path, doc)
       : db == NULL     ? (puts(doc) < 0)
                        : 0;
  if (rc == 0 && db != NULL) {
    rc = bench_history_save(db, &run, &id);
    if (rc == 0) {
      fprintf(stderr, "accel-bench run: saved as run %lld of %s\n",
              (long long)id, db);
    }
  }
  bench_run_free(&run);
out:
  for (int i = 0; i < nbench; ++i) {
    free(texts[i]);
  }
  free(doc);
  return rc;
}

int accel_bench_save_main(int argc, char **argv) {
  const char *db = NULL;
  int first = 0;
  if (argc >= 2 && strcmp(argv[0], "--db") == 0) {
    db = argv[1];
    first = 2;
  }
  if (db == NULL || first >= argc) {
    fprintf(stderr, "usage: accel-bench save --db DB FILE...\n");
    return 2;
  }
  for (int i = first; i < argc; ++i) {
    bench_run_t run;
    if (bench_run_load(argv[i], &run) != 0) {
      return 1;
    }
    int64_t id = 0;
    int rc = bench_history_save(db, &run, &id);
    bench_run_free(&run);
    if (rc != 0) {
      return 1;
    }
    fprintf(stderr, "accel-bench save: %s saved as run %lld\n", argv[i],
            (long long)id);
  }
  return 0;
}
