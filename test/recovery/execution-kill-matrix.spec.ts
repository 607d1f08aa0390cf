/**
 * The kill -9 matrix of issue 4, native and Docker: a child process starts Berth, submits a command that appends its
 * operation id to a file, writes 10 MiB of known bytes to stdout and some to stderr, and exits 3; the child SIGKILLs
 * itself right after one persisted execution event (BERTH_CRASH_AFTER). A new runtime on the same data directory
 * recovers, and for every cell: the command ran exactly once (or, where no receipt could exist, never, with an
 * `unknown` outcome), both streams read back through the API are byte-identical, and no allocation use is left.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { executionIdOf } from '../../src/runtime/executions/execution-service.ts';
import type { RuntimeApi } from '../../src/runtime/runtime-api.ts';
import { dockerAvailable, newTestRun, removeTestResources } from '../integration/docker-env.ts';
import {
  caller,
  environmentFor,
  readAll,
  run,
  startTestBerth,
  tempDir,
  type ProviderKind,
} from '../integration/executions-harness.ts';
import { gathered } from '../../src/runtime/core/stream-replay.ts';

const CRASH_POINTS = [
  'execution.accepted',
  'execution.dispatched',
  'execution.started',
  'execution.exited',
  'execution.drained',
  'execution.saved',
] as const;
/**
 * Where the runtime dies before anything was submitted: no receipt can exist, the outcome is unknown, nothing ran.
 * A submission appends accepted and dispatched together, so a kill after accepted also lands after dispatched.
 */
const NEVER_SUBMITTED = new Set<string>(['execution.accepted', 'execution.dispatched']);
/** The watch appends an exit with its drain (the receipt proves both): a kill after exited lands after drained. */
const appendedWith: Record<string, string> = { 'execution.accepted': 'execution.dispatched', 'execution.exited': 'execution.drained' };
const lastOfAppend = (crashAfter: string): string => appendedWith[crashAfter] ?? crashAfter;

const STDOUT_BYTES = 10 * 1024 * 1024;
const seq = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => `${i + 1}\n`).join(''));
const expectedStdout = seq(2_000_000).subarray(0, STDOUT_BYTES);
const expectedStderr = seq(5_000);

const child = join(import.meta.dirname, 'fixtures/execution-child.ts');
const dockerRun = newTestRun();
const dirs: { remove(): void }[] = [];

afterAll(async () => {
  for (const d of dirs) d.remove();
  if (dockerAvailable) await removeTestResources(dockerRun);
});

/** Runs the child until it exits; answers how it ended and its stderr (for diagnosis). */
function runChild(job: object, crashAfter: string): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  const p = spawn(process.execPath, ['--import', 'tsx', child, JSON.stringify(job)], {
    env: { ...process.env, BERTH_CRASH_AFTER: crashAfter },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  p.stderr.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  return new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal, stderr })));
}

/** Long-polls until the lifecycle is complete: saved and released, or closed without output and released. */
async function released(api: RuntimeApi, id: string, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const record = await api.getExecution(caller, id, 2_000);
    if (record.step === 'released') return record;
    if (Date.now() > deadline) throw new Error(`not released: ${JSON.stringify(record)}`);
    if (['saved', 'closing'].includes(record.step ?? '')) await sleep(20);
  }
}

const providers: ProviderKind[] = ['native', 'docker'];

