#include "history.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// How long a writer waits for another's transaction before giving up.
#define HISTORY_BUSY_MS 60000

static const char k_schema[] =
    "CREATE TABLE IF NOT EXISTS runs ("
    " id INTEGER PRIMARY KEY,"
    " commit_id TEXT NOT NULL,"
    " time TEXT NOT NULL,"
    " build_type TEXT NOT NULL,"
    " host TEXT NOT NULL,"
    " meta TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS runs_by_commit ON runs(commit_id);"
    "CREATE TABLE IF NOT EXISTS figures ("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " bench TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " unit TEXT,"
    " value REAL,"
    " baseline_name TEXT,"
    " baseline REAL,"
    " ratio REAL,"
    " ci_low REAL,"
    " ci_high REAL,"
    " pairs INTEGER NOT NULL,"
    " method TEXT,"
    " target TEXT,"
    " verdict TEXT,"
    " samples TEXT NOT NULL,"
    " PRIMARY KEY (run_id, bench, name));"
    "PRAGMA user_version = 1;";

static int db_fail(sqlite3 *db, const char *path, const char *doing) {
  fprintf(stderr, "accel-bench: %s: %s: %s\n", path, doing,
          db != NULL ? sqlite3_errmsg(db) : "out of memory");
  return 1;
}

// Opens |path| (creating it when |create|) with WAL journaling and a busy
// timeout, and its tables.
static int db_open(const char *path, bool create, sqlite3 **out_db) {
  if (!create && access(path, F_OK) != 0) {
    fprintf(stderr, "accel-bench: no history database at %s\n", path);
    return 1;
  }
  sqlite3 *db = NULL;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
    db_fail(db, path, "open");
    sqlite3_close(db);
    return 1;
  }
  sqlite3_busy_timeout(db, HISTORY_BUSY_MS);
  // WAL: readers never block the writer and a killed writer's partial
  // transaction is never seen. Switching takes a lock that a concurrent
  // opener may hold, which the busy timeout waits out.
  if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;",
                   NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(db, "BEGIN IMMEDIATE;", NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(db, k_schema, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(db, "COMMIT;", NULL, NULL, NULL) != SQLITE_OK) {
    db_fail(db, path, "set up the tables");
    sqlite3_close(db);
    return 1;
  }
  *out_db = db;
  return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (s != NULL) {
    sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
  } else {
    sqlite3_bind_null(st, i);
  }
}

static void bind_real(sqlite3_stmt *st, int i, double x) {
  if (isfinite(x)) {
    sqlite3_bind_double(st, i, x);
  } else {
    sqlite3_bind_null(st, i);
  }
}

// The samples as a JSON array (free it).
static char *samples_json(const bench_fig_t *f) {
  size_t cap = 3 + (size_t)f->sample_count * 26;
  char *s = malloc(cap);
  if (s == NULL) {
    return NULL;
  }
  size_t n = (size_t)snprintf(s, cap, "[");
  for (int i = 0; i < f->sample_count; ++i) {
    n += (size_t)snprintf(s + n, cap - n, i ? ",%.17g" : "%.17g",
                          f->samples[i]);
  }
  snprintf(s + n, cap - n, "]");
  return s;
}

static int insert_figures(sqlite3 *db, const char *path, int64_t run_id,
                          const bench_run_t *run) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(
          db,
          "INSERT INTO figures (run_id, bench, name, unit, value, "
          "baseline_name, baseline, ratio, ci_low, ci_high, pairs, method, "
          "target, verdict, samples) VALUES "
          "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
          -1, &st, NULL) != SQLITE_OK) {
    return db_fail(db, path, "prepare");
  }
  int rc = 0;
  for (int i = 0; i < run->count && rc == 0; ++i) {
    const bench_fig_t *f = &run->figs[i];
    char *samples = samples_json(f);
    if (samples == NULL) {
      rc = db_fail(NULL, path, "samples");
      break;
    }
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, f->bench);
    bind_text(st, 3, f->name);
    bind_text(st, 4, f->unit);
    bind_real(st, 5, f->value);
    bind_text(st, 6, f->baseline_name);
    bind_real(st, 7, f->baseline);
    bind_real(st, 8, f->ratio);
    bind_real(st, 9, f->ci_low);
    bind_real(st, 10, f->ci_high);
    sqlite3_bind_int(st, 11, f->pairs);
    bind_text(st, 12, f->method);
    bind_text(st, 13, f->target);
    bind_text(st, 14, f->verdict);
    bind_text(st, 15, samples);
    if (sqlite3_step(st) != SQLITE_DONE) {
      rc = db_fail(db, path, "insert a figure");
    }
    free(samples);
  }
  sqlite3_finalize(st);
  return rc;
}

