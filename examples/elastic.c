// Elastic training with a cluster group: a toy data-parallel loop that
// checkpoints, survives `kill -9` of a rank, and resumes with the survivors.
//
//   example-elastic rank NAME STEPS DIR   one rank: joins group NAME (min 2,
//                                         max 8), trains to STEPS,
//                                         checkpointing into DIR
//   example-elastic demo [RANKS]          forks RANKS ranks (default 4), kills
//                                         one with SIGKILL mid-run, starts a
//                                         replacement, and checks that every
//                                         rank ends with the weights of an
//                                         uninterrupted run
//
// The model is a vector of weights fitted to a fixed target by gradient
// descent; each step's update runs as a host call on the rank's stream (the
// in-flight work a failure must abort). On a failure the group's stop
// callback asks the training thread to destroy its stream with
// ACCEL_STREAM_FLAG_ABORT_ON_DESTROY (pending steps fail with
// ACCEL_ERROR_ABORTED) and waits until it has; on resume every rank reloads
// the last checkpoint (written by rank 0 of each epoch) and goes on with its
// new rank and size. ACCEL_CLUSTER_STORE=etcd (with
// ACCEL_CLUSTER_ETCD_ENDPOINTS) runs the same across hosts.
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <accel/accel.h>

#define WEIGHTS 256
#define CHECKPOINT_EVERY 5
#define STEP_SLEEP_NS 20000000L  // 20 ms per step: time for a kill mid-run

typedef struct model {
  uint64_t step;
  double w[WEIGHTS];
} model_t;

typedef struct trainer {
  accel_device_t *device;
  accel_stream_t *stream;
  model_t model;
  char checkpoint[512];
  pthread_mutex_t mutex;
  pthread_cond_t cond;     // broadcast when the stream is destroyed
  uint64_t epoch;          // guarded by mutex: the epoch being trained
  uint64_t stop_epoch;     // guarded by mutex: the last epoch stopped
  _Atomic uint64_t resumed_epoch;
} trainer_t;

static double target(int i) { return (double)(i % 17) - 8.0; }

static accel_status_t sgd_step(void *user) {
  model_t *m = user;
  for (int i = 0; i < WEIGHTS; ++i) {
    m->w[i] -= 0.1 * 2.0 * (m->w[i] - target(i));
  }
  m->step++;
  return ACCEL_OK;
}

static void model_init(model_t *m) {
  memset(m, 0, sizeof(*m));
}

static uint64_t model_checksum(const model_t *m) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *p = (const unsigned char *)m->w;
  for (size_t i = 0; i < sizeof(m->w); ++i) {
    h = (h ^ p[i]) * 1099511628211ull;
  }
  return h ^ m->step;
}

static void checkpoint_save(const trainer_t *t) {
  char tmp[600];
  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", t->checkpoint, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (f == NULL) {
    return;
  }
  fwrite(&t->model, sizeof(t->model), 1, f);
  fclose(f);
  rename(tmp, t->checkpoint);  // atomic: readers see a whole checkpoint
}

static void checkpoint_load(trainer_t *t) {
  FILE *f = fopen(t->checkpoint, "rb");
  model_init(&t->model);
  if (f != NULL) {
    if (fread(&t->model, sizeof(t->model), 1, f) != 1) {
      model_init(&t->model);
    }
    fclose(f);
  }
}

// Stop: ask the training thread to abort its stream, and wait until it has
// (the training thread checks at least every 5 ms while it has a stream).
static void on_stop(accel_cluster_group_t *g, uint64_t epoch, void *user) {
  (void)g;
  trainer_t *t = user;
  pthread_mutex_lock(&t->mutex);
  t->stop_epoch = epoch;
  while (t->stream != NULL && t->epoch <= epoch) {
    pthread_cond_wait(&t->cond, &t->mutex);
  }
  pthread_mutex_unlock(&t->mutex);
  fprintf(stderr, "pid %d: epoch %llu stopped\n", (int)getpid(),
          (unsigned long long)epoch);
}

static void on_resume(accel_cluster_group_t *g,
                      const accel_cluster_epoch_info_t *info, void *user) {
  (void)g;
  trainer_t *t = user;
  atomic_store(&t->resumed_epoch, info->epoch);
  fprintf(stderr, "pid %d: resumed epoch %llu as rank %u of %u\n",
          (int)getpid(), (unsigned long long)info->epoch, info->rank,
          info->size);
}

