import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import {
  compactionSummary,
  executionMachine,
  executionStatus,
  finished,
  reject,
  type ExecutionContext,
} from '../../../src/machines/execution.machine.ts';
import { viewOf } from '../../../src/machines/machine-view.ts';
import { executionActor, persistedRoundTrip, snapshotAfter } from './machine-actors.ts';

const ENV = `henv_${'c'.repeat(32)}`;
const ID = 'exe-1';
const spec = actorSpec(executionActor, { actorId: ID });
const target = { environmentId: ENV, allocationId: 'alloc-1', generation: 2 };

const accepted = {
  type: 'execution.accepted',
  operationId: 'op-1',
  inputDigest: 'sha256:aaa',
  environmentId: ENV,
  target,
  command: ['/bin/sh', '-c', 'echo hi'],
  cwd: '/work',
  env: { LANG: 'C.UTF-8' },
  stdin: false,
  timeoutMs: 30_000,
  version: 4,
  scope: 'team-a',
  at: 1_000,
};
const at = (type: string, t: number, fields: object = {}) => ({ type: `execution.${type}`, at: t, ...fields });
const dispatched = at('dispatched', 1_100);
const started = at('started', 1_200, { pid: 4242 });
const exited = at('exited', 1_300, { exitCode: 0, signal: null });
const drained = at('drained', 1_400, { sizes: { stdout: 3, stderr: 0 } });
const saved = at('saved', 1_500, { artifacts: { stdout: { digest: 'sha256:bbb', size: 3 } } });
const released = at('released', 1_600);
const cancelRequested = at('cancel_requested', 1_250);
const cancelConfirmed = at('cancel_confirmed', 1_280);
const recovered = { type: 'runtime.recovered', runtimeId: 'rt-1', epoch: 2, at: 9_000 };

const op = { executionId: ID, operationId: 'op-1', target };
const useParams = { allocationId: 'alloc-1', useId: ID, kind: 'execution' };
const act = (type: string, params: object = op) => ({ type, params });

const statusAfter = (history: object[]) => executionStatus(viewOf(snapshotAfter(executionActor, ID, history as never)));

describe('execution machine: the happy path', () => {
  it('should persist the operation and take an allocation use before anything is sent', () => {
    spec.when(accepted).then({ state: 'accepted', actions: [act('allocation.use', useParams)] });
    expect(statusAfter([accepted])).toBe('accepted');
  });

  it('should submit only after dispatch is persisted, with the stored spec', () => {
    spec.given([accepted]).when(dispatched).then({
      state: 'dispatched',
      actions: [
        act('executor.submit', {
          ...op,
          command: accepted.command,
          cwd: '/work',
          env: { LANG: 'C.UTF-8' },
          stdin: false,
          timeoutMs: 30_000,
          version: 4,
        }),
      ],
    });
  });

  it('should watch a started command and drain an exited one', () => {
    spec.given([accepted, dispatched]).when(started).then({ state: 'running', actions: [act('executor.watch')] });
    expect(statusAfter([accepted, dispatched, started])).toBe('running');
    spec.given([accepted, dispatched, started]).when(exited).then({ state: 'exited', actions: [act('executor.drain')] });
    // A fast command may already have exited when the submit returns.
    spec.given([accepted, dispatched]).when(exited).then({ state: 'exited', actions: [act('executor.drain')] });
    expect(statusAfter([accepted, dispatched, started, exited])).toBe('exited');
  });

  it('should save drained output, then release the spool and the use, then finish', () => {
    const history = [accepted, dispatched, started, exited];
    spec.given(history).when(drained).then({ state: 'drained', actions: [act('output.save', { ...op, sizes: { stdout: 3, stderr: 0 } })] });
    spec.given([...history, drained]).when(saved).then({
      state: 'saved',
      actions: [act('executor.release'), act('allocation.unuse', useParams)],
    });
    spec.given([...history, drained, saved]).when(released).then({ state: 'released', actions: [] });
    const done = snapshotAfter(executionActor, ID, [...history, drained, saved, released] as never);
    expect(finished(done)).toBe(true);
    expect(executionStatus(viewOf(done))).toBe('exited');
    expect(done.context).toMatchObject({ exit: { exitCode: 0, signal: null }, artifacts: { stdout: { size: 3 } }, pid: 4242 });
  });
});

