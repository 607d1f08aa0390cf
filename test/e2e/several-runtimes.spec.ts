/**
 * Several runtimes on one store (issue 17; over EventStoreDB, issue 21): two `berth serve` processes, each with its
 * own data directory and port, the same admin token, one store — a `sqlite:PATH` file, or the EventStoreDB test
 * server in its own process. Each runs its own executions exactly once; SIGKILLing one, or stopping and starting the
 * other, never makes one write into a stream the other created; retiring a live runtime hands its Docker executions
 * to the retiring runtime, which completes them without running them again while the old owner writes nothing more.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { dockerAvailable } from '../integration/docker-env.ts';
import { spawnEsdbServer, type EsdbProcess } from '../esdb-server/esdb-process.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from './berth-server.ts';
import { crossWrites, runtimeIdOf, storeEvents, writerOf } from './shared-store.ts';

const admin = tokens.admin;
/** Short, so that a runtime reconciling what it does not own would do it within the tests' windows. */
const serverEnv = { BERTH_MAINTENANCE_MS: '300' };

interface Pair {
  a: BerthServer;
  b: BerthServer;
  rtA: string;
  rtB: string;
  spec: string;
  scratch: string;
}

/** Starts A then B on the store `spec`. */
async function startPair(spec: string, scratch: string): Promise<Pair> {
  const a = await startServer(['--store', spec], serverEnv);
  const b = await startServer(['--store', spec], serverEnv).catch(async (e) => {
    await a.close();
    throw e;
  });
  const [rtA, rtB] = await Promise.all([runtimeIdOf(a), runtimeIdOf(b)]);
  return { a, b, rtA, rtB, spec, scratch };
}

const script = (runs: string, name: string, seconds: number) => ['sh', '-c', `echo run >> ${runs}; echo ${name}-start; sleep ${seconds}; echo ${name}-end`];

async function output(server: BerthServer, id: string): Promise<string> {
  return (await server.call(`/v1/executions/${id}/output?stream=stdout`, { token: admin })).text();
}

/** Neither runtime wrote into a stream the other created. */
async function expectNoCrossWrites(p: Pair): Promise<void> {
  const events = await storeEvents(p.spec, p.scratch);
  expect(crossWrites(events, p.rtA, p.rtB)).toEqual([]);
  expect(crossWrites(events, p.rtB, p.rtA)).toEqual([]);
}

/** (a): each runs its own; SIGKILL A mid-run, B is untouched; A restarted converges. */
async function ownExecutionsSurviveTheOthersKill(p: Pair): Promise<void> {
  const { a, b } = p;
  expect(p.rtA).not.toBe(p.rtB);
  const runsA = join(p.scratch, 'runs-a.txt');
  const runsB = join(p.scratch, 'runs-b.txt');
  const [envA, envB] = await Promise.all([createEnvironment(a, admin), createEnvironment(b, admin)]);
  const execA = await submit(a, envA, script(runsA, 'a', 6), {}, admin);
  const execB = await submit(b, envB, script(runsB, 'b', 3), {}, admin);
  await running(a, execA.id, admin);
  await waitFor(() => readFileSync(runsA, 'utf8'), { what: "A's command to start", until: (t) => t === 'run\n' });

  await a.stop('SIGKILL');
  // B's maintenance runs every 300 ms meanwhile: it must leave A's unfinished actors alone.
  const doneB = await finished(b, execB.id, admin);
  expect(doneB).toMatchObject({ status: 'exited', exitCode: 0 });
  expect(await output(b, execB.id)).toBe('b-start\nb-end\n');
  expect(readFileSync(runsB, 'utf8')).toBe('run\n');
  await expectNoCrossWrites(p);

  await a.restart('SIGKILL');
  expect(await runtimeIdOf(a)).toBe(p.rtA);
  const doneA = await finished(a, execA.id, admin);
  expect(doneA).toMatchObject({ status: 'exited', exitCode: 0 });
  expect(await output(a, execA.id)).toBe('a-start\na-end\n');
  expect(readFileSync(runsA, 'utf8')).toBe('run\n');
  await expectNoCrossWrites(p);
}

