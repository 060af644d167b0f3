// IPC: a buffer exported as a file descriptor is imported by another real
// process (this test binary re-executed), which reads what the exporter wrote
// and writes back; plus misuse of export and import.
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

#define IPC_SIZE ((1u << 20) + 123)

static int send_fd(int sock, int fd) {
  char byte = 'F';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  char ctrl[CMSG_SPACE(sizeof(int))];
  memset(ctrl, 0, sizeof(ctrl));
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock) {
  char byte = 0;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  char ctrl[CMSG_SPACE(sizeof(int))];
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
  if (recvmsg(sock, &msg, 0) != 1) {
    return -1;
  }
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (c == NULL || c->cmsg_type != SCM_RIGHTS) {
    return -1;
  }
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

// The importing process: checks the exporter's pattern, writes its own into
// the second half, maps a read-only view too, and reports by exit code.
static int child_main(int sock) {
  int fd = recv_fd(sock);
  if (fd < 0) {
    return 20;
  }
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  if (accel_runtime_create(NULL, &rt) != ACCEL_OK ||
      accel_device_get(rt, 0, &dev) != ACCEL_OK) {
    return 21;
  }
  accel_buffer_t *b = NULL, *ro = NULL;
  if (accel_buffer_import(dev, fd, IPC_SIZE, 0, &b) != ACCEL_OK ||
      accel_buffer_import(dev, fd, IPC_SIZE, ACCEL_IMPORT_FLAG_READ_ONLY,
                          &ro) != ACCEL_OK) {
    fprintf(stderr, "child: import failed: %s\n", accel_last_error());
    return 22;
  }
  close(fd);
  unsigned char *p = NULL, *r = NULL;
  accel_buffer_host_pointer(b, (void **)&p);
  accel_buffer_host_pointer(ro, (void **)&r);
  int rc = 0;
  for (uint32_t i = 0; i < IPC_SIZE / 2; ++i) {
    if (p[i] != (unsigned char)(i * 7 + 1) || r[i] != p[i]) {
      rc = 23;
      break;
    }
  }
  for (uint32_t i = IPC_SIZE / 2; i < IPC_SIZE; ++i) {
    p[i] = (unsigned char)(i * 3);
  }
  if (r[IPC_SIZE - 1] != (unsigned char)((IPC_SIZE - 1) * 3)) {
    rc = 24;  // both mappings are the same memory
  }
  accel_buffer_release(ro);
  accel_buffer_release(b);
  accel_runtime_destroy(rt);
  char ack = rc == 0 ? 'K' : 'X';
  if (write(sock, &ack, 1) != 1) {
    return 25;
  }
  return rc;
}

// A second process imports the buffer, sees the exporter's bytes, and its
// writes are seen by the exporter.
static void test_buffer_export_import_across_processes(void **state) {
  test_env_t *env = *state;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = IPC_SIZE,
                           .flags = ACCEL_BUFFER_FLAG_EXPORTABLE};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  unsigned char *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, (void **)&p));
  for (uint32_t i = 0; i < IPC_SIZE; ++i) {
    assert_int_equal(p[i], 0);  // fresh memory: nothing of anyone else's
  }
  for (uint32_t i = 0; i < IPC_SIZE / 2; ++i) {
    p[i] = (unsigned char)(i * 7 + 1);
  }
  int fd = -1;
  assert_accel_ok(accel_buffer_export(b, &fd));
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(sv[0]);
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", sv[1]);
    setenv("ACCEL_IPC_TEST_CHILD_SOCKET", arg, 1);
    execl("/proc/self/exe", "mem_ipc_test_child", (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  assert_int_equal(send_fd(sv[0], fd), 0);
  close(fd);
  char ack = 0;
  assert_int_equal(read(sv[0], &ack, 1), 1);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(ack, 'K');
  for (uint32_t i = IPC_SIZE / 2; i < IPC_SIZE; ++i) {
    assert_int_equal(p[i], (unsigned char)(i * 3));
  }
  close(sv[0]);
  accel_buffer_release(b);
}

// Export needs an exportable buffer; import needs exported memory of at
// least the size asked for.
static void test_buffer_export_and_import_reject_misuse(void **state) {
  test_env_t *env = *state;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 8192};
  accel_buffer_t *plain = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &plain));
  int fd = -7;
  assert_accel_status(accel_buffer_export(plain, &fd),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "EXPORTABLE"));
  assert_int_equal(fd, -7);
  assert_accel_status(accel_buffer_export(NULL, &fd),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.flags = ACCEL_BUFFER_FLAG_EXPORTABLE;
  d.kind = ACCEL_MEMORY_KIND_HOST_PINNED;
  accel_buffer_t *b = NULL;
  assert_accel_status(accel_buffer_alloc(env->device, &d, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.kind = ACCEL_MEMORY_KIND_DEVICE;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_accel_ok(accel_buffer_export(b, &fd));
  accel_buffer_t *imp = NULL;
  assert_accel_status(accel_buffer_import(env->device, fd, 1 << 20, 0, &imp),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_import(env->device, -1, 8192, 0, &imp),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_import(env->device, fd, 0, 0, &imp),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_import(env->device, fd, 8192, 0x80, &imp),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  assert_accel_status(
      accel_buffer_import(env->device, pipefd[0], 8192, 0, &imp),
      ACCEL_ERROR_INVALID_ARGUMENT);
  // A memfd accel never exported is refused, also one that has the same
  // name but no seals, and one with seals but another name (issue 15: any
  // memfd of the right size was accepted).
  const char *names[] = {"foreign", "accel-host-phys", "accel-host-phys"};
  const unsigned seals[] = {F_SEAL_GROW | F_SEAL_SHRINK, 0, 0};
  for (int i = 0; i < 3; ++i) {
    int mfd = memfd_create(names[i], MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(mfd >= 0);
    assert_int_equal(ftruncate(mfd, 8192), 0);
    if (seals[i] != 0) {
      assert_int_equal(fcntl(mfd, F_ADD_SEALS, seals[i]), 0);
    }
    assert_accel_status(accel_buffer_import(env->device, mfd, 8192, 0, &imp),
                        ACCEL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(accel_last_error(), "is not memory that accel"));
    close(mfd);
  }
  assert_null(imp);
  // In-process import works too, and survives the exporter's release.
  assert_accel_ok(accel_buffer_import(env->device, fd, 8192, 0, &imp));
  unsigned char *p = NULL, *q = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, (void **)&p));
  assert_accel_ok(accel_buffer_host_pointer(imp, (void **)&q));
  p[100] = 42;
  accel_buffer_release(b);
  assert_int_equal(q[100], 42);
  accel_buffer_release(imp);
  accel_buffer_release(plain);
  close(fd);
  close(pipefd[0]);
  close(pipefd[1]);
}

int main(void) {
  const char *child = getenv("ACCEL_IPC_TEST_CHILD_SOCKET");
  if (child != NULL) {
    return child_main(atoi(child));
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buffer_export_import_across_processes),
      cmocka_unit_test(test_buffer_export_and_import_reject_misuse),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