describe('execution machine: one stream per operation', () => {
  it('should refuse a second acceptance: existing for the same input, operation_conflict for another', () => {
    spec.given([accepted]).when({ ...accepted, at: 2_000 }).thenRejects('invalid_state');
    const same = reject(snapshotAfter(executionActor, ID, [accepted] as never), { ...accepted, at: 2_000 });
    expect(same.detail).toMatchObject({ reason: 'already_accepted', operationId: 'op-1', status: 'accepted' });
    spec.given([accepted, dispatched]).when({ ...accepted, inputDigest: 'sha256:zzz' }).thenRejects('operation_conflict');
  });

  it('should refuse a target of another environment', () => {
    spec.when({ ...accepted, target: { ...target, environmentId: `henv_${'d'.repeat(32)}` } }).thenRejects('invalid_request');
  });
});

describe('execution machine: cancellation', () => {
  it('should cancel without running before dispatch, giving the use back', () => {
    spec.given([accepted]).when(cancelRequested).then({ state: 'closing', actions: [act('allocation.unuse', useParams)] });
    expect(statusAfter([accepted, cancelRequested])).toBe('cancelled');
    spec.given([accepted, cancelRequested]).when(dispatched).thenRejects('invalid_state');
    spec.given([accepted, cancelRequested]).when(released).then({ state: 'released' });
  });

  it('should persist a cancel before sending it, and record the executor\'s confirmation', () => {
    const running = [accepted, dispatched, started];
    spec.given(running).when(cancelRequested).then(({ context, actions }) => {
      expect(context.cancel).toBe('requested');
      expect(actions).toEqual([act('executor.cancel')]);
    });
    spec.given([...running, cancelRequested]).when(cancelConfirmed).then(({ context }) => expect(context.cancel).toBe('confirmed'));
    spec.given([...running, cancelRequested]).when(cancelRequested).thenRejects('invalid_state');
    // The exit may be observed before the confirmation arrives.
    spec.given([...running, cancelRequested, { ...exited, cancelled: true, exitCode: null, signal: 'SIGKILL' }]).when(cancelConfirmed).then({ state: 'exited' });
    expect(statusAfter([...running, cancelRequested, { ...exited, cancelled: true, exitCode: null, signal: 'SIGKILL' }])).toBe('cancelled');
  });

  it('should hold a cancel requested during submission until the receipt says running', () => {
    spec.given([accepted, dispatched]).when(cancelRequested).then({ state: 'dispatched', actions: [] });
    spec.given([accepted, dispatched, cancelRequested]).when(started).then({
      state: 'running',
      actions: [act('executor.cancel'), act('executor.watch')],
    });
  });

  it('should refuse a cancel once the command exited', () => {
    spec.given([accepted, dispatched, started, exited]).when(cancelRequested).thenRejects('invalid_state');
  });
});