function sharedStoreCases(name: string, openStore: (scratch: string) => Promise<{ spec: string; stop(): Promise<void> }>, docker: boolean) {
  describe(`two runtimes on one ${name} store`, () => {
    let pair: Pair | undefined;
    let store: { spec: string; stop(): Promise<void> } | undefined;
    let scratch: string;

    beforeAll(async () => {
      scratch = mkdtempSync(join(tmpdir(), 'berth-several-'));
      store = await openStore(scratch);
      pair = await startPair(store.spec, scratch);
    });
    afterAll(async () => {
      await pair?.b.close();
      await pair?.a.close();
      await store?.stop();
      rmSync(scratch, { recursive: true, force: true });
    });

    it('should run each runtime\'s executions once, and leave B\'s untouched when A is SIGKILLed mid-run', { timeout: 240_000 }, async () => {
      await ownExecutionsSurviveTheOthersKill(pair!);
    });

    it('should read the shared store with the CLI\'s --store, both runtimes\' events in it', { timeout: 120_000 }, async () => {
      const p = pair!;
      const env = cleanEnv({ BERTH_DATA_DIR: join(p.scratch, 'no-server') });
      const listed = await berth(['events', '--store', p.spec, '--json'], env);
      expect(listed, listed.stderr).toMatchObject({ code: 0 });
      const writers = new Set(listed.stdout.trim().split('\n').map((line) => JSON.parse(line).metadata.runtimeId));
      expect([...writers]).toEqual(expect.arrayContaining([p.rtA, p.rtB]));
      const checked = await berth(['check-history', '--store', p.spec], env);
      expect(checked, checked.stderr).toMatchObject({ code: 0 });
    });

    it("should serve A's execution output from B, or send the reader to A (the bytes are in A's artifacts)", { timeout: 120_000 }, async () => {
      const { a, b, rtA } = pair!;
      const env = await createEnvironment(a, admin);
      const exec = await submit(a, env, ['echo', 'from-a'], {}, admin);
      expect(await finished(a, exec.id, admin)).toMatchObject({ status: 'exited', exitCode: 0 });
      await waitFor(() => a.call(`/v1/executions/${exec.id}/output?stream=stdout`, { token: admin }).then((r) => r.headers.get('x-berth-complete')), {
        what: "A's output saved",
        until: (complete) => complete === 'true',
      });
      const viaB = await b.call(`/v1/executions/${exec.id}/output?stream=stdout`, { token: admin });
      const answer = viaB.status === 409 ? await viaB.json() : await viaB.text();
      const redirect = { error: expect.objectContaining({ code: 'owned_elsewhere', detail: expect.objectContaining({ runtimeId: rtA, url: a.url }) }) };
      expect(answer).toEqual(viaB.status === 409 ? redirect : 'from-a\n');
    });

    it.skipIf(name !== 'sqlite')("should change nothing of A's when B stops cleanly and starts again", { timeout: 240_000 }, async () => {
      const p = pair!;
      const runs = join(p.scratch, 'runs-a2.txt');
      const env = await createEnvironment(p.a, admin);
      const exec = await submit(p.a, env, script(runs, 'a2', 8), {}, admin);
      await running(p.a, exec.id, admin);
      await p.b.restart('SIGTERM');
      // B works (and its 300 ms maintenance ticks) while A's command runs.
      const envB = await createEnvironment(p.b, admin);
      const execB = await submit(p.b, envB, script(join(p.scratch, 'runs-b2.txt'), 'b2', 2), {}, admin);
      expect(await finished(p.b, execB.id, admin)).toMatchObject({ status: 'exited', exitCode: 0 });
      expect(await finished(p.a, exec.id, admin)).toMatchObject({ status: 'exited', exitCode: 0 });
      expect(await output(p.a, exec.id)).toBe('a2-start\na2-end\n');
      expect(readFileSync(runs, 'utf8')).toBe('run\n');
      await expectNoCrossWrites(p);
    });

    it.skipIf(!docker || !dockerAvailable)(
      "should let B adopt A's running Docker executions when A is retired, complete them without a second run, and refuse A's writes",
      { timeout: 300_000 },
      async () => {
        const p = pair!;
        const env = await createEnvironment(p.a, admin, { provider: 'docker', image: 'berth-base:latest' });
        const exec = await submit(p.a, env, ['sh', '-c', 'echo run >> /tmp/runs; echo d-start; sleep 25; echo d-end'], {}, admin);
        await running(p.a, exec.id, admin);
        await waitFor(() => output(p.a, exec.id), { what: 'the Docker command to start', until: (t) => t === 'd-start\n', timeoutMs: 60_000 });

        const retired = await berth(['runtime', 'retire', p.rtA, '--url', p.b.url, '--token', admin], cleanEnv());
        expect(retired, retired.stderr).toMatchObject({ code: 0 });
        const runtimes = await p.b.json<{ runtimeId: string; state: string }[]>('/v1/runtimes', { token: admin });
        expect(runtimes.find((r) => r.runtimeId === p.rtA)).toMatchObject({ state: 'retired' });

        const done = await finished(p.b, exec.id, admin);
        expect(done).toMatchObject({ status: 'exited', exitCode: 0 });
        expect(await output(p.b, exec.id)).toBe('d-start\nd-end\n');
        // The command's side effect happened once: B reads the file in the same container.
        const check = await submit(p.b, env, ['cat', '/tmp/runs'], {}, admin);
        expect(await finished(p.b, check.id, admin)).toMatchObject({ status: 'exited', exitCode: 0 });
        expect(await output(p.b, check.id)).toBe('run\n');

        // A is alive, yet wrote nothing into the execution after B adopted it, and it exited once.
        expect((await p.a.json('/healthz', { token: null })).runtimeId).toBe(p.rtA);
        const events = (await storeEvents(p.spec, p.scratch)).filter((e) => e.stream === `execution-${exec.id}`);
        const adoption = events.findIndex((e) => e.type === 'actor.adopted');
        expect(events[adoption]).toMatchObject({ data: { from: p.rtA, to: p.rtB }, metadata: { runtimeId: p.rtB } });
        expect(events.slice(adoption + 1).filter((e) => writerOf(e) === p.rtA).map((e) => e.type)).toEqual([]);
        // Adopted while it ran: B recorded its exit.
        expect(events.filter((e) => e.type === 'execution.exited').map((e) => [events.indexOf(e) > adoption, writerOf(e)])).toEqual([[true, p.rtB]]);
      },
    );
  });
}

sharedStoreCases(
  'sqlite',
  async (scratch) => {
    mkdirSync(join(scratch, 'shared'));
    return { spec: `sqlite:${join(scratch, 'shared', 'events.sqlite3')}`, stop: async () => undefined };
  },
  true,
);

sharedStoreCases(
  'EventStoreDB',
  async () => {
    const server: EsdbProcess = await spawnEsdbServer();
    return { spec: server.url, stop: () => server.stop() };
  },
  false,
);
