/**
 * How few appends an execution's lifecycle takes, through the runtime API and the stream replay: a quick command's
 * start, exit and drain are reported by its submit (the runtime appends one effect's outcomes together), and its
 * save too when it wrote nothing; a command with output is saved by its own step, and a longer one is watched to its
 * exit. Every lifecycle event is still recorded; the causation ids show which effect reported it. (Quick: exited
 * within the submit's 15 ms wait.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Berth } from '../../src/runtime/berth.ts';
import type { RecordedEvent } from '../../src/store/event-store.ts';
import { dockerAvailable, newTestRun, removeTestResources } from './docker-env.ts';
import { caller, environmentFor, readAll, settled, startTestBerth, tempDir, type ProviderKind } from './executions-harness.ts';

const EMPTY = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const LIFECYCLE = ['execution.accepted', 'execution.dispatched', 'execution.started', 'execution.exited', 'execution.drained', 'execution.saved'];

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
    const record = await settled(berth.api, id);
    const events = (await berth.api.replay(caller, `execution-${id}`)).map((step) => step.event);
    const byType = Object.fromEntries(events.map((e) => [e.type, e])) as Record<string, RecordedEvent>;
    expect(events.map((e) => e.type).filter((t) => LIFECYCLE.includes(t))).toEqual(LIFECYCLE);
    return { id, record, byType };
  }

  it.skipIf(skip)('reports a quick silent command from its submit: started to saved in one append, empty artifacts', async () => {
    const { id, record, byType } = await lifecycle(['/bin/sh', '-c', 'true']);
    expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
    const dispatched = byType['execution.dispatched'];
    for (const type of ['execution.started', 'execution.exited', 'execution.drained', 'execution.saved']) {
      expect(byType[type].metadata.causationId, type).toBe(dispatched.id);
    }
    expect(byType['execution.saved'].data).toMatchObject({ artifacts: { stdout: { digest: EMPTY, size: 0 }, stderr: { digest: EMPTY, size: 0 } } });
    expect((await readAll(berth.api, id, 'stdout')).length).toBe(0);
  });

  it.skipIf(skip)('saves a quick command with output in its own step, after the drain was recorded', async () => {
    const { id, byType } = await lifecycle(['/bin/sh', '-c', 'echo hello; echo oops >&2']);
    const dispatched = byType['execution.dispatched'];
    for (const type of ['execution.started', 'execution.exited', 'execution.drained']) {
      expect(byType[type].metadata.causationId, type).toBe(dispatched.id);
    }
    expect(byType['execution.saved'].metadata.causationId).toBe(byType['execution.drained'].id);
    expect((await readAll(berth.api, id, 'stdout')).toString()).toBe('hello\n');
    expect((await readAll(berth.api, id, 'stderr')).toString()).toBe('oops\n');
  });

  it.skipIf(skip)('reports a longer command started at once and watches it to its exit', async () => {
    const { record, byType } = await lifecycle(['/bin/sh', '-c', 'sleep 0.3; exit 4']);
    expect(record).toMatchObject({ status: 'exited', exitCode: 4 });
    expect(byType['execution.started'].metadata.causationId).toBe(byType['execution.dispatched'].id);
    expect(byType['execution.exited'].metadata.causationId).toBe(byType['execution.started'].id);
    expect(byType['execution.drained'].metadata.causationId).toBe(byType['execution.exited'].id);
  });
});