describe('execution machine: the output quota', () => {
  const bounded = { ...accepted, outputLimitBytes: 1_000 };
  const exceeded = at('output_exceeded', 1_250, { written: 1_500, limit: 1_000 });
  const killed = { ...exited, cancelled: true, exitCode: null, signal: 'SIGKILL' };

  it('should watch a bounded command with its limit', () => {
    spec.given([bounded, dispatched]).when(started).then({ state: 'running', actions: [act('executor.watch', { ...op, outputLimitBytes: 1_000 })] });
  });

  it('should stop a command past its quota and say why, then watch for its exit without the limit', () => {
    spec.given([bounded, dispatched, started]).when(exceeded).then(({ context, actions }) => {
      expect(context.cancel).toBe('requested');
      expect(context.failure).toEqual({ code: 'quota_exceeded', message: expect.stringMatching(/1500 bytes.*quota of 1000 bytes/) });
      expect(actions).toEqual([act('executor.cancel'), act('executor.watch')]);
    });
    expect(statusAfter([bounded, dispatched, started, exceeded, killed])).toBe('cancelled');
    spec.given([bounded, dispatched, started, exceeded, killed]).when(recovered).then(({ context }) => {
      expect(context.failure?.code).toBe('quota_exceeded');
    });
  });

  it('should not cancel twice when a cancel was already requested', () => {
    spec.given([bounded, dispatched, started, cancelRequested]).when(exceeded).then({ state: 'running', actions: [act('executor.watch')] });
  });

  it('should refuse the report once the command exited', () => {
    spec.given([bounded, dispatched, started, exited]).when(exceeded).thenRejects('invalid_state');
  });
});

describe('execution machine: outcomes without an exit', () => {
  it('should fail before any receipt and give the use back', () => {
    const failed = at('failed', 1_050, { code: 'stale_target', message: 'generation 2 is no longer current' });
    spec.given([accepted]).when(failed).then({ state: 'closing', actions: [act('allocation.unuse', useParams)] });
    const s = snapshotAfter(executionActor, ID, [accepted, failed] as never);
    expect(executionStatus(viewOf(s))).toBe('failed');
    expect(s.context.failure).toEqual({ code: 'stale_target', message: 'generation 2 is no longer current' });
  });

  it('should record unknown when no receipt proves the outcome', () => {
    const unknown = at('unknown', 9_100, { reason: 'no receipt' });
    spec.given([accepted, dispatched]).when(unknown).then({ state: 'closing', actions: [act('allocation.unuse', useParams)] });
    expect(statusAfter([accepted, dispatched, unknown])).toBe('unknown');
    spec.given([accepted, dispatched, unknown]).when(started).thenRejects('invalid_state');
  });

  it('should refuse failure once a receipt exists', () => {
    spec.given([accepted, dispatched, started]).when(at('failed', 1_300, { code: 'x', message: 'y' })).thenRejects('invalid_state');
  });
});

describe('execution machine: recovery reconciles, never resubmits', () => {
  const cases: [string, object[], object[]][] = [
    ['accepted: take the use again (idempotent), which leads to dispatch', [accepted], [act('allocation.use', useParams)]],
    ['dispatched: inspect the receipt, abandoning if absent', [accepted, dispatched], [act('executor.inspect')]],
    ['running: reattach', [accepted, dispatched, started], [act('executor.watch')]],
    ['running with a cancel not confirmed: cancel again and reattach', [accepted, dispatched, started, cancelRequested], [act('executor.cancel'), act('executor.watch')]],
    ['exited: drain', [accepted, dispatched, started, exited], [act('executor.drain')]],
    ['drained: save', [accepted, dispatched, started, exited, drained], [act('output.save', { ...op, sizes: { stdout: 3, stderr: 0 } })]],
    ['saved: release spool and use', [accepted, dispatched, started, exited, drained, saved], [act('executor.release'), act('allocation.unuse', useParams)]],
    ['closing: give the use back', [accepted, cancelRequested], [act('allocation.unuse', useParams)]],
  ];

  for (const [name, history, actions] of cases) {
    it(`should yield only its reconciliation when ${name}`, () => {
      const outcome = spec.given(history as never).when(recovered).then({ actions: actions as never });
      expect(outcome.actions.map((a) => a.type)).not.toContain('executor.submit');
    });
  }

  it('should leave a released execution alone', () => {
    spec.given([accepted, cancelRequested, released]).when(recovered).thenRejects('invalid_state');
  });
});