// Destroys the stream (pending steps fail with ACCEL_ERROR_ABORTED) and
// lets a waiting stop callback return.
static void drop_stream_locked(trainer_t *t) {
  if (t->stream != NULL) {
    accel_stream_destroy(t->stream);
    t->stream = NULL;
    pthread_cond_broadcast(&t->cond);
  }
}

static void drop_stream(trainer_t *t) {
  pthread_mutex_lock(&t->mutex);
  drop_stream_locked(t);
  pthread_mutex_unlock(&t->mutex);
}

// Called by the training thread while it trains: aborts the stream when the
// group stopped the epoch.
static bool abort_if_stopping(trainer_t *t) {
  pthread_mutex_lock(&t->mutex);
  bool stopping = t->stop_epoch >= t->epoch;
  if (stopping) {
    drop_stream_locked(t);
  }
  pthread_mutex_unlock(&t->mutex);
  return stopping;
}

static int fail(const char *what, accel_status_t s) {
  fprintf(stderr, "example-elastic: %s: %s (%s)\n", what, accel_last_error(),
          accel_status_name(s));
  return 1;
}

static accel_status_t open_stream(trainer_t *t, uint64_t epoch) {
  accel_stream_desc_t desc = {.struct_size = sizeof(desc),
                              .flags = ACCEL_STREAM_FLAG_ABORT_ON_DESTROY,
                              .name = "train"};
  pthread_mutex_lock(&t->mutex);
  t->epoch = epoch;
  accel_status_t s = accel_stream_create(t->device, &desc, &t->stream);
  pthread_mutex_unlock(&t->mutex);
  return s;
}

// Marks this rank finished in DIR and waits (at most a minute) until RANKS
// ranks have: the ranks of the epoch it finished in.
static void finish_barrier(const char *dir, uint32_t ranks) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%d.done", dir, (int)getpid());
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fclose(f);
  }
  for (int tries = 0; tries < 600; ++tries) {
    uint32_t done = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
      return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      size_t n = strlen(e->d_name);
      done += n > 5 && strcmp(e->d_name + n - 5, ".done") == 0;
    }
    closedir(d);
    if (done >= ranks) {
      break;
    }
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL);
  }
  // A last beat for the others to see the count too before this rank leaves.
  struct timespec linger = {0, 300000000};
  nanosleep(&linger, NULL);
}

static int run_rank(const char *name, uint64_t steps, const char *dir) {
  accel_runtime_t *rt = NULL;
  trainer_t *t = calloc(1, sizeof(*t));
  pthread_mutex_init(&t->mutex, NULL);
  pthread_cond_init(&t->cond, NULL);
  snprintf(t->checkpoint, sizeof(t->checkpoint), "%s/%s.ckpt", dir, name);
  accel_status_t s = accel_runtime_create(NULL, &rt);
  if (s != ACCEL_OK || (s = accel_device_get(rt, 0, &t->device)) != ACCEL_OK) {
    return fail("runtime", s);
  }
  accel_cluster_options_t o;
  accel_cluster_options_init(&o);
  o.name = name;
  o.min_size = 2;
  o.max_size = 8;
  // Generous timings for a shared machine (the defaults detect within
  // 250 ms); the first epoch forms once no rank joined for a second.
  o.heartbeat_interval_ns = 50000000ull;
  o.heartbeat_timeout_ns = 500000000ull;
  o.settle_ns = 1000000000ull;
  o.on_stop = on_stop;
  o.on_resume = on_resume;
  o.callback_user = t;
  accel_cluster_group_t *g = NULL;
  if ((s = accel_cluster_group_create(&o, &g)) != ACCEL_OK) {
    return fail("join", s);
  }
  uint64_t epoch = 0;
  uint32_t info_size = 0;
  int rc = 0;
  for (;;) {
    accel_cluster_epoch_info_t info = {.struct_size = sizeof(info)};
    s = accel_cluster_wait_epoch(g, epoch, 30ull * 1000000000ull, &info);
    if (s != ACCEL_OK) {
      rc = fail("waiting for an epoch", s);
      break;
    }
    epoch = info.epoch;
    checkpoint_load(t);
    if ((s = open_stream(t, epoch)) != ACCEL_OK) {
      rc = fail("stream", s);
      break;
    }
    bool interrupted = false;
    while (t->model.step < steps && !interrupted) {
      s = accel_stream_host_call(t->stream, sgd_step, &t->model);
      while (s == ACCEL_OK) {
        s = accel_stream_synchronize(t->stream, 5000000ull);
        if (s != ACCEL_ERROR_TIMEOUT) {
          break;
        }
        s = ACCEL_OK;
        if (abort_if_stopping(t)) {
          s = ACCEL_ERROR_ABORTED;
        }
      }
      if (s != ACCEL_OK || abort_if_stopping(t) ||
          atomic_load(&t->resumed_epoch) != epoch) {
        interrupted = true;
        break;
      }
      // Between steps the stream is idle: a stop may come any time.
      if (info.rank == 0 && t->model.step % CHECKPOINT_EVERY == 0) {
        checkpoint_save(t);
      }
      for (int k = 0; k < 4 && !abort_if_stopping(t); ++k) {
        struct timespec pause = {0, STEP_SLEEP_NS / 4};
        nanosleep(&pause, NULL);
      }
    }
    drop_stream(t);
    info_size = info.size;
    if (!interrupted) {
      printf("rank %u of %u (epoch %llu): step %llu checksum %016llx\n",
             info.rank, info.size, (unsigned long long)epoch,
             (unsigned long long)t->model.step,
             (unsigned long long)model_checksum(&t->model));
      break;
    }
  }
  // Leave only when every rank has finished: the group would otherwise see an
  // early finisher as a failure and restructure the others, and a rank
  // stopped late (a heartbeat missed on a loaded machine) could be left
  // alone, below the group's minimum size, waiting for an epoch that cannot
  // form. Until then this rank stays a member (its heartbeats go on), so a
  // late restructure still finds enough ranks.
  if (rc == 0) {
    finish_barrier(dir, info_size);
  }
  accel_cluster_group_destroy(g);
  accel_runtime_destroy(rt);
  free(t);
  return rc;
}

