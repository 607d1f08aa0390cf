/*
 * sendFile(socketFd, fileFd, offset, length, waitMs): sends `length` bytes of the file from `offset` to the socket
 * with sendfile(2) on a thread of the pool, the kernel moving them from the page cache without a copy through
 * JavaScript. Both descriptors are duplicated before the work starts, so a socket closed by the event loop meanwhile
 * can never have its number reused under this work. The socket is non-blocking: when it is full the thread waits for
 * room, but at most `waitMs` at a time; a client that takes nothing for that long ends the work early, and the
 * caller sends the rest the ordinary way. Resolves with [bytes sent, errno or 0]; a file shorter than asked ends it
 * early with 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <unistd.h>
#include <node_api.h>

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int socket_fd;
  int file_fd;
  int64_t offset;
  int64_t length;
  int64_t sent;
  int32_t wait_ms;
  int error;
} job_t;

static void execute(napi_env env, void *data) {
  job_t *job = data;
  off_t offset = (off_t)job->offset;
  while (job->sent < job->length) {
    int64_t left = job->length - job->sent;
    ssize_t n = sendfile(job->socket_fd, job->file_fd, &offset, (size_t)(left > (1 << 30) ? (1 << 30) : left));
    if (n > 0) {
      job->sent += n;
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      job->error = errno;
      break;
    }
    struct pollfd room = {.fd = job->socket_fd, .events = POLLOUT};
    int ready = poll(&room, 1, job->wait_ms);
    if (ready == 0) break;
    if (ready < 0 && errno != EINTR) {
      job->error = errno;
      break;
    }
  }
  close(job->socket_fd);
  close(job->file_fd);
}

static void complete(napi_env env, napi_status status, void *data) {
  job_t *job = data;
  napi_value result, sent, error;
  napi_create_array_with_length(env, 2, &result);
  napi_create_int64(env, job->sent, &sent);
  napi_create_int32(env, job->error, &error);
  napi_set_element(env, result, 0, sent);
  napi_set_element(env, result, 1, error);
  napi_resolve_deferred(env, job->deferred, result);
  napi_delete_async_work(env, job->work);
  free(job);
}

static napi_value send_file(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t socket_fd = -1, file_fd = -1, wait_ms = 0;
  int64_t offset = 0, length = 0;
  napi_get_value_int32(env, argv[0], &socket_fd);
  napi_get_value_int32(env, argv[1], &file_fd);
  napi_get_value_int64(env, argv[2], &offset);
  napi_get_value_int64(env, argv[3], &length);
  napi_get_value_int32(env, argv[4], &wait_ms);
  job_t *job = calloc(1, sizeof *job);
  napi_value promise, name;
  napi_create_promise(env, &job->deferred, &promise);
  job->socket_fd = dup(socket_fd);
  job->file_fd = dup(file_fd);
  job->offset = offset;
  job->length = length;
  job->wait_ms = wait_ms;
  if (job->socket_fd < 0 || job->file_fd < 0) {
    /* Nothing sent: the work closes what was duplicated and reports why. */
    job->error = errno;
    job->length = 0;
  }
  napi_create_string_utf8(env, "berth.sendFile", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

static napi_value module_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"sendFile", NULL, send_file, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof *props, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, module_init)