describe.each(providers)('kill -9 matrix, %s provider', (kind) => {
  const skip = kind === 'docker' && !dockerAvailable;

  it.skipIf(skip).each(CRASH_POINTS)(
    'should recover a runtime killed right after %s: one run, identical output, no use left',
    { timeout: 180_000 },
    async (crashAfter) => {
      const dir = tempDir(`berth-kill-${kind}-`);
      dirs.push(dir);
      const operationId = `op-${crashAfter.replace('.', '-')}`;
      const idsFile = kind === 'native' ? join(dir.path, 'ids') : '/tmp/ids';
      const dataDir = join(dir.path, 'data');
      const job = {
        dataDir,
        provider: kind,
        docker: kind === 'docker' ? dockerRun : (false as const),
        operationId,
        // The pause keeps the run longer than a submit waits for a quick exit (FAST_EXIT_MS), so started, exited (with
        // drained) and saved are appended one by one and a kill can land between them.
        command: ['/bin/sh', '-c', `echo ${operationId} >> ${idsFile}; sleep 0.1; seq 1 2000000 | head -c ${STDOUT_BYTES}; seq 1 5000 >&2; exit 3`],
      };

      const died = await runChild(job, crashAfter);
      expect(died.signal, `the child should die at ${crashAfter}; stderr:\n${died.stderr}`).toBe('SIGKILL');

      const berth = await startTestBerth(dataDir, job.docker, 'rt_child');
      try {
        const { api } = berth;
        const id = executionIdOf(caller.scope, operationId);
        const record = await released(api, id);
        // The kill landed right after that event, and the next runtime picked the execution up from there.
        const types = (await gathered(await api.replay(caller, `execution-${id}`))).map((step) => step.event.type);
        expect(types[types.indexOf(lastOfAppend(crashAfter)) + 1]).toBe('runtime.recovered');
        const environment = await environmentFor(api, kind);
        // Checked before the command that reads the ids file back takes a use of its own.
        const allocations = (await api.listAllocations(caller, environment)).items;
        expect(allocations.length).toBeGreaterThan(0);
        for (const a of allocations) expect(a.uses).toEqual([]);
        let ids: string;
        if (kind === 'native') ids = existsSync(idsFile) ? readFileSync(idsFile, 'utf8') : '';
        else {
          const cat = await run(api, environment, ['/bin/sh', '-c', `cat ${idsFile} 2>/dev/null; true`]);
          await released(api, cat.id);
          ids = cat.stdout;
        }
        const runs = ids.split('\n').filter((line) => line === operationId).length;

        if (NEVER_SUBMITTED.has(crashAfter)) {
          expect(record).toMatchObject({ status: 'unknown', failure: { code: 'unknown' } });
          expect(runs).toBe(0);
        } else {
          expect(record).toMatchObject({ status: 'exited', exitCode: 3, signal: null });
          expect(runs).toBe(1);
          const [stdout, stderr] = await Promise.all([readAll(api, id, 'stdout'), readAll(api, id, 'stderr')]);
          expect(stdout.length).toBe(STDOUT_BYTES);
          expect(stdout.equals(expectedStdout)).toBe(true);
          expect(stderr.equals(expectedStderr)).toBe(true);
        }

        if (kind === 'docker') for (const a of allocations) await api.release(caller, environment, a.allocationId);
      } finally {
        await berth.stop();
      }
    },
  );
});

describe('a terminal execution killed with its runtime', () => {
  it('should end unknown after recovery, never run again, and give its use back', { timeout: 120_000 }, async () => {
    const dir = tempDir('berth-kill-pty-');
    dirs.push(dir);
    const dataDir = join(dir.path, 'data');
    const marker = join(dir.path, 'runs');
    const job = {
      dataDir,
      provider: 'native',
      docker: false,
      operationId: 'op-pty',
      command: ['/bin/sh', '-c', `echo run >> ${marker}; sleep 1000`],
      pty: { cols: 80, rows: 24 },
    };
    const died = await runChild(job, 'execution.started');
    expect(died.signal, died.stderr).toBe('SIGKILL');

    const berth = await startTestBerth(dataDir, false, 'rt_child');
    try {
      // The terminal was held by the dead runtime: no receipt can exist, so the outcome is unknown.
      const record = await released(berth.api, executionIdOf(caller.scope, 'op-pty'));
      expect(record).toMatchObject({ status: 'unknown', failure: { code: 'unknown' } });
      expect(readFileSync(marker, 'utf8')).toBe('run\n');
      const [allocation] = (await berth.api.listAllocations(caller, await environmentFor(berth.api, 'native'))).items;
      expect(allocation.uses).toEqual([]);
    } finally {
      await berth.stop();
    }
  });
});
