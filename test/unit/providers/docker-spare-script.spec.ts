/**
 * The script a Docker spare exec runs (spare-exec.ts), fed to real shells' `sh -s` as the engine feeds it: the
 * sourced file gets exactly the arguments and variables given, in the shell's own process, and a script cut short
 * (a runtime killed in the middle of writing it) runs nothing at all.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spareScript } from '../../../src/providers/docker/spare-exec.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-spare-script-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Stands in for supervisor.sh: records its pid, its arguments (NUL-separated) and the environment it exports (as a
 * program it starts gets it).
 */
const sourced = join(dir, 'sourced.sh');
writeFileSync(sourced, `echo $$ >"$OUT.pid"; printf '%s\\0' "$@" >"$OUT.args"; /bin/sh -c 'cat /proc/$$/environ' >"$OUT.env"; exit 7\n`);

const shells = [['dash', '/usr/bin/dash', '-s'], ['busybox ash', '/usr/bin/busybox', 'sh', '-s']].filter(([, path]) => existsSync(path));

/** Runs `sh -s` with `input` on its stdin (the spare's attached stdin, closed after the script). */
function feed(argv: string[], input: string, env: Record<string, string>) {
  return spawnSync(argv[0], argv.slice(1), { input, env, encoding: 'utf8', timeout: 10_000 });
}

describe.each(shells)('spareScript under %s', (_name, ...argv) => {
  const odd = `it's "quoted" \\ $HOME \`x\` ;|&*?[] ~ é\nsecond line\n`;

  it('should hand the sourced file exactly the arguments and variables given, in the shell\'s own process', () => {
    const out = join(dir, `exact-${argv.length}`);
    const script = spareScript(sourced, ['run', odd, '--', '-x', ''], { OUT: out, ODD: odd, EMPTY: '' })!;
    const run = feed(argv, script, { PATH: '/usr/bin:/bin' });
    expect(run.status).toBe(7);
    expect(readFileSync(`${out}.args`, 'utf8').split('\0').slice(0, -1)).toEqual(['run', odd, '--', '-x', '']);
    const env = readFileSync(`${out}.env`, 'utf8').split('\0');
    expect(env).toContain(`ODD=${odd}`);
    expect(env).toContain('EMPTY=');
    expect(Number(readFileSync(`${out}.pid`, 'utf8'))).toBe(run.pid);
  });

  it('should run nothing of a script that was cut short', () => {
    const out = join(dir, `cut-${argv.length}`);
    const script = spareScript(sourced, ['run', '/spool/op', '--', '/bin/sh', '-c', 'true'], { OUT: out, A: 'one two' })!;
    // Every cut before the group's closing brace; the whole script minus its newline is the whole command.
    for (let length = 0; length < script.length - 1; length++) {
      feed(argv, script.slice(0, length), { PATH: '/usr/bin:/bin' });
      expect(existsSync(`${out}.args`), `ran after ${length} of ${script.length} bytes`).toBe(false);
    }
    feed(argv, script, { PATH: '/usr/bin:/bin' });
    expect(existsSync(`${out}.args`)).toBe(true);
  });
});

describe('spareScript', () => {
  it('should refuse names a shell cannot take as given, so they go through the exec\'s own environment', () => {
    expect(spareScript(sourced, ['run'], { 'NOT-A-NAME': 'x' })).toBeUndefined();
    for (const name of ['IFS', 'PWD', 'SHLVL', 'PPID', '_bsv_x', 'OPTIND']) expect(spareScript(sourced, ['run'], { [name]: 'x' })).toBeUndefined();
    expect(spareScript(sourced, ['run'], { PATH: '/bin', HOME: '/home/user' })).toBeDefined();
  });

  it('should quote the sourced path itself', () => {
    const odd = join(dir, "it's here.sh");
    writeFileSync(odd, 'exit 5\n');
    expect(spawnSync('/bin/sh', ['-s'], { input: spareScript(odd, ['a'], {})! }).status).toBe(5);
  });
});
