/**
 * `berth env …` gives the same answers in both of its modes: one command sequence (create, ls, show, acquire,
 * release, push, build, versions, activate, rm, and the refusals between) run against an in-process data directory
 * and against a real `berth serve` with --url, compared line by line once ids and clocks are masked.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let scratch: string;
beforeAll(async () => {
  server = await startServer();
  scratch = mkdtempSync(path.join(tmpdir(), 'berth-env-parity-'));
  // Searchable by the sandbox identity, as the server's own data directory is: builds run as that identity.
  chmodSync(scratch, 0o711);
  mkdirSync(path.join(scratch, 'project'));
  writeFileSync(path.join(scratch, 'project', 'setup.sh'), 'echo "parity setup"\n');
}, 90_000);
afterAll(async () => {
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

type Env = (args: string[]) => Promise<{ code: number | null; stdout: string; stderr: string }>;

const modes: Record<string, () => Env> = {
  'in-process': () => (args) => berth(['env', ...args, '--data-dir', path.join(scratch, 'data')], cleanEnv({ BERTH_DOCKER: '0' })),
  // The admin token: an admin of the default scope, as the in-process mode acts (members get other profile defaults).
  server: () => (args) => berth(['env', ...args, '--url', server.url, '--token', tokens.admin], cleanEnv()),
};

/**
 * Ids, clocks and host-specific resource names masked; what is left must be equal across modes. The in-process
 * runtime's own log lines (JSON, on stderr) are not the command's answer: a server writes them to its own stderr.
 */
const masked = (text: string) =>
  text
    .replace(/^\{"level":\d+,.*\n/gm, '')
    .replace(/henv_[0-9a-f]{32}/g, '<env>')
    .replace(/halloc_[0-9a-f-]{36}/g, '<allocation>')
    .replace(/"(createdAt|updatedAt|started_at|finished_at)":\d+/g, '"$1":<t>')
    .replace(/"resourceId":"[^"]*"/g, '"resourceId":<r>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, '<date>');

interface Step {
  args: string[];
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the sequence in one mode and returns its transcript. */
async function transcript(env: Env): Promise<{ steps: Step[]; json: Map<string, any>; buildingAfterExit: boolean }> {
  const steps: Step[] = [];
  /** The unmasked answer of each --json step, parsed. */
  const json = new Map<string, any>();
  const record = (args: string[], done: Awaited<ReturnType<Env>>) => {
    steps.push({ args, code: done.code, stdout: masked(done.stdout), stderr: masked(done.stderr) });
    if (args.includes('--json') && done.code === 0 && done.stdout) json.set(args.join(' '), JSON.parse(done.stdout));
  };
  const step = async (...args: string[]) => record(args, await env(args));
  await step('create', 'Parity Box', '--idle-seconds', '30', '--json');
  await step('create', 'Parity Box');
  await step('ls');
  await step('show', 'Parity Box', '--json');
  await step('show', 'parity-box');
  await step('acquire', 'parity-box', '--json');
  await step('release', 'parity-box', '--json');
  await step('push', 'parity-box', path.join(scratch, 'project'));
  await step('build', 'Parity Box', '--follow');
  await step('versions', 'parity-box');
  await step('build', 'parity-box');
  // The server goes on building after the command; the in-process runtime lets it finish before the command exits.
  let versions = await env(['versions', 'parity-box', '--json']);
  const buildingAfterExit = versions.stdout.includes('"building"');
  for (const deadline = Date.now() + 60_000; versions.stdout.includes('"building"') && Date.now() < deadline; ) {
    versions = await env(['versions', 'parity-box', '--json']);
  }
  record(['versions', 'parity-box', '--json'], versions);
  await step('activate', 'parity-box', '1', '--json');
  await step('activate', 'parity-box', '7');
  await step('create', 'Wide', '--network', 'wide');
  await step('acquire', 'no-such-env');
  await step('rm', 'parity-box');
  await step('ls', '--json');
  await step('show', 'parity-box');
  return { steps, json, buildingAfterExit };
}

describe('berth env in-process and over --url', () => {
  it('should answer the same command sequence with the same lines and exit codes', async () => {
    const [local, remote] = await Promise.all([transcript(modes['in-process']!()), transcript(modes.server!())]);
    expect(local.steps).toEqual(remote.steps);
    expect(local.buildingAfterExit).toBe(false);

    // What both said, so that two equally broken modes do not pass.
    const said = (args: string) => remote.steps.find((s) => s.args.join(' ') === args)!;
    expect(said('create Parity Box --idle-seconds 30 --json')).toMatchObject({ code: 0 });
    expect(remote.json.get('show Parity Box --json')).toMatchObject({ slug: 'parity-box', profile: { provider: 'native', idleSeconds: 30 } });
    expect(said('show parity-box').stdout).toMatch(/^<env> {2}Parity Box {2}native {2}idle {2}available\n$/);
    expect(remote.json.get('acquire parity-box --json')).toMatchObject({ state: 'ready', generation: 1 });
    expect(remote.json.get('release parity-box --json')).toMatchObject({ state: 'released' });
    expect(said(`push parity-box ${path.join(scratch, 'project')}`)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^1 files, \d+ bytes\n$/) });
    expect(said('build Parity Box --follow').stdout).toMatch(/parity setup\nversion 1 ready\n$/);
    expect(remote.json.get('versions parity-box --json')).toMatchObject({ active: 2, versions: [{ status: 'ready' }, { status: 'ready' }] });
    expect(remote.json.get('activate parity-box 1 --json')).toMatchObject({ active: 1 });
    expect(said('activate parity-box 7')).toMatchObject({ code: 1 });
    expect(said('create Wide --network wide')).toMatchObject({ code: 1, stderr: expect.stringMatching(/^berth: Invalid body\.profile\.network: /) });
    expect(said('acquire no-such-env')).toMatchObject({ code: 1, stderr: 'berth: No environment is named "no-such-env".\n' });
    expect(said('rm parity-box').code).toBe(0);
    expect(said('ls --json').stdout).toBe('');
  }, 600_000);
});
