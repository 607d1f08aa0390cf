/**
 * Executions for callers: submit (idempotent per operationId within a scope), records, cancel, output by cursor,
 * stdin and resize. The execution id is derived from (scope, operationId), so a repeated submission lands on the
 * same stream: the same input returns the existing execution, a different one fails with operation_conflict.
 */
import { createHash } from 'node:crypto';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import type { ActorRuntime, ActorView } from '../actors/actor-runtime.ts';
import { executionStatus, type ExecutionContext, type ExecutionSnapshot } from '../machines/execution.machine.ts';
import { assertCommandEnv } from '../providers/command-env.ts';
import type { OutputStream } from '../providers/provider.ts';
import type { ReadModel } from '../projections/read-model.ts';
import type { ArtifactStore } from '../store/artifact-store.ts';
import { inScope, type EnvironmentService } from './environment-service.ts';
import type { Caller, ExecutionRecord, ExecutionStatus, OutputRead, SubmitExecutionInput } from './runtime-api.ts';
import type { Services } from './services.ts';
import { waitUntil } from './wait-until.ts';

/** Lifecycle steps after which the record and its output no longer change. */
const SETTLED = new Set(['saved', 'released', 'closing']);
const READ_MAX = 4 * 1024 * 1024;

export const executionIdOf = (scope: string, operationId: string): string =>
  `hexe_${createHash('sha256').update(`${scope}\0${operationId}`).digest('hex').slice(0, 32)}`;

const argvOf = (command: string[] | string): string[] => (typeof command === 'string' ? ['/bin/sh', '-c', command] : command);

/** Covers everything that decides what runs, so a reused operationId with another input is detected. */
export const inputDigestOf = (environmentId: string, input: SubmitExecutionInput): string =>
  `sha256:${createHash('sha256')
    .update(
      JSON.stringify({
        environmentId,
        command: argvOf(input.command),
        cwd: input.cwd ?? null,
        env: Object.entries(input.env ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)),
        stdin: input.stdin ?? false,
        pty: input.pty ?? null,
        timeoutMs: input.timeoutMs ?? null,
      }),
    )
    .digest('hex')}`;

export interface ExecutionServiceDeps {
  actors: ActorRuntime<Services>;
  environments: EnvironmentService;
  services: Services;
  artifacts: ArtifactStore;
  activity: ReadModel;
  now: () => number;
}

export class ExecutionService {
  constructor(private readonly deps: ExecutionServiceDeps) {}

  async submit(caller: Caller, input: SubmitExecutionInput, environmentId: string): Promise<ExecutionRecord> {
    const command = argvOf(input.command);
    if (command.length === 0 || command[0] === '') throw new BerthError('invalid_request', 'The command is empty.', {});
    if (input.env) assertCommandEnv(input.env);
    const id = executionIdOf(caller.scope, input.operationId);
    const inputDigest = inputDigestOf(environmentId, input);
    const existing = await this.deps.actors.get<ExecutionContext>('execution', id);
    if (existing && existing.state !== 'pristine') {
      if (existing.context.inputDigest !== inputDigest) {
        throw new BerthError('operation_conflict', 'The operationId is taken by a different input.', { operationId: input.operationId });
      }
      return this.record(existing);
    }
    const allocation = await this.deps.environments.acquire(caller, environmentId);
    try {
      const sent = await this.deps.actors.send('execution', id, {
        type: 'execution.accepted',
        operationId: input.operationId,
        inputDigest,
        environmentId,
        target: { environmentId, allocationId: allocation.allocationId, generation: allocation.generation },
        command,
        ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
        ...(input.env ? { env: input.env } : {}),
        stdin: input.stdin ?? false,
        ...(input.pty ? { pty: input.pty } : {}),
        ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
        scope: caller.scope,
        at: this.deps.now(),
      });
      return this.recordOf(id, sent.context as ExecutionContext, sent.snapshot as ExecutionSnapshot);
    } catch (e) {
      // Raced with a submission of the same operationId: answer as if it came first.
      if (isBerthError(e, 'invalid_state') && e.detail.reason === 'already_accepted') return this.get(caller, id);
      throw e;
    }
  }

  async get(caller: Caller, id: string, waitMs = 0): Promise<ExecutionRecord> {
    let view = await this.view(caller, id);
    if (waitMs > 0 && !SETTLED.has(String(view.state))) {
      await waitUntil(async () => {
        view = await this.view(caller, id);
        return SETTLED.has(String(view.state));
      }, Date.now() + waitMs).catch((e) => (isBerthError(e, 'unavailable') ? undefined : Promise.reject(e)));
    }
    return this.record(view);
  }

  async list(caller: Caller, query: { operationId?: string; environment?: string; status?: ExecutionStatus }): Promise<ExecutionRecord[]> {
    if (query.operationId !== undefined) {
      const view = await this.deps.actors.get<ExecutionContext>('execution', executionIdOf(caller.scope, query.operationId));
      const records = view && view.state !== 'pristine' ? [this.record(view)] : [];
      return records.filter((r) => (!query.environment || r.environment === query.environment) && (!query.status || r.status === query.status));
    }
    const entries = (this.deps.activity.query.list(caller.scope) as { id: string; environmentId: string; status: string }[]).filter(
      (x) => (!query.environment || x.environmentId === query.environment) && (!query.status || x.status === query.status),
    );
    return Promise.all(entries.map((x) => this.get(caller, x.id)));
  }

