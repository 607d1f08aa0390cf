{
  "targets": [
    {
      "target_name": "berth_inotify",
      "sources": ["src/providers/inotify.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "berth_dirflags",
      "sources": ["src/providers/dir-flags.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "berth_rename",
      "sources": ["src/providers/rename-exchange.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "berth_hashedwrite",
      "sources": ["src/providers/hashed-write.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "berth_sendfile",
      "sources": ["src/providers/send-file.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
