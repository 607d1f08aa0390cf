/**
 * Descriptors a parent leaked to this process (open without close-on-exec) would reach every command it starts:
 * libuv's spawn and bwrap hand on whatever is not close-on-exec, and a directory or a socket of the parent's is a
 * way out of any sandbox (runc's CVE-2024-21626 was one). Everything Node, libuv, SQLite and Berth open is
 * close-on-exec, so such a descriptor above stderr can only be the parent's: closed at start, as daemons do.
 */
import { closeSync, readdirSync, readFileSync } from 'node:fs';

/** Linux's O_CLOEXEC, which /proc/PID/fdinfo's `flags` shows for a close-on-exec descriptor. */
const O_CLOEXEC = 0o2000000;

/** Closes every descriptor above 2 this process holds without close-on-exec. */
export function closeInheritedDescriptors(): void {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return; // no /proc: not Linux, where nothing here spawns sandboxed commands
  }
  for (const name of names) {
    const fd = Number(name);
    if (fd <= 2) continue;
    let info: string;
    try {
      info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
    } catch {
      continue; // the listing's own descriptor, closed once it was read
    }
    const flags = /^flags:\s+([0-7]+)$/m.exec(info);
    if (!flags || parseInt(flags[1]!, 8) & O_CLOEXEC) continue;
    closeSync(fd);
  }
}