int bench_history_save(const char *path, const bench_run_t *run,
                       int64_t *out_id) {
  sqlite3 *db = NULL;
  if (db_open(path, true, &db)) {
    return 1;
  }
  sqlite3_stmt *st = NULL;
  int rc = 1;
  // IMMEDIATE: take the write lock now (waiting out other writers), so that
  // the transaction never fails half-way on a lock upgrade.
  if (sqlite3_exec(db, "BEGIN IMMEDIATE;", NULL, NULL, NULL) != SQLITE_OK) {
    db_fail(db, path, "begin");
    goto out_close;
  }
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO runs (commit_id, time, build_type, "
                         "host, meta) VALUES (?1, ?2, ?3, ?4, ?5)",
                         -1, &st, NULL) != SQLITE_OK) {
    db_fail(db, path, "prepare");
    goto out_rollback;
  }
  bind_text(st, 1, run->commit);
  bind_text(st, 2, run->time);
  bind_text(st, 3, run->build_type != NULL ? run->build_type : "");
  bind_text(st, 4, run->host != NULL ? run->host : "");
  bind_text(st, 5, run->meta_json != NULL ? run->meta_json : "{}");
  if (sqlite3_step(st) != SQLITE_DONE) {
    db_fail(db, path, "insert the run");
    goto out_rollback;
  }
  int64_t id = sqlite3_last_insert_rowid(db);
  if (insert_figures(db, path, id, run) != 0) {
    goto out_rollback;
  }
  if (sqlite3_exec(db, "COMMIT;", NULL, NULL, NULL) != SQLITE_OK) {
    db_fail(db, path, "commit");
    goto out_rollback;
  }
  if (out_id != NULL) {
    *out_id = id;
  }
  rc = 0;
  goto out_close;
out_rollback:
  sqlite3_exec(db, "ROLLBACK;", NULL, NULL, NULL);
out_close:
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc;
}

static const char *col_text(sqlite3_stmt *st, int i) {
  return (const char *)sqlite3_column_text(st, i);
}

static double col_real(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN
                                                   : sqlite3_column_double(st, i);
}

// Parses the stored samples (a JSON array of numbers written by
// samples_json; another writer's malformed text yields fewer samples).
static int parse_samples(const char *text, double *out, int max) {
  int n = 0;
  const char *p = text != NULL ? strchr(text, '[') : NULL;
  while (p != NULL && n < max) {
    char *end = NULL;
    double x = strtod(p + 1, &end);
    if (end == p + 1 || !isfinite(x)) {
      break;
    }
    out[n++] = x;
    p = *end == ',' ? end : NULL;
  }
  return n;
}

static int load_figures(sqlite3 *db, const char *path, int64_t run_id,
                        bench_run_t *run) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT bench, name, unit, value, baseline_name, "
                         "baseline, ratio, ci_low, ci_high, pairs, method, "
                         "target, verdict, samples FROM figures WHERE "
                         "run_id = ?1 ORDER BY rowid",
                         -1, &st, NULL) != SQLITE_OK) {
    return db_fail(db, path, "prepare");
  }
  sqlite3_bind_int64(st, 1, run_id);
  static double xs[1024];
  int rc = 0, step = SQLITE_DONE;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    bench_fig_t f = {
        .bench = (char *)col_text(st, 0), .name = (char *)col_text(st, 1),
        .unit = (char *)col_text(st, 2), .value = col_real(st, 3),
        .baseline_name = (char *)col_text(st, 4), .baseline = col_real(st, 5),
        .ratio = col_real(st, 6), .ci_low = col_real(st, 7),
        .ci_high = col_real(st, 8), .pairs = sqlite3_column_int(st, 9),
        .method = (char *)col_text(st, 10), .target = (char *)col_text(st, 11),
        .verdict = (char *)col_text(st, 12), .samples = xs};
    f.sample_count = parse_samples(col_text(st, 13), xs, 1024);
    if (f.bench == NULL || f.name == NULL || bench_run_add(run, &f) == NULL) {
      rc = db_fail(NULL, path, "load a figure");
      break;
    }
  }
  if (rc == 0 && step != SQLITE_DONE) {
    rc = db_fail(db, path, "read the figures");
  }
  sqlite3_finalize(st);
  return rc;
}

