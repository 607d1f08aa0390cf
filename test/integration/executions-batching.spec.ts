/**
 * How few appends an execution's lifecycle takes, through the runtime API and the stream replay: a quick command's
 * start, exit and drain are reported by its submit (the runtime appends one effect's outcomes together), and its
 * save too when it wrote nothing; a command with output is saved by its own step, and a longer one is watched to its
 * exit, which the watch reports with its drain (and save) in one append. Every lifecycle event is still recorded; the
 * causation ids show which effect reported it. (Quick: exited within the submit's 15 ms wait. That wait is the host's
 * timing, not the test's: a busy host sees `true` still running, so these specs assert the chain that holds on either
 * path, and the one-append shape when the submit saw the exit.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Berth } from '../../src/runtime/berth.ts';
import type { RecordedEvent } from '../../src/store/event-store.ts';
import { dockerAvailable, newTestRun, removeTestResources } from './docker-env.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { caller, environmentFor, readAll, run, settled, startTestBerth, tempDir, type ProviderKind } from './executions-harness.ts';
import { gathered } from '../../src/runtime/core/stream-replay.ts';

const EMPTY = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const LIFECYCLE = ['execution.accepted', 'execution.dispatched', 'execution.started', 'execution.exited', 'execution.drained', 'execution.saved'];
const AFTER_DISPATCH = LIFECYCLE.slice(LIFECYCLE.indexOf('execution.dispatched'));

/**
 * The steps after dispatch, grouped by the effect that reported them (one append each: the same causation id),
 * asserting the chain that holds on every path: the submit (caused by `dispatched`) reports a prefix of the run, and
 * each later group is reported by the step just before it.
 */
function reportGroups(byType: Record<string, RecordedEvent>): string[][] {
  const groups: string[][] = [];
  let reporter: unknown = byType['execution.dispatched'].id;
  AFTER_DISPATCH.slice(1).forEach((type, i) => {
    const cause = byType[type].metadata.causationId;
    if (cause === reporter && groups.length > 0) return void groups.at(-1)!.push(type);
    const before = byType[AFTER_DISPATCH[i]].id;
    if (groups.length > 0) expect(cause, `${type} is reported with the step before it or by it`).toBe(before);
    else expect(cause, 'the submit reports the start').toBe(before);
    reporter = cause;
    groups.push([type]);
  });
  expect(groups[0][0], 'the submit reports the start').toBe('execution.started');
  return groups;
}

/** The steps the submit reported (caused by `dispatched`, appended together). */
const reportedBySubmit = (byType: Record<string, RecordedEvent>): string[] => reportGroups(byType)[0];

describe.each<ProviderKind>(['native', 'docker'])('execution appends, %s provider', (kind) => {
  const skip = kind === 'docker' && !dockerAvailable;
  const labels = kind === 'docker' ? newTestRun() : false;
  let dir: ReturnType<typeof tempDir>;
  let berth: Berth;
  let environment: string;

  beforeAll(async () => {
    if (skip) return;
    dir = tempDir(`berth-batching-${kind}-`);
    berth = await startTestBerth(`${dir.path}/data`, labels);
    environment = await environmentFor(berth.api, kind);
  });

  afterAll(async () => {
    await berth?.stop();
    if (labels) await removeTestResources(labels);
    dir?.remove();
  });

  /** Runs `command` to its end; answers its record and its lifecycle events by type. */
  async function lifecycle(command: string[]) {
    const { id } = await berth.api.submitExecution(caller, { operationId: `op-${Math.random().toString(36).slice(2)}`, environment, command });
    return finish(id);
  }

  /** Waits until `id` settled; answers its record and its lifecycle events by type. */
  async function finish(id: string) {
    const record = await settled(berth.api, id);
    const events = (await gathered(await berth.api.replay(caller, `execution-${id}`))).map((step) => step.event);
    const byType = Object.fromEntries(events.map((e) => [e.type, e])) as Record<string, RecordedEvent>;
    expect(events.map((e) => e.type).filter((t) => LIFECYCLE.includes(t))).toEqual(LIFECYCLE);
    return { id, record, byType };
  }

  it.skipIf(skip)('reports a quick silent command from its submit: started to saved in one append, empty artifacts', async () => {
    const { id, record, byType } = await lifecycle(['/bin/sh', '-c', 'true']);
    expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
    const bySubmit = reportedBySubmit(byType);
    // A submit that saw the exit reports the whole run, the save included (nothing to copy).
    if (bySubmit.includes('execution.exited')) expect(bySubmit).toEqual(AFTER_DISPATCH.slice(1));
    expect(byType['execution.saved'].data).toMatchObject({ artifacts: { stdout: { digest: EMPTY, size: 0 }, stderr: { digest: EMPTY, size: 0 } } });
    expect((await readAll(berth.api, id, 'stdout')).length).toBe(0);
  });

  it.skipIf(skip)('saves a quick command with output in its own step, after the drain was recorded', async () => {
    const { id, byType } = await lifecycle(['/bin/sh', '-c', 'echo hello; echo oops >&2']);
    const bySubmit = reportedBySubmit(byType);
    // An exit the submit saw proves the drain (the receipt is written once every writer closed).
    if (bySubmit.includes('execution.exited')) expect(bySubmit).toContain('execution.drained');
    expect(bySubmit).not.toContain('execution.saved');
    expect(byType['execution.saved'].metadata.causationId).toBe(byType['execution.drained'].id);
    expect((await readAll(berth.api, id, 'stdout')).toString()).toBe('hello\n');
    expect((await readAll(berth.api, id, 'stderr')).toString()).toBe('oops\n');
  });

  it.skipIf(skip)('reports a longer command started at once and watches it to its exit', async () => {
    // The command exits only once the test saw it running (a second command in the same environment makes the flag):
    // the submit cannot see its exit however slow the host.
    const flag = `/tmp/berth-batching-go-${Math.random().toString(36).slice(2)}`;
    const command = ['/bin/sh', '-c', `while [ ! -e ${flag} ]; do sleep 0.02; done; rm -f ${flag}; exit 4`];
    const { id } = await berth.api.submitExecution(caller, { operationId: `op-${Math.random().toString(36).slice(2)}`, environment, command });
    await waitFor(async () => (await berth.api.getExecution(caller, id)).status === 'running', { timeoutMs: 20_000, what: `execution ${id} running` });
    await run(berth.api, environment, ['touch', flag]);
    const { record, byType } = await finish(id);
    expect(record).toMatchObject({ status: 'exited', exitCode: 4 });
    // The watch reports the exit with what its receipt proves: the drain, and the save of a run that wrote nothing.
    expect(reportGroups(byType)).toEqual([['execution.started'], ['execution.exited', 'execution.drained', 'execution.saved']]);
  });
});