  async cancel(caller: Caller, id: string): Promise<ExecutionRecord> {
    await this.view(caller, id);
    try {
      await this.deps.actors.send('execution', id, { type: 'execution.cancel_requested', at: this.deps.now() });
    } catch (e) {
      // Already finished or already cancelling: cancel is idempotent for the caller.
      if (!isBerthError(e, 'invalid_state')) throw e;
    }
    return this.get(caller, id);
  }

  /** Bytes from `cursor`: from the saved artifact once saved, else live from the executor's spool. */
  async readOutput(caller: Caller, id: string, stream: OutputStream, cursor: number, maxBytes = READ_MAX): Promise<OutputRead> {
    const view = await this.view(caller, id);
    const c = view.context;
    const max = Math.min(Math.max(1, maxBytes), READ_MAX);
    const saved = c.artifacts?.[stream];
    if (SETTLED.has(String(view.state)) || c.artifacts) {
      if (!saved || cursor >= saved.size) return { data: Buffer.alloc(0), next: Math.max(cursor, saved?.size ?? 0), complete: true };
      const chunks: Buffer[] = [];
      for await (const chunk of this.deps.artifacts.read(saved, cursor, Math.min(saved.size, cursor + max))) chunks.push(chunk as Buffer);
      const data = Buffer.concat(chunks);
      return { data, next: cursor + data.length, complete: cursor + data.length >= saved.size };
    }
    if (!c.target.allocationId || ['accepted', 'pristine'].includes(String(view.state))) {
      return { data: Buffer.alloc(0), next: cursor, complete: false };
    }
    const executor = await this.deps.services.executorFor(c.target.allocationId);
    const chunk = await executor.read(c.operationId, stream, cursor, max);
    return { data: chunk.data, next: chunk.next, complete: false };
  }

  async waitForOutput(caller: Caller, id: string, timeoutMs: number): Promise<void> {
    const view = await this.view(caller, id);
    if (SETTLED.has(String(view.state))) return;
    if (['accepted', 'dispatched', 'pristine'].includes(String(view.state))) {
      await waitUntil(async () => !['accepted', 'dispatched'].includes(String((await this.view(caller, id)).state)), Date.now() + timeoutMs).catch(() => undefined);
      return;
    }
    const executor = await this.deps.services.executorFor(view.context.target.allocationId);
    await executor.waitForChange(view.context.operationId, timeoutMs);
  }

  async writeStdin(caller: Caller, id: string, bytes: Buffer): Promise<void> {
    const { executor, operationId } = await this.live(caller, id);
    await executor.writeStdin(operationId, bytes);
  }

  async endStdin(caller: Caller, id: string): Promise<void> {
    const { executor, operationId } = await this.live(caller, id);
    await executor.endStdin(operationId);
  }

  async resize(caller: Caller, id: string, cols: number, rows: number): Promise<void> {
    const { executor, operationId } = await this.live(caller, id);
    await executor.resize(operationId, cols, rows);
  }

  record(view: ActorView<ExecutionContext>): ExecutionRecord {
    const snapshot = { value: view.state, context: view.context } as unknown as ExecutionSnapshot;
    return this.recordOf(view.context.id, view.context, snapshot);
  }

  private recordOf(id: string, c: ExecutionContext, snapshot: ExecutionSnapshot): ExecutionRecord {
    const status = executionStatus(snapshot);
    return {
      id,
      operationId: c.operationId,
      environment: c.environmentId,
      target: c.target,
      command: c.command,
      status,
      ...(c.exit ? { exitCode: c.exit.exitCode, signal: c.exit.signal } : {}),
      ...(c.failure ? { failure: c.failure } : {}),
      ...(c.version !== undefined ? { version: c.version } : {}),
      step: String(snapshot.value),
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
    };
  }

  private async view(caller: Caller, id: string): Promise<ActorView<ExecutionContext>> {
    const view = /^hexe_[0-9a-f]{32}$/.test(id) ? await this.deps.actors.get<ExecutionContext>('execution', id) : undefined;
    if (!view || view.state === 'pristine' || !inScope(caller, view.context.scope)) {
      throw new BerthError('not_found', 'No such execution.', { executionId: id });
    }
    return view;
  }

  /** The executor of a running execution (stdin and resize only make sense while it runs). */
  private async live(caller: Caller, id: string) {
    await waitUntil(async () => (await this.view(caller, id)).state !== 'accepted', Date.now() + 30_000);
    const view = await this.view(caller, id);
    if (view.state !== 'running' && view.state !== 'dispatched') {
      throw new BerthError('invalid_state', 'The execution is not running.', { executionId: id, state: view.state });
    }
    const executor = await this.deps.services.executorFor(view.context.target.allocationId);
    return { executor, operationId: view.context.operationId };
  }
}