static pid_t spawn(const char *self, const char *name, const char *steps,
                   const char *dir, int out_fd) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_fd, 1);
    execl(self, self, "rank", name, steps, dir, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int run_demo(const char *self, int ranks) {
  char dir[] = "/tmp/accel-elastic-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  char name[64], out_path[128];
  snprintf(name, sizeof(name), "elastic-%d", (int)getpid());
  snprintf(out_path, sizeof(out_path), "%s/out", dir);
  FILE *out = fopen(out_path, "w+");
  const char *steps = "200";  // 4 s of steps: the replacement joins mid-run
  pid_t pids[16] = {0};
  for (int i = 0; i < ranks; ++i) {
    pids[i] = spawn(self, name, steps, dir, fileno(out));
  }
  struct timespec t = {1, 800000000};  // mid-run: 1 s of settling, then
                                       // about step 40
  nanosleep(&t, NULL);
  printf("demo: kill -9 %d\n", (int)pids[1]);
  kill(pids[1], SIGKILL);
  waitpid(pids[1], NULL, 0);
  struct timespec soon = {0, 300000000};
  nanosleep(&soon, NULL);
  pids[1] = spawn(self, name, steps, dir, fileno(out));
  printf("demo: replacement %d started\n", (int)pids[1]);
  int failed = 0;
  for (int i = 0; i < ranks; ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  // The reference: the same steps with no failure.
  model_t ref;
  model_init(&ref);
  while (ref.step < 200) {
    sgd_step(&ref);
  }
  char want[32], line[256];
  snprintf(want, sizeof(want), "%016llx",
           (unsigned long long)model_checksum(&ref));
  int finished = 0, matched = 0;
  rewind(out);
  while (fgets(line, sizeof(line), out) != NULL) {
    fputs(line, stdout);
    finished++;
    matched += strstr(line, want) != NULL;
  }
  fclose(out);
  accel_cluster_options_t o;
  accel_cluster_options_init(&o);
  o.name = name;
  accel_cluster_remove(&o);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  (void)!system(cmd);
  printf("demo: %d of %d ranks finished with the reference weights "
         "(%d failed)\n", matched, ranks, failed);
  return failed == 0 && finished == ranks && matched == ranks ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "rank") == 0) {
    return run_rank(argv[2], strtoull(argv[3], NULL, 10), argv[4]);
  }
  if (argc >= 2 && strcmp(argv[1], "demo") == 0) {
    int ranks = argc > 2 ? atoi(argv[2]) : 4;
    if (ranks < 3 || ranks > 8) {
      fprintf(stderr, "example-elastic: demo needs 3 to 8 ranks\n");
      return 2;
    }
    return run_demo(argv[0], ranks);
  }
  fprintf(stderr, "usage: example-elastic rank NAME STEPS DIR | demo [RANKS]\n");
  return 2;
}
