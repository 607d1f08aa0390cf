/*
 * exchangeAt(dirFd, a, b): swaps the entries a and b of the directory open as dirFd in one step (renameat2 with
 * RENAME_EXCHANGE), which node cannot do. 0, or -errno (a filesystem without it answers EINVAL).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <node_api.h>

static napi_value exchange_at(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fd = -1;
  napi_get_value_int32(env, argv[0], &fd);
  char a[256], b[256];
  size_t la = 0, lb = 0;
  int32_t result = 0;
  if (napi_get_value_string_utf8(env, argv[1], a, sizeof a, &la) != napi_ok || la >= sizeof a - 1 ||
      napi_get_value_string_utf8(env, argv[2], b, sizeof b, &lb) != napi_ok || lb >= sizeof b - 1) {
    result = -ENAMETOOLONG;
  } else if (renameat2(fd, a, fd, b, RENAME_EXCHANGE) < 0) {
    result = -errno;
  }
  napi_value out;
  napi_create_int32(env, result, &out);
  return out;
}

static napi_value module_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"exchangeAt", NULL, exchange_at, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof *props, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, module_init)
