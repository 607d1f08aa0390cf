/**
 * Executions end to end through the runtime API (startBerth on a real data directory), on the native provider and
 * on a real Docker engine: exactly-once per operationId, operation_conflict, stdin, PTY with resize, cancellation of
 * a whole process tree, stale targets refused before dispatch, secrets kept out of commands, and the activity view.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import type { ExecutionContext } from '../../src/machines/execution.machine.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { executionIdOf } from '../../src/runtime/executions/execution-service.ts';
import type { ExecutionRecord } from '../../src/runtime/runtime-api.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, execIn, newTestRun, removeTestResources } from './docker-env.ts';
import { caller, environmentFor, readAll, run, settled, startTestBerth, tempDir, type ProviderKind } from './executions-harness.ts';

const childFixture = join(import.meta.dirname, '../recovery/fixtures/execution-child.ts');
const uid = () => Math.random().toString(36).slice(2, 10);

/** Live (not zombie) host processes in process group `pgid`. */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z' && Number(fields[2]) === pgid) members.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return members;
}

const providers: ProviderKind[] = ['native', 'docker'];

describe.each(providers)('executions through the runtime API, %s provider', (kind) => {
  const skip = kind === 'docker' && !dockerAvailable;
  const labels = kind === 'docker' ? newTestRun() : false;
  let dir: ReturnType<typeof tempDir> | undefined;
  /** Where a command can leave a file the test reads back: the host, or the container's /tmp. */
  let scratch = '/tmp';
  let berth: Berth;
  let environment: string;
  const records: ExecutionRecord[] = [];

  /** A file's content as a command in the environment sees it ('' when missing). */
  const fileText = async (path: string) => (await run(berth.api, environment, ['/bin/sh', '-c', `cat ${path} 2>/dev/null; true`])).stdout;

  beforeAll(async () => {
    if (skip) return;
    dir = tempDir(`berth-exec-${kind}-`);
    if (kind === 'native') scratch = dir.path;
    berth = await startTestBerth(join(dir.path, 'data'), labels);
    environment = await environmentFor(berth.api, kind);
  });

  afterAll(async () => {
    // A failed test must not leave its command running: cancel whatever is still unfinished.
    const open = berth ? (((await berth.api.activity(caller)).items) as { id: string; unfinished: boolean }[]).filter((x) => x.unfinished) : [];
    for (const x of open) await berth.api.cancelExecution(caller, x.id).then(() => settled(berth.api, x.id), () => undefined);
    await berth?.stop();
    if (labels) await removeTestResources(labels);
    dir?.remove();
  });

  it.skipIf(skip)('should run an operationId once and refuse the same id with another command', async () => {
    const { api } = berth;
    const counter = `${scratch}/count-${uid()}`;
    const other = `${scratch}/other-${uid()}`;
    const input = { operationId: `once-${uid()}`, environment, command: ['/bin/sh', '-c', `echo ran >> ${counter}`] };
    const [a, b] = await Promise.all([api.submitExecution(caller, input), api.submitExecution(caller, input)]);
    expect(b.id).toBe(a.id);
    const first = await settled(api, a.id);
    expect(first).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await api.submitExecution(caller, input)).id).toBe(a.id);
    records.push(first);

    const conflict = await api.submitExecution(caller, { ...input, command: ['/bin/sh', '-c', `echo ran >> ${other}`] }).catch((e) => e);
    expect(isBerthError(conflict, 'operation_conflict')).toBe(true);
    expect(await fileText(counter)).toBe('ran\n');
    expect(await fileText(other)).toBe('');
    expect((await api.listExecutions(caller, { operationId: input.operationId })).items).toHaveLength(1);
  });

  it.skipIf(skip)('should feed stdin to cat and give back the very same bytes', async () => {
    const { api } = berth;
    const bytes = Buffer.concat([Buffer.from('hello\n'), Buffer.from([0, 1, 2, 254, 255]), Buffer.alloc(200_000, 'x')]);
    const submitted = await api.submitExecution(caller, { operationId: `stdin-${uid()}`, environment, command: ['cat'], stdin: true });
    await api.writeStdin(caller, submitted.id, bytes.subarray(0, 7));
    await api.writeStdin(caller, submitted.id, bytes.subarray(7));
    await api.endStdin(caller, submitted.id);
    const record = await settled(api, submitted.id);
    expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await readAll(api, submitted.id, 'stdout')).equals(bytes)).toBe(true);
    records.push(record);
  });

  it.skipIf(skip)('should run on a terminal of the requested size and show a resize to stty', async () => {
    const { api } = berth;
    const submitted = await api.submitExecution(caller, {
      operationId: `pty-${uid()}`,
      environment,
      command: ['/bin/sh', '-c', 'tty; stty size; read line; echo "got $line"; stty size'],
      stdin: true,
      pty: { cols: 100, rows: 30 },
    });
    await waitFor(async () => (await api.readOutput(caller, submitted.id, 'pty', 0)).data.toString(), {
      until: (text) => text.includes('30 100'),
      timeoutMs: 20_000,
      what: 'the first stty size',
    });
    await api.resize(caller, submitted.id, 132, 43);
    await api.writeStdin(caller, submitted.id, Buffer.from('abc\n'));
    const record = await settled(api, submitted.id);
    expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
    const text = (await readAll(api, submitted.id, 'pty')).toString();
    expect(text).toMatch(/^\/dev\/pts\/\d+\r\n30 100\r\n/);
    expect(text).toContain('got abc\r\n');
    expect(text).toMatch(/43 132\r\n$/);
    records.push(record);
  });

  it.skipIf(skip)("should cancel `sh -c 'sleep 1000 & sleep 1000; wait'` and leave none of it alive", async () => {
    const { api } = berth;
    const submitted = await api.submitExecution(caller, { operationId: `cancel-${uid()}`, environment, command: ['/bin/sh', '-c', 'sleep 1000 & sleep 1000; wait'] });
    await waitFor(async () => (await api.getExecution(caller, submitted.id)).status, { until: (s) => s === 'running', timeoutMs: 20_000, what: 'running' });
    // `started` is written as the command is launched, a moment before it has made its own process group.
    const expected = kind === 'native' ? 3 : 2;
    await waitFor(async () => (kind === 'native' ? await nativeTree(submitted.id) : await containerSleeps()), { until: (tree) => tree.length >= expected, timeoutMs: 20_000, what: 'the whole tree' });

    await api.cancelExecution(caller, submitted.id);
    const record = await settled(api, submitted.id);
    expect(record.status).toBe('cancelled');
    expect(record.signal ?? record.exitCode).toBeTruthy();
    expect(kind === 'native' ? await nativeTree(submitted.id) : await containerSleeps()).toEqual([]);
    records.push(record);
  });

  /** The live members of the command's process group, found from the pid its execution recorded. */
  async function nativeTree(id: string): Promise<number[]> {
    const view = await berth.runtime.actors.get<ExecutionContext>('execution', id);
    expect(view?.context.pid).toBeGreaterThan(0);
    return groupMembers(view!.context.pid!);
  }

  async function containerSleeps(): Promise<string[]> {
    const [allocation] = (await berth.api.listAllocations(caller, environment)).items;
    const ps = await execIn(allocation.identity!.resourceId, ['/bin/sh', '-c', 'ps -o pid,args']);
    return ps.output.split('\n').filter((line) => line.includes('sleep 1000'));
  }

  it.skipIf(skip)('should refuse a stale target generation before dispatch', async () => {
    const { api } = berth;
    const marker = `${scratch}/stale-${uid()}`;
    const command = ['/bin/sh', '-c', `echo ran > ${marker}`];
    const old = await api.acquire(caller, environment);
    await waitFor(async () => ((await api.listAllocations(caller, environment)).items)[0].uses, {
      until: (uses) => uses.length === 0,
      timeoutMs: 20_000,
      what: 'the earlier executions to give their uses back',
    });
    await api.release(caller, environment, old.allocationId);
    const current = await api.acquire(caller, environment);
    expect(current.generation).toBeGreaterThan(old.generation);
    const target = { environmentId: environment, allocationId: old.allocationId, generation: old.generation };

    // Named by the caller: refused before anything is persisted.
    const refused = await api.submitExecution(caller, { operationId: `stale-${uid()}`, environment, command, target }).catch((e) => e);
    expect(isBerthError(refused, 'stale_target')).toBe(true);

    // Persisted with the old target (as after a crash between acceptance and dispatch): fails, never dispatched.
    const operationId = `stale-accepted-${uid()}`;
    const id = executionIdOf(caller.scope, operationId);
    await berth.runtime.actors.send('execution', id, {
      type: 'execution.accepted',
      operationId,
      inputDigest: 'sha256:stale',
      environmentId: environment,
      target,
      command,
      stdin: false,
      scope: caller.scope,
      at: Date.now(),
    });
    const record = await settled(berth.api, id);
    expect(record).toMatchObject({ status: 'failed', failure: { code: 'stale_target' }, step: 'closing' });
    expect(await fileText(marker)).toBe('');
    records.push(record);
  });

  it.skipIf(skip)("should keep the runtime's secrets out of a command's environment", { timeout: 90_000 }, async () => {
    const secrets = {
      BERTH_TOKEN: `bt_${uid()}${uid()}`,
      AWS_SECRET_ACCESS_KEY: `aws-${uid()}${uid()}`,
      BERTH_EVENTSTORE_URL: `esdb://secret-${uid()}@localhost:2113`,
    };
    const childDir = tempDir('berth-secrets-');
    try {
      const job = { dataDir: childDir.path, provider: kind, docker: labels, operationId: 'env', command: ['env'] };
      const out = await new Promise<string>((resolve, reject) => {
        const p = spawn(process.execPath, ['--import', 'tsx', childFixture, JSON.stringify(job)], {
          env: { ...process.env, ...secrets },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let text = '';
        p.stdout.on('data', (b: Buffer) => (text += b.toString()));
        p.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`child exited ${code}`))));
      });
      const settledLine = JSON.parse(out.split('\n').find((l) => l.includes('"settled"'))!);
      expect(settledLine.settled).toMatchObject({ status: 'exited', exitCode: 0 });
      const env = Buffer.from(settledLine.stdout, 'base64').toString();
      expect(env).toMatch(/^PATH=/m);
      for (const [name, value] of Object.entries(secrets)) {
        expect(env).not.toContain(name);
        expect(env).not.toContain(value);
      }
      expect(env).not.toMatch(/^(BERTH_|DOCKER_|AWS_)/m);
    } finally {
      // A Docker allocation the child made carries this run's label: afterAll removes it.
      childDir.remove();
    }
  });

  it.skipIf(skip)('should list every execution in the activity view with status and failure, never payloads', async () => {
    const { api } = berth;
    const secretWord = `payload-${uid()}`;
    const done = await run(api, environment, ['/bin/sh', '-c', `echo ${secretWord}; echo ${secretWord} >&2; exit 4`], { env: { WORD: secretWord } });
    const long = await api.submitExecution(caller, { operationId: `long-${uid()}`, environment, command: ['sleep', '1000'] });
    await waitFor(async () => (await api.getExecution(caller, long.id)).status, { until: (s) => s === 'running', timeoutMs: 20_000, what: 'running' });

    const activity = (await api.activity(caller)).items as unknown as Record<string, unknown>[];
    const byId = new Map(activity.map((x) => [x.id, x]));
    for (const r of [...records, done]) {
      expect(byId.get(r.id), r.id).toMatchObject({ status: r.status, operationId: r.operationId, ...(r.failure ? { failure: r.failure } : {}) });
    }
    await waitFor(async () => (await api.getExecution(caller, done.id)).step, { until: (step) => step === 'released', timeoutMs: 20_000, what: 'released' });
    const finished = ((await api.activity(caller)).items as unknown as Record<string, unknown>[]).find((x) => x.id === done.id);
    expect(finished).toMatchObject({ status: 'exited', exitCode: 4, step: 'released', unfinished: false });
    expect(byId.get(long.id)).toMatchObject({ status: 'running', step: 'running', unfinished: true });
    expect(JSON.stringify(activity)).not.toContain(secretWord);

    await api.cancelExecution(caller, long.id);
    await settled(api, long.id);
  });
});
