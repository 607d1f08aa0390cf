/*
 * markTopDir(dirFd): sets ext4's "top of directory hierarchies" flag (FS_TOPDIR_FL, `chattr +T`) on the directory
 * open as dirFd, the one thing spread-dirs.ts needs that node cannot do (an ioctl). 0, or -errno (a filesystem
 * without the flag answers ENOTTY or EOPNOTSUPP).
 */
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <node_api.h>

static napi_value mark_top_dir(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fd = -1;
  napi_get_value_int32(env, argv[0], &fd);
  /* The kernel reads and writes an int, whatever the ioctl's declared type says. */
  int flags = 0;
  int result = 0;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0) result = -errno;
  else if (!(flags & FS_TOPDIR_FL)) {
    flags |= FS_TOPDIR_FL;
    if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0) result = -errno;
  }
  napi_value out;
  napi_create_int32(env, result, &out);
  return out;
}

static napi_value module_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"markTopDir", NULL, mark_top_dir, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof *props, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, module_init)
