/*
 * inotify as tree-watch.ts needs it, which node's fs.watch cannot give: libuv leaves IN_CLOSE_WRITE out of its mask
 * (the only event a change made through a shared mapping ever raises), drops IN_Q_OVERFLOW without a word, and
 * delivers events only on a later turn of the event loop. Here the queue is read synchronously: whatever changed
 * before drain() returned is in its answer, or the answer says the queue overflowed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <node_api.h>

#define WATCH_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
                    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

static napi_value number(napi_env env, double value) {
  napi_value out;
  napi_create_double(env, value, &out);
  return out;
}

static int32_t int_arg(napi_env env, napi_value value) {
  int32_t out = -1;
  napi_get_value_int32(env, value, &out);
  return out;
}

/* init(): a non-blocking inotify descriptor, or -errno. */
static napi_value init(napi_env env, napi_callback_info info) {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  return number(env, fd < 0 ? -errno : fd);
}

/* addWatch(fd, dirFd): watches the directory open as dirFd (its inode, whatever path leads there now); wd or -errno. */
static napi_value add_watch(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", int_arg(env, argv[1]));
  int wd = inotify_add_watch(int_arg(env, argv[0]), path, WATCH_MASK);
  return number(env, wd < 0 ? -errno : wd);
}

/* fsType(dirFd): the statfs magic number of the filesystem dirFd is on (one fstatfs, no path), or -errno. */
static napi_value fs_type(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  struct statfs st;
  if (fstatfs(int_arg(env, argv[0]), &st) < 0) return number(env, -errno);
  return number(env, (double)(unsigned long)st.f_type);
}

/* removeWatch(fd, wd) */
static napi_value remove_watch(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  inotify_rm_watch(int_arg(env, argv[0]), int_arg(env, argv[1]));
  return NULL;
}

/*
 * drain(fd): every event queued now, as a flat array [wd, mask, name, wd, mask, name, ...] (name '' for an event on
 * the watched directory itself), or -errno on a failed read. The kernel queue is bounded (max_queued_events, then
 * one IN_Q_OVERFLOW), so is the answer.
 */
static napi_value drain(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd = int_arg(env, argv[0]);
  napi_value out;
  napi_create_array(env, &out);
  uint32_t n = 0;
  /* Holds at least one whole event (a header and NAME_MAX + 1 bytes of name). */
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t len = read(fd, buf, sizeof buf);
    if (len < 0) {
      if (errno == EAGAIN) break;
      if (errno == EINTR) continue;
      return number(env, -errno);
    }
    for (char *p = buf; p < buf + len;) {
      struct inotify_event *e = (struct inotify_event *)p;
      napi_value name;
      napi_create_string_utf8(env, e->len ? e->name : "", e->len ? strnlen(e->name, e->len) : 0, &name);
      napi_set_element(env, out, n++, number(env, e->wd));
      napi_set_element(env, out, n++, number(env, e->mask));
      napi_set_element(env, out, n++, name);
      p += sizeof(struct inotify_event) + e->len;
    }
  }
  return out;
}

static napi_value module_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"init", NULL, init, NULL, NULL, NULL, napi_enumerable, NULL},
    {"addWatch", NULL, add_watch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"removeWatch", NULL, remove_watch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"fsType", NULL, fs_type, NULL, NULL, NULL, napi_enumerable, NULL},
    {"drain", NULL, drain, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof *props, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, module_init)
