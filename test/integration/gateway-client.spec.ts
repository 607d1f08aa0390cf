/**
 * The typed client against the gateway in this process over the real runtime: CRUD with typed errors,
 * `executions.run` delivering every byte once, a submit retried while the listener is down (one execution per
 * operationId), stdin, cancellation by AbortSignal, and `events.follow` resuming without gaps or repeats. Surviving
 * a restart of `berth serve` and a 1013 from it (the client must not share the server's event loop) are in
 * test/e2e/client.spec.ts.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Berth } from '../../src/client/berth-client.ts';
import { BerthApiError } from '../../src/client/berth-api-error.ts';
import { expectedOutput } from '../fixtures/emit-bytes.mjs';
import { waitFor } from '../fixtures/wait-for.ts';
import { emit, startGateway, tokens, type RunningGateway } from './gateway-fixture.ts';

let gw: RunningGateway;
let berth: Berth;
const backoff = { initialMs: 20, maxMs: 200, giveUpAfterMs: 10_000 };

beforeEach(async () => {
  gw = await startGateway({ limits: { chunkBytes: 64 * 1024 } });
  berth = await Berth.connect({ url: gw.url, token: tokens.alice, backoff });
});
afterEach(() => gw.close());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Berth client', () => {
  it('refuses a bad token with a typed error', async () => {
    const error = await Berth.connect({ url: gw.url, token: 'nope-nope-nope-nope' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BerthApiError);
    expect(error).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('creates, lists, gets and deletes environments, with server errors as BerthApiError', async () => {
    const created = await berth.environments.create({ name: 'Content Studio', profile: { provider: 'native' } });
    expect(created).toMatchObject({ object: 'environment', slug: 'content-studio', mount: '/env/content-studio' });
    expect((await berth.environments.list()).map((e) => e.id)).toEqual([created.id]);
    expect((await berth.environments.get(created.id)).name).toBe('Content Studio');
    const twin = await berth.environments.create({ name: 'content studio' }).catch((e: unknown) => e);
    expect(twin).toMatchObject({ status: 409, code: 'environment_exists', detail: { slug: 'content-studio' } });
    await berth.environments.delete(created.id);
    const gone = await berth.environments.get(created.id).catch((e: unknown) => e);
    expect(gone).toMatchObject({ status: 404, code: 'environment_not_found' });
  });

  it('pages a list: page() gives items and a next cursor, iterate() walks every page in order, list() gathers them all', async () => {
    const admin = await Berth.connect({ url: gw.url, token: tokens.admin, backoff });
    const ids: string[] = [];
    // More than the server's default page (100): list() has to follow the cursor.
    for (let i = 0; i < 103; i++) ids.push((await admin.environments.create({ name: `paged ${i}`, profile: { provider: 'native' } })).id);
    const first = await admin.environments.page({ limit: 40 });
    expect(first.items.map((e) => e.id)).toEqual(ids.slice(0, 40));
    expect(first.next).toEqual(expect.any(String));
    const last = await admin.environments.page({ limit: 40, cursor: (await admin.environments.page({ limit: 40, cursor: first.next })).next });
    expect(last.items.map((e) => e.id)).toEqual(ids.slice(80));
    expect(last.next).toBeUndefined();
    const walked: string[] = [];
    for await (const e of admin.environments.iterate({ limit: 10 })) walked.push(e.id);
    expect(walked).toEqual(ids);
    const newestFirst: string[] = [];
    for await (const e of admin.environments.iterate({ limit: 7, order: 'desc' })) newestFirst.push(e.id);
    expect(newestFirst).toEqual([...ids].reverse());
    expect((await admin.environments.list()).map((e) => e.id)).toEqual(ids);
    // alice sees none of the admin's, from any cursor.
    expect(await berth.environments.page({ cursor: first.next })).toEqual({ items: [] });
    const bad = await admin.environments.page({ cursor: 'not-a-cursor' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, code: 'invalid_request' });
  });

  it('runs a command and delivers stdout and stderr byte-identical with the final record', async () => {
    const env = await berth.environments.create({ name: 'run' });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    const record = await berth.executions.run(env.id, emit(1_000_000, 200), {
      onStdout: (c) => stdout.push(c),
      onStderr: (c) => stderr.push(c),
    });
    expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(Buffer.concat(stdout).equals(expectedOutput('stdout', 1_000_000))).toBe(true);
    expect(Buffer.concat(stderr).equals(expectedOutput('stderr', 125_000))).toBe(true);
    const output = await berth.executions.output(record.id, { stream: 'stderr', cursor: 124_000 });
    expect(output).toMatchObject({ next: 125_000, complete: true });
    expect(output.data.equals(expectedOutput('stderr', 125_000).subarray(124_000))).toBe(true);
  });

  it('retries a submit while the server is down with the same operationId, running it once', async () => {
    const env = await berth.environments.create({ name: 'down' });
    await gw.stop();
    const stdout: Buffer[] = [];
    const run = berth.executions.run(env.id, emit(5000, 20), { operationId: 'down-op', onStdout: (c) => stdout.push(c) });
    await sleep(300); // the scenario: the server stays down a while, the client retries meanwhile
    await gw.restart();
    const record = await run;
    expect(record.status).toBe('exited');
    expect(Buffer.concat(stdout).equals(expectedOutput('stdout', 5000))).toBe(true);
    expect(await berth.executions.list({ operationId: 'down-op' })).toHaveLength(1);
  });

  it('sends stdin and ends it', async () => {
    const env = await berth.environments.create({ name: 'stdin' });
    async function* input() {
      yield 'line one\n';
      await sleep(20); // paces the input: two writes, not one
      yield Buffer.from('line two\n');
    }
    const stdout: Buffer[] = [];
    const record = await berth.executions.run(env.id, ['cat'], { stdin: input(), onStdout: (c) => stdout.push(c) });
    expect(record.status).toBe('exited');
    expect(Buffer.concat(stdout).toString()).toBe('line one\nline two\n');
  });

  it('cancels the execution when the signal aborts', async () => {
    const env = await berth.environments.create({ name: 'abort' });
    const controller = new AbortController();
    let id = '';
    const run = berth.executions.run(env.id, ['sleep', '30'], {
      signal: controller.signal,
      onSubmitted: (r) => (id = r.id),
    });
    await waitFor(async () => id && (await berth.executions.get(id)).status === 'running', { what: 'the execution running' });
    controller.abort(new Error('user gave up'));
    await expect(run).rejects.toThrow('user gave up');
    expect((await berth.executions.get(id, { waitMs: 10_000 })).status).toBe('cancelled');
  });

  it('follows the audit feed and resumes across a restart without gaps or repeats', async () => {
    const feed = berth.events.follow();
    const seen: bigint[] = [];
    const names: string[] = [];
    const reading = (async () => {
      for await (const event of feed) {
        seen.push(event.position);
        if (event.type === 'environment.created') names.push((event.data as { name: string }).name);
        if (names.length === 4) break;
      }
    })();
    await berth.environments.create({ name: 'feed one' });
    await berth.environments.create({ name: 'feed two' });
    await waitFor(() => names.length >= 2, { intervalMs: 5, what: 'the first two creations in the feed' });
    await gw.stop();
    await sleep(200); // the scenario: the follower meets a server that is down for a while
    await gw.restart();
    await berth.environments.create({ name: 'feed three' });
    await berth.environments.create({ name: 'feed four' });
    await reading;
    feed.close();
    expect(names).toEqual(['feed one', 'feed two', 'feed three', 'feed four']);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort((a, b) => (a < b ? -1 : 1))).toEqual(seen);
  });
});