describe('execution machine: snapshots', () => {
  it('should restore a persisted snapshot to the same state, context and status', () => {
    for (const history of [[accepted, dispatched, started, cancelRequested], [accepted, dispatched, started, exited, drained, saved, released]]) {
      const s = snapshotAfter(executionActor, ID, history as never);
      const r = persistedRoundTrip(executionMachine, s);
      expect([r.value, r.context, r.status, executionStatus(viewOf(r))]).toStrictEqual([s.value, s.context, s.status, executionStatus(viewOf(s))]);
    }
  });
});

describe('execution machine: retention compacts a released execution to its summary', () => {
  const full = [accepted, dispatched, started, exited, drained, saved, released];
  const summaryOf = (history: object[], output: 'removed' | 'archived' = 'removed') =>
    compactionSummary(viewOf(snapshotAfter(executionActor, ID, history as never)), output, 90_000);
  const recordOf = (s: ReturnType<typeof snapshotAfter>) => {
    const c = s.context as ExecutionContext;
    return { status: executionStatus(viewOf(s)), exit: c.exit && [c.exit.exitCode, c.exit.signal], failure: c.failure, operationId: c.operationId, inputDigest: c.inputDigest, target: c.target, command: c.command, scope: c.scope, createdAt: c.createdAt };
  };

  it('should take the summary only once released, with no effect, and end final', () => {
    const summary = summaryOf(full);
    expect(summary).toMatchObject({ status: 'exited', exitCode: 0, outputBytes: 3, output: 'removed', createdAt: 1_000, finishedAt: 1_600 });
    const outcome = spec.given(full as never).when(summary).then({ state: 'compacted', actions: [] });
    expect(outcome.context.retention).toEqual({ output: 'removed', at: 90_000 });
    const s = snapshotAfter(executionActor, ID, [...full, summary] as never);
    expect(s.status).toBe('done');
    expect(finished(s)).toBe(true);
    for (const unfinished of [[accepted], [accepted, dispatched, started], [accepted, dispatched, started, exited, drained, saved]]) {
      spec.given(unfinished as never).when(summary).thenRejects('invalid_state');
    }
  });

  it('should count a released execution as finished though retention may still compact it', () => {
    const s = snapshotAfter(executionActor, ID, full as never);
    expect(s.status).not.toBe('done');
    expect(finished(s)).toBe(true);
    spec.given(full as never).when(recovered).thenRejects('invalid_state');
  });

  it('should rebuild the same record from the summary alone, as the first event of a compacted stream', () => {
    const histories = [
      full,
      [accepted, cancelRequested, released],
      [accepted, dispatched, at('failed', 1_150, { code: 'stale_target', message: 'gone' }), released],
      [accepted, dispatched, at('unknown', 1_150, { reason: 'no receipt' }), released],
      [accepted, dispatched, started, cancelRequested, at('exited', 1_300, { exitCode: null, signal: 'SIGTERM', cancelled: true }), drained, saved, released],
    ];
    for (const history of histories) {
      const before = snapshotAfter(executionActor, ID, history as never);
      const summary = summaryOf(history, 'archived');
      const fromSummary = snapshotAfter(executionActor, ID, [summary] as never);
      expect(fromSummary.value).toBe('compacted');
      expect(recordOf(fromSummary)).toStrictEqual(recordOf(before));
      expect(recordOf(snapshotAfter(executionActor, ID, [...history, summary] as never))).toStrictEqual(recordOf(before));
    }
  });

  it('should answer a repeated acceptance of a compacted execution as already accepted, or a conflict for another input', () => {
    const summary = summaryOf(full);
    const e = spec.given([summary] as never).when(accepted).thenRejects('invalid_state');
    expect(e.detail.reason).toBe('already_accepted');
    spec.given([summary] as never).when({ ...accepted, inputDigest: 'sha256:other' }).thenRejects('operation_conflict');
  });

  it('should refuse to summarise an execution that is not released', () => {
    expect(() => summaryOf([accepted, dispatched, started])).toThrow(/only a released execution/);
  });
});
