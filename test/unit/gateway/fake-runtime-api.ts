/**
 * A SMALL in-memory RuntimeApi for the gateway tests and the WebSocket bench, and for nothing else. It exists only
 * because the real runtime (src/runtime) is being written at the same time as the gateway; once it lands, the
 * gateway tests should run over it with a temporary data directory and this file should go.
 *
 * It honours scopes through the Caller (another scope's resource is not_found) and keeps everything in memory.
 * An execution plays a script chosen by its command:
 *   ['emit', bytes, durationMs?, stderrBytes?]
 *                                 stdout gets `expectedOutput('stdout', bytes)` revealed in chunks over durationMs
 *                                 (default 300; 0: all at once), stderr `expectedOutput('stderr', stderrBytes)`
 *                                 (default bytes / 8); then exit 0.
 *   ['cat']                       stdin is echoed to stdout until the client ends stdin; then exit 0.
 *   anything else                 exits 0 at once without output.
 * With `pty`, what would go to stdout goes to the pty stream.
 */
import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import { BerthError } from '../../../schemas/errors.ts';
import type { OutputStream } from '../../../src/providers/provider.ts';
import type {
  AllocationView,
  Caller,
  CreateEnvironmentInput,
  EnvironmentView,
  ExecutionRecord,
  OutputRead,
  ReplayStep,
  RuntimeApi,
  SessionView,
  SubmitExecutionInput,
} from '../../../src/runtime/runtime-api.ts';
import type { RecordedEvent } from '../../../src/store/event-store.ts';

/** Deterministic pseudo-random bytes (AES-CTR keystream keyed by the stream name): fast, and misalignment shows. */
export function expectedOutput(stream: OutputStream, bytes: number): Buffer {
  const key = createHash('sha256').update(stream).digest().subarray(0, 16);
  return createCipheriv('aes-128-ctr', key, Buffer.alloc(16)).update(Buffer.alloc(bytes));
}

interface StreamState {
  data: Buffer;
  /** Bytes revealed so far. */
  length: number;
}

interface FakeExecution {
  scope: string;
  digest: string;
  record: ExecutionRecord;
  streams: Record<OutputStream, StreamState>;
  complete: boolean;
  stdinOpen: boolean;
  timer?: NodeJS.Timeout;
}

const terminal = new Set(['exited', 'cancelled', 'failed', 'unknown']);
const hexId = (prefix: string) => `${prefix}${randomBytes(16).toString('hex')}`;
const notFound = (what: string) => new BerthError('not_found', `${what} does not exist.`);

export class FakeRuntimeApi implements RuntimeApi {
  private readonly environments = new Map<string, { scope: string; view: EnvironmentView }>();
  private readonly sessions = new Map<string, { scope: string; view: SessionView }>();
  private readonly executions = new Map<string, FakeExecution>();
  private readonly log: RecordedEvent[] = [];
  private readonly wakers = new Set<() => void>();
  private readonly faults = new Map<string, Error>();
  /** Counts calls of `cancelExecution`, so tests can prove that a disconnect cancelled nothing. */
  cancelCalls = 0;

  /** The next call of `method` throws `error` (fault injection for the error handler tests). */
  failNext(method: keyof RuntimeApi, error: Error): void {
    this.faults.set(method, error);
  }

  private fault(method: keyof RuntimeApi): void {
    const error = this.faults.get(method);
    if (error) {
      this.faults.delete(method);
      throw error;
    }
  }

  private changed(): void {
    for (const wake of [...this.wakers]) wake();
  }