// Fills |run| from the current row of a SELECT id, commit_id, time,
// build_type, host, meta FROM runs.
static int load_run_row(sqlite3 *db, const char *path, sqlite3_stmt *st,
                        bench_run_t *run) {
  memset(run, 0, sizeof(*run));
  run->commit = strdup(col_text(st, 1));
  run->time = strdup(col_text(st, 2));
  run->build_type = strdup(col_text(st, 3));
  run->host = strdup(col_text(st, 4));
  run->meta_json = strdup(col_text(st, 5));
  if (run->commit == NULL || run->time == NULL || run->build_type == NULL ||
      run->host == NULL || run->meta_json == NULL) {
    bench_run_free(run);
    return db_fail(NULL, path, "load a run");
  }
  if (load_figures(db, path, sqlite3_column_int64(st, 0), run) != 0) {
    bench_run_free(run);
    return 1;
  }
  return 0;
}

int bench_history_load_commit(const char *path, const char *commit,
                              bench_run_t *out) {
  if (strlen(commit) < 4) {
    fprintf(stderr, "accel-bench: commit \"%s\": give at least 4 characters\n",
            commit);
    return 1;
  }
  sqlite3 *db = NULL;
  if (db_open(path, false, &db)) {
    return 1;
  }
  sqlite3_stmt *st = NULL;
  int rc = 1;
  // substr, not LIKE: a prefix with '%' or '_' matches only itself.
  if (sqlite3_prepare_v2(db,
                         "SELECT id, commit_id, time, build_type, host, meta, "
                         "(SELECT COUNT(DISTINCT commit_id) FROM runs WHERE "
                         "substr(commit_id, 1, length(?1)) = ?1) "
                         "FROM runs WHERE substr(commit_id, 1, length(?1)) "
                         "= ?1 ORDER BY time DESC, id DESC LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK) {
    db_fail(db, path, "prepare");
    goto out;
  }
  bind_text(st, 1, commit);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW && sqlite3_column_int(st, 6) > 1) {
    fprintf(stderr, "accel-bench: %s: commit \"%s\" is ambiguous: %d commits "
            "start with it\n", path, commit, sqlite3_column_int(st, 6));
  } else if (step == SQLITE_ROW) {
    rc = load_run_row(db, path, st, out);
  } else if (step == SQLITE_DONE) {
    fprintf(stderr, "accel-bench: %s: no run of commit \"%s\"\n", path,
            commit);
  } else {
    db_fail(db, path, "find the commit");
  }
out:
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc;
}

int bench_history_load_all(const char *path, bench_run_t **out_runs,
                           int *out_count) {
  sqlite3 *db = NULL;
  if (db_open(path, false, &db)) {
    return 1;
  }
  sqlite3_stmt *st = NULL;
  bench_run_t *runs = NULL;
  int count = 0, cap = 0, rc = 0, step = SQLITE_DONE;
  // One read transaction: a consistent snapshot while writers go on.
  sqlite3_exec(db, "BEGIN;", NULL, NULL, NULL);
  if (sqlite3_prepare_v2(db,
                         "SELECT id, commit_id, time, build_type, host, meta "
                         "FROM runs ORDER BY time, id",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = db_fail(db, path, "prepare");
  }
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      bench_run_t *bigger = realloc(runs, (size_t)cap * sizeof(*runs));
      if (bigger == NULL) {
        rc = db_fail(NULL, path, "load the runs");
        break;
      }
      runs = bigger;
    }
    rc = load_run_row(db, path, st, &runs[count]);
    count += rc == 0;
  }
  if (rc == 0 && step != SQLITE_DONE) {
    rc = db_fail(db, path, "read the runs");
  }
  sqlite3_finalize(st);
  sqlite3_exec(db, "COMMIT;", NULL, NULL, NULL);
  sqlite3_close(db);
  if (rc != 0) {
    for (int i = 0; i < count; ++i) {
      bench_run_free(&runs[i]);
    }
    free(runs);
    return 1;
  }
  *out_runs = runs;
  *out_count = count;
  return 0;
}
