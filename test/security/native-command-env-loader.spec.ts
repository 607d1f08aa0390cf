/**
 * A member's command variables reach only the contained command. Every process that starts it on the host runs
 * before the sandbox, some as the root server (the supervisor's setsid, the control-group join, setpriv), one as
 * the sandbox identity in the host's namespaces (bwrap): none of them may run with the caller's variables, or a
 * caller's LD_PRELOAD (a library the member uploaded as environment content, at its host path, which the sandbox's
 * own /proc/self/mountinfo names) runs the member's code as root on the host.
 *
 * The library here is compiled at test time as a stand-in for the bytes a member would upload; its constructor
 * leaves `<euid>-<comm>` in a host directory that no contained command can write (the sandbox's root is read-only),
 * so any file there was made by a process outside the sandbox.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { submit, finished, tokens } from '../e2e/berth-server.ts';
import { build, createNamed, putFile, run } from '../e2e/content-client.ts';
import { bwrap, sandboxGround, type SandboxGround } from './native-sandbox-fixture.ts';

const cc = spawnSync('cc', ['--version']).status === 0;

const PAYLOAD = `
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void berth_probe(void) {
  const char *dir = getenv("PROBE_DIR");
  if (!dir) return;
  char comm[64] = {0};
  int c = open("/proc/self/comm", O_RDONLY);
  if (c >= 0) { if (read(c, comm, sizeof comm - 1) < 0) comm[0] = 0; close(c); }
  comm[strcspn(comm, "\\n")] = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/%d-%s", dir, (int)geteuid(), comm);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0666);
  if (fd >= 0) { if (write(fd, "x\\n", 2) < 0) {} close(fd); }
}
`;

describe.skipIf(!bwrap || !cc)("a member's command variables never reach the host processes that start its sandbox", () => {
  let g: SandboxGround;
  let probeDir: string;
  let library: string;
  let env: { id: string; slug: string };

  beforeAll(async () => {
    g = await sandboxGround('Loader');
    const source = join(g.root, 'probe.c');
    writeFileSync(source, PAYLOAD);
    const compiled = spawnSync('cc', ['-shared', '-fPIC', '-o', join(g.root, 'probe.so'), source], { encoding: 'utf8' });
    if (compiled.status !== 0) throw new Error(compiled.stderr);
    probeDir = join(g.root, 'probe');
    mkdirSync(probeDir);
    chmodSync(probeDir, 0o777);
    const created = await createNamed(g.server, 'Preloaded', tokens.alice, { contain: true });
    await putFile(g.server, created.id, 'probe.so', readFileSync(join(g.root, 'probe.so')));
    const built = await build(g.server, created.id);
    expect(built.status, built.log).toBe('ready');
    env = { id: created.id, slug: created.slug };
    library = join(g.dataDir, 'environments', env.id, 'versions', '1', 'probe.so');
  }, 180_000);
  afterAll(async () => {
    await g?.close();
  });

  it('the sandbox names the host path of its own version (so a member can aim LD_PRELOAD at it)', async () => {
    const { stdout } = await run(g.server, env.id, `grep -c ' ${join(g.dataDir, 'environments', env.id, 'versions', '1')} ' /proc/self/mountinfo`);
    expect(stdout.trim()).not.toBe('0');
  });

  const cases: Array<[string, Record<string, unknown>]> = [
    ['a plain command', {}],
    ['a command with stdin', { stdin: true }],
    ['a command on a terminal', { pty: { cols: 80, rows: 24 } }],
  ];
  for (const [what, extra] of cases) {
    it(`${what}: LD_PRELOAD runs nothing outside the sandbox, and the command still gets its variables`, async () => {
      const dir = join(probeDir, what.replaceAll(' ', '-'));
      mkdirSync(dir);
      chmodSync(dir, 0o777);
      const variables = { LD_PRELOAD: library, PROBE_DIR: dir, GREETING: 'hi there' };
      for (let i = 0; i < 3; i++) {
        // Several runs: the first starts its sandbox the ordinary way, later ones may find one made ahead of need.
        const accepted = await submit(g.server, env.id, 'echo "$GREETING/$PROBE_DIR"', { env: variables, ...extra }, tokens.alice);
        const record = await finished(g.server, accepted.id, tokens.alice);
        expect(record.status).toBe('exited');
        const stream = 'pty' in extra ? 'pty' : 'stdout';
        const out = await (await g.server.call(`/v1/executions/${accepted.id}/output?stream=${stream}`)).text();
        expect(out).toContain(`hi there/${dir}`);
      }
      expect(readdirSync(dir)).toEqual([]);
    }, 60_000);
  }
});