  private nextChange(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.wakers.add(done);
    });
  }

  private record(scope: string, stream: string, type: string, data: unknown): void {
    const revision = BigInt(this.log.filter((e) => e.stream === stream).length);
    this.log.push({
      id: randomUUID(),
      stream,
      revision,
      position: BigInt(this.log.length),
      type,
      data,
      metadata: { scope },
      createdAt: new Date().toISOString(),
    });
    this.changed();
  }

  capabilities(): Record<string, boolean> {
    return { environments: true, executions: true, websocket: true, sse: true };
  }

  async createEnvironment(caller: Caller, input: CreateEnvironmentInput): Promise<EnvironmentView> {
    this.fault('createEnvironment');
    const slug = input.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
    if (!slug) throw new BerthError('environment_invalid', 'The name yields no path segment.');
    if ([...this.environments.values()].some((e) => e.scope === caller.scope && e.view.slug === slug)) {
      throw new BerthError('environment_exists', `An environment already occupies /env/${slug}.`, { slug });
    }
    const now = Date.now();
    const view: EnvironmentView = {
      id: hexId('henv_'),
      object: 'environment',
      name: input.name,
      slug,
      description: input.description ?? '',
      entry: input.entry ?? '',
      status: 'empty',
      mount: `/env/${slug}`,
      version: null,
      latestVersion: null,
      profile: { provider: 'native', ...input.profile },
      availability: 'available',
      allocation: null,
      createdAt: now,
      updatedAt: now,
    };
    this.environments.set(view.id, { scope: caller.scope, view });
    this.record(caller.scope, `environment-${view.id}`, 'environment.defined', { name: view.name });
    return view;
  }

  async listEnvironments(caller: Caller): Promise<EnvironmentView[]> {
    return [...this.environments.values()].filter((e) => e.scope === caller.scope).map((e) => e.view);
  }

  async getEnvironment(caller: Caller, id: string): Promise<EnvironmentView> {
    const entry = this.environments.get(id);
    if (!entry || entry.scope !== caller.scope) throw new BerthError('environment_not_found', 'No such environment.');
    return entry.view;
  }

  async updateEnvironment(caller: Caller, id: string, patch: Partial<CreateEnvironmentInput>): Promise<EnvironmentView> {
    const view = await this.getEnvironment(caller, id);
    const { profile, ...rest } = patch;
    Object.assign(view, rest, profile && { profile: { ...view.profile, ...profile } }, { updatedAt: Date.now() });
    return view;
  }

  async deleteEnvironment(caller: Caller, id: string): Promise<void> {
    await this.getEnvironment(caller, id);
    this.environments.delete(id);
  }

  async acquire(caller: Caller, environmentId: string): Promise<AllocationView> {
    const view = await this.getEnvironment(caller, environmentId);
    const now = Date.now();
    view.allocation = { allocationId: `alloc_${view.id}`, generation: 1, state: 'ready' };
    return this.allocationView(view, now);
  }

  private allocationView(view: EnvironmentView, now = view.updatedAt): AllocationView {
    const allocation = view.allocation!;
    return {
      ...allocation,
      environmentId: view.id,
      provider: 'native',
      ownership: 'borrowed',
      uses: [],
      createdAt: now,
      updatedAt: now,
    };
  }

  async listAllocations(caller: Caller, environmentId: string): Promise<AllocationView[]> {
    const view = await this.getEnvironment(caller, environmentId);
    return view.allocation ? [this.allocationView(view)] : [];
  }

  async release(caller: Caller, environmentId: string, allocationId: string): Promise<AllocationView> {
    const view = await this.getEnvironment(caller, environmentId);
    if (view.allocation?.allocationId !== allocationId) throw notFound('The allocation');
    const released = { ...this.allocationView(view), state: 'released' };
    view.allocation = null;
    return released;
  }

  async activeAllocations(caller: Caller): Promise<AllocationView[]> {
    return (await this.listEnvironments(caller)).filter((v) => v.allocation).map((v) => this.allocationView(v));
  }

  async catalog(caller: Caller): Promise<EnvironmentView[]> {
    return this.listEnvironments(caller);
  }

  async createSession(
    caller: Caller,
    input: { environmentId?: string | null; workspaceId?: string; parentId?: string },
  ): Promise<SessionView> {
    if (input.environmentId) await this.getEnvironment(caller, input.environmentId);
    const view: SessionView = {
      id: hexId('sess_'),
      environmentId: input.environmentId ?? null,
      workspaceId: input.workspaceId ?? null,
      parentId: input.parentId ?? null,
      createdAt: Date.now(),
    };
    this.sessions.set(view.id, { scope: caller.scope, view });
    return view;
  }

  async getSession(caller: Caller, id: string): Promise<SessionView> {
    const entry = this.sessions.get(id);
    if (!entry || entry.scope !== caller.scope) throw notFound('The session');
    return entry.view;
  }

  async submitExecution(caller: Caller, input: SubmitExecutionInput): Promise<ExecutionRecord> {
    this.fault('submitExecution');
    const { operationId, ...rest } = input;
    const digest = createHash('sha256').update(JSON.stringify(rest)).digest('hex');
    const existing = [...this.executions.values()].find(
      (e) => e.scope === caller.scope && e.record.operationId === operationId,
    );
    if (existing) {
      if (existing.digest !== digest) throw new BerthError('operation_conflict', 'The operationId is taken.', { operationId });
      return existing.record;
    }
    const environmentId = input.session
      ? (await this.getSession(caller, input.session)).environmentId
      : input.environment!;
    if (!environmentId) throw new BerthError('environment_not_found', 'The session names no environment.');
    const environment = await this.getEnvironment(caller, environmentId);
    const command = typeof input.command === 'string' ? ['/bin/sh', '-c', input.command] : input.command;
    const now = Date.now();
    const execution: FakeExecution = {
      scope: caller.scope,
      digest,
      record: {
        id: hexId('exec_'),
        operationId,
        environment: environment.id,
        target: { environmentId: environment.id, allocationId: `alloc_${environment.id}`, generation: 1 },
        command,
        status: 'accepted',
        createdAt: now,
        updatedAt: now,
      },
      streams: {
        stdout: { data: Buffer.alloc(0), length: 0 },
        stderr: { data: Buffer.alloc(0), length: 0 },
        pty: { data: Buffer.alloc(0), length: 0 },
      },
      complete: false,
      stdinOpen: input.stdin === true,
    };
    this.executions.set(execution.record.id, execution);
    this.record(caller.scope, `execution-${execution.record.id}`, 'execution.accepted', { operationId, command });
    setImmediate(() => this.start(execution, input.pty ? 'pty' : 'stdout'));
    return execution.record;
  }

  private setStatus(execution: FakeExecution, patch: Partial<ExecutionRecord>): void {
    execution.record = { ...execution.record, ...patch, updatedAt: Date.now() };
    this.record(execution.scope, `execution-${execution.record.id}`, `execution.${execution.record.status}`, patch);
  }

  private finish(execution: FakeExecution): void {
    clearInterval(execution.timer);
    execution.complete = true;
    this.setStatus(execution, { status: 'exited', exitCode: 0, signal: null });
  }

  private start(execution: FakeExecution, main: OutputStream): void {
    if (execution.record.status !== 'accepted') return;
    this.setStatus(execution, { status: 'running' });
    const [program, bytesArg, durationArg, stderrArg] = execution.record.command;
    if (program === 'cat') return;
    if (program !== 'emit') return this.finish(execution);
    const bytes = Number(bytesArg ?? 0);
    const durationMs = Number(durationArg ?? 300);
    execution.streams[main].data = expectedOutput('stdout', bytes);
    execution.streams.stderr.data = expectedOutput('stderr', Number(stderrArg ?? Math.floor(bytes / 8)));
    const steps = Math.max(1, Math.floor(durationMs / 10));
    let step = 0;
    const reveal = () => {
      step++;
      for (const stream of [main, 'stderr'] as const) {
        const state = execution.streams[stream];
        state.length = step >= steps ? state.data.length : Math.floor((state.data.length * step) / steps);
      }
      if (step >= steps) this.finish(execution);
      else this.changed();
    };
    if (durationMs <= 0) return reveal();
    execution.timer = setInterval(reveal, 10);
  }

  private execution(caller: Caller, id: string): FakeExecution {
    const execution = this.executions.get(id);
    if (!execution || execution.scope !== caller.scope) throw notFound('The execution');
    return execution;
  }

  async getExecution(caller: Caller, id: string, waitMs?: number): Promise<ExecutionRecord> {
    this.fault('getExecution');
    const execution = this.execution(caller, id);
    const deadline = Date.now() + (waitMs ?? 0);
    while (!terminal.has(execution.record.status) && Date.now() < deadline) await this.nextChange(deadline - Date.now());
    return execution.record;
  }

  async listExecutions(
    caller: Caller,
    query: { operationId?: string; environment?: string; status?: string },
  ): Promise<ExecutionRecord[]> {
    return [...this.executions.values()]
      .filter((e) => e.scope === caller.scope)
      .map((e) => e.record)
      .filter(
        (r) =>
          (!query.operationId || r.operationId === query.operationId) &&
          (!query.environment || r.environment === query.environment) &&
          (!query.status || r.status === query.status),
      );
  }

  async cancelExecution(caller: Caller, id: string): Promise<ExecutionRecord> {
    this.cancelCalls++;
    const execution = this.execution(caller, id);
    if (!terminal.has(execution.record.status)) {
      clearInterval(execution.timer);
      execution.complete = true;
      this.setStatus(execution, { status: 'cancelled', exitCode: null, signal: 'SIGKILL' });
    }
    return execution.record;
  }

  async readOutput(caller: Caller, id: string, stream: OutputStream, cursor: number, maxBytes = 1 << 20): Promise<OutputRead> {
    const execution = this.execution(caller, id);
    const state = execution.streams[stream];
    const end = Math.min(state.length, cursor + maxBytes);
    const data = cursor < end ? state.data.subarray(cursor, end) : Buffer.alloc(0);
    return { data, next: Math.max(cursor, end), complete: execution.complete };
  }

  async waitForOutput(caller: Caller, id: string, timeoutMs: number): Promise<void> {
    this.execution(caller, id);
    await this.nextChange(timeoutMs);
  }

  async writeStdin(caller: Caller, id: string, bytes: Buffer): Promise<void> {
    const execution = this.execution(caller, id);
    if (!execution.stdinOpen) throw new BerthError('invalid_state', 'The execution takes no more stdin.');
    const state = execution.streams.stdout;
    state.data = Buffer.concat([state.data.subarray(0, state.length), bytes]);
    state.length = state.data.length;
    this.changed();
  }

  async endStdin(caller: Caller, id: string): Promise<void> {
    const execution = this.execution(caller, id);
    execution.stdinOpen = false;
    if (execution.record.command[0] === 'cat' && execution.record.status === 'running') this.finish(execution);
  }

  async resize(caller: Caller, id: string, cols: number, rows: number): Promise<void> {
    this.execution(caller, id);
    this.record(caller.scope, `execution-${id}`, 'execution.resized', { cols, rows });
  }

  async activity(caller: Caller): Promise<unknown[]> {
    return (await this.listExecutions(caller, {})).map((r) => ({ id: r.id, operationId: r.operationId, status: r.status }));
  }

  async replay(caller: Caller, stream: string, at?: number): Promise<ReplayStep[]> {
    const events = this.log.filter(
      (e) => e.stream === stream && e.metadata.scope === caller.scope && (at === undefined || e.revision <= BigInt(at)),
    );
    if (events.length === 0) throw notFound(`The stream ${stream}`);
    const types: string[] = [];
    return events.map((event) => {
      const stateBefore = { events: [...types] };
      types.push(event.type);
      return { event, stateBefore, stateAfter: { events: [...types] } };
    });
  }

  events(caller: Caller, fromPosition: bigint | 'start'): AsyncIterable<RecordedEvent> & { close(): Promise<void> } {
    let next = fromPosition === 'start' ? 0 : Number(fromPosition) + 1;
    let closed = false;
    let wake: (() => void) | undefined;
    const log = this.log;
    const wakers = this.wakers;
    return {
      async close() {
        closed = true;
        wake?.();
      },
      async *[Symbol.asyncIterator]() {
        while (!closed) {
          const event = log[next];
          if (!event) {
            await new Promise<void>((resolve) => {
              wake = () => {
                wakers.delete(wake!);
                resolve();
              };
              wakers.add(wake);
            });
            continue;
          }
          next++;
          if (event.metadata.scope === caller.scope) yield event;
        }
      },
    };
  }

  async metrics(): Promise<string> {
    return `# TYPE berth_executions gauge\nberth_executions ${this.executions.size}\n`;
  }
}
