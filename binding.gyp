{
  "targets": [
    {
      "target_name": "berth_inotify",
      "sources": ["src/providers/inotify.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
