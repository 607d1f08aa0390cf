/*
 * Sends `length` bytes of a file from `offset` to a socket, then, when `tail` > 0, reads the `tail` bytes after them,
 * looks at the file's stats again and sends those bytes only if the size, mtime and ctime (ns) are still the ones
 * given: a file changed during the send ends it without them. The bytes are copied into the socket from a read-only
 * mapping of the file (one copy, page cache to socket, against two through a buffer), never handed to it as pages
 * (sendfile(2)): a page handed over stays the file's until the client has taken it, so a change of the file after the
 * check could still reach the client under the version checked. Only the kernel touches the mapping: a file cut short
 * meanwhile makes the send fail with EFAULT (no SIGBUS), which ends it as a changed file. The tail is read into a
 * buffer before the check, so what is sent after the check is what was checked. The socket is non-blocking.
 *
 * sendFileNow(socketFd, fileFd, offset, length, tail, size, mtimeNs, ctimeNs) does it at once on the calling thread
 * and stops where the socket is full (a client on this host usually takes 4 MiB at once: no thread is woken at all).
 * sendFile(..., tail, waitMs, size, mtimeNs, ctimeNs) does it on a thread of the pool, waiting for room when the
 * socket is full, at most `waitMs` at a time: a client that takes nothing for that long ends the work early, and the
 * caller sends the rest the ordinary way. Both descriptors are duplicated for it, so a socket closed by the event
 * loop meanwhile can never have its number reused under the work. Each answers [bytes sent, errno or 0, changed
 * (0 or 1)] (the pool's through a promise); a file shorter than asked ends it early with 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <node_api.h>

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int socket_fd;
  int file_fd;
  int64_t offset;
  int64_t length;
  int64_t tail;
  int64_t size;
  int64_t mtime_ns;
  int64_t ctime_ns;
  int64_t sent;
  int32_t wait_ms;
  int error;
  int changed;
} job_t;

/* After EAGAIN: 1 when the socket has room again, 0 when the client took nothing for wait_ms or the call failed. */
static int room(job_t *job) {
  struct pollfd fd = {.fd = job->socket_fd, .events = POLLOUT};
  for (;;) {
    int ready = poll(&fd, 1, job->wait_ms);
    if (ready > 0) return 1;
    if (ready == 0) return 0;
    if (errno != EINTR) {
      job->error = errno;
      return 0;
    }
  }
}

/* Whether a write to the socket failed with `n`, and the work goes on after a wait for room (EAGAIN) or at once. */
static int go_on(job_t *job, ssize_t n) {
  if (n >= 0 || errno == EINTR) return 1;
  if (errno == EAGAIN) return job->wait_ms > 0 && room(job);
  job->error = errno;
  return 0;
}

static int64_t ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

/* The most the held-back last chunk may be: it is read into a buffer of its size (see above). */
#define TAIL_MAX (256 * 1024)

/* Sends `n` bytes of `bytes`; answers how many went (fewer when the socket stayed full or failed). */
static int64_t send_all(job_t *job, const char *bytes, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    ssize_t w = send(job->socket_fd, bytes + done, (size_t)(n - done), MSG_NOSIGNAL);
    if (w > 0) done += w;
    else if (!go_on(job, w)) break;
  }
  return done;
}

/* The `tail` bytes after what was sent (at most TAIL_MAX), sent only if they are all there and the file's stats are
 * those given. */
static void send_tail(job_t *job) {
  if (job->tail > TAIL_MAX) {
    job->error = EINVAL;
    return;
  }
  char *bytes = malloc((size_t)job->tail);
  if (bytes == NULL) {
    job->error = ENOMEM;
    return;
  }
  int64_t got = 0;
  while (got < job->tail) {
    ssize_t n = pread(job->file_fd, bytes + got, (size_t)(job->tail - got), (off_t)(job->offset + job->sent + got));
    if (n > 0) got += n;
    else if (n == 0 || errno != EINTR) break;
  }
  struct stat now;
  if (got < job->tail || fstat(job->file_fd, &now) != 0 || now.st_size != job->size || ns(now.st_mtim) != job->mtime_ns ||
      ns(now.st_ctim) != job->ctime_ns) {
    job->changed = 1;
  } else {
    job->sent += send_all(job, bytes, job->tail);
  }
  free(bytes);
}

/* How much of the file is mapped at a time. */
#define WINDOW (8 * 1024 * 1024)

/* The bytes before the tail, window by window from a mapping of the file, then the checked tail. */
static void run(job_t *job) {
  long page = sysconf(_SC_PAGESIZE);
  while (job->sent < job->length) {
    int64_t at = job->offset + job->sent;
    int64_t start = at - at % page;
    int64_t want = job->length - job->sent < WINDOW ? job->length - job->sent : WINDOW;
    size_t mapped = (size_t)(at - start + want);
    char *map = mmap(NULL, mapped, PROT_READ, MAP_SHARED | MAP_POPULATE, job->file_fd, start);
    if (map == MAP_FAILED) break; /* a file system without mappings: the caller sends the rest the ordinary way */
    int64_t went = send_all(job, map + (at - start), want);
    munmap(map, mapped);
    job->sent += went;
    if (went < want) break;
  }
  if (job->error == EFAULT) job->error = 0, job->changed = 1; /* the file shrank under the mapping */
  if (job->sent == job->length && job->tail > 0 && job->error == 0 && !job->changed) send_tail(job);
}

static void execute(napi_env env, void *data) {
  job_t *job = data;
  run(job);
  close(job->socket_fd);
  close(job->file_fd);
}

static napi_value outcome(napi_env env, job_t *job) {
  napi_value result, sent, error, changed;
  napi_create_array_with_length(env, 3, &result);
  napi_create_int64(env, job->sent, &sent);
  napi_create_int32(env, job->error, &error);
  napi_create_int32(env, job->changed, &changed);
  napi_set_element(env, result, 0, sent);
  napi_set_element(env, result, 1, error);
  napi_set_element(env, result, 2, changed);
  return result;
}

static void complete(napi_env env, napi_status status, void *data) {
  job_t *job = data;
  napi_resolve_deferred(env, job->deferred, outcome(env, job));
  napi_delete_async_work(env, job->work);
  free(job);
}

static int64_t int64_arg(napi_env env, napi_value value) {
  int64_t n = 0;
  bool lossless;
  if (napi_get_value_bigint_int64(env, value, &n, &lossless) != napi_ok) napi_get_value_int64(env, value, &n);
  return n;
}

static napi_value send_file_now(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  job_t job = {0};
  napi_get_value_int32(env, argv[0], &job.socket_fd);
  napi_get_value_int32(env, argv[1], &job.file_fd);
  job.offset = int64_arg(env, argv[2]);
  job.length = int64_arg(env, argv[3]);
  job.tail = int64_arg(env, argv[4]);
  job.size = int64_arg(env, argv[5]);
  job.mtime_ns = int64_arg(env, argv[6]);
  job.ctime_ns = int64_arg(env, argv[7]);
  run(&job); /* wait_ms 0: stops where the socket is full */
  return outcome(env, &job);
}

static napi_value send_file(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  job_t *job = calloc(1, sizeof *job);
  napi_value promise, name;
  napi_create_promise(env, &job->deferred, &promise);
  int32_t socket_fd = -1, file_fd = -1;
  napi_get_value_int32(env, argv[0], &socket_fd);
  napi_get_value_int32(env, argv[1], &file_fd);
  job->offset = int64_arg(env, argv[2]);
  job->length = int64_arg(env, argv[3]);
  job->tail = int64_arg(env, argv[4]);
  napi_get_value_int32(env, argv[5], &job->wait_ms);
  job->size = int64_arg(env, argv[6]);
  job->mtime_ns = int64_arg(env, argv[7]);
  job->ctime_ns = int64_arg(env, argv[8]);
  job->socket_fd = dup(socket_fd);
  job->file_fd = dup(file_fd);
  if (job->socket_fd < 0 || job->file_fd < 0) {
    /* Nothing sent: the work closes what was duplicated and reports why. */
    job->error = errno;
    job->length = 0;
    job->tail = 0;
  }
  napi_create_string_utf8(env, "berth.sendFile", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

static napi_value module_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"sendFile", NULL, send_file, NULL, NULL, NULL, napi_enumerable, NULL},
    {"sendFileNow", NULL, send_file_now, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof *props, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, module_init)
