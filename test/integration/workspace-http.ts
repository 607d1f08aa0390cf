/**
 * Plain HTTP calls to the workspace and turn routes of a real gateway (gateway-fixture.ts), for the workspace specs
 * in test/integration and test/security: one `call` that keeps status, headers and body bytes, and the steps that
 * give a tenant a managed workspace, a session bound to it and an open turn.
 */
import { chmodSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { OpenApiCheck } from '../e2e/openapi-check.ts';
import { tokens, type RunningGateway } from './gateway-fixture.ts';

export interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  text: string;
  /** The parsed JSON body (throws when it is not JSON). */
  json: any;
}

export interface CallOptions {
  token?: string;
  /** Sent as application/json. */
  json?: unknown;
  /** Sent as is (a file's bytes). */
  body?: Buffer | string;
  headers?: Record<string, string>;
}

export interface Tenant {
  token: string;
  workspace: string;
  session: string;
  turn: string;
  /** The managed workspace's root on the host. */
  root: string;
  /** `/v1/sessions/<session>/turns/<turn>/files` */
  files: string;
}

/** Contained commands run as the sandbox identity, which must be able to reach the data directory (not list it). */
export function letSandboxReach(gw: RunningGateway): void {
  chmodSync(dirname(gw.dataDir), 0o711);
}

export async function call(gw: RunningGateway, method: string, path: string, opts: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...gw.headers(opts.token ?? tokens.alice), ...opts.headers };
  let body: string | Uint8Array<ArrayBuffer> | undefined = typeof opts.body === 'string' || opts.body === undefined ? opts.body : new Uint8Array(opts.body);
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  const response = await fetch(`${gw.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const bytes = Buffer.from(await response.arrayBuffer());
  const text = bytes.toString();
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    text,
    get json() {
      return JSON.parse(text);
    },
  };
}

/** The JSON of a call that must answer `status` (throws with the body otherwise). */
export async function expectStatus(answer: Promise<Answer>, status: number): Promise<any> {
  const got = await answer;
  if (got.status !== status) throw new Error(`expected ${status}, got ${got.status}: ${got.text.slice(0, 500)}`);
  return got.text === '' ? undefined : got.json;
}

/** The `error` of a call that must fail with `status` and `code`, in the documented wire shape. */
export async function expectError(answer: Promise<Answer>, status: number, code: string): Promise<{ code: string; message: string; detail: Record<string, unknown> }> {
  const got = await answer;
  if (got.status !== status) throw new Error(`expected ${status} ${code}, got ${got.status}: ${got.text.slice(0, 500)}`);
  const error = got.json.error;
  if (error?.code !== code) throw new Error(`expected ${code}, got ${got.text.slice(0, 500)}`);
  return error;
}

/** A managed workspace of the token's scope, a session bound to it (with `session` extras) and an open turn. */
export async function tenant(gw: RunningGateway, token: string, session: Record<string, unknown> = {}): Promise<Tenant> {
  const workspace = (await expectStatus(call(gw, 'POST', '/v1/workspaces', { token, json: { name: 'task' } }), 201)).id as string;
  const sessionId = (await expectStatus(call(gw, 'POST', '/v1/sessions', { token, json: { workspaceId: workspace, ...session } }), 201)).id as string;
  const turn = (await expectStatus(call(gw, 'POST', `/v1/sessions/${sessionId}/turns`, { token, json: {} }), 201)).id as string;
  return {
    token,
    workspace,
    session: sessionId,
    turn,
    root: join(gw.dataDir, 'workspaces', workspace, 'root'),
    files: `/v1/sessions/${sessionId}/turns/${turn}/files`,
  };
}

/** `?path=` spelled so that every byte (NUL, `%`, `/`) reaches the server as given. */
export const q = (path: string, extra = ''): string => `?path=${encodeURIComponent(path)}${extra}`;

let operations = 0;

/** Submits a shell command into the tenant's turn (its session names the environment); answers the raw reply. */
export function submitInTurn(gw: RunningGateway, t: Tenant, command: string, extra: Record<string, unknown> = {}): Promise<Answer> {
  const operationId = `ws-${process.pid}-${Date.now()}-${++operations}`;
  return call(gw, 'POST', '/v1/executions', { token: t.token, json: { operationId, session: t.session, turn: t.turn, command, ...extra } });
}

/** Runs a shell command in the tenant's turn to its end: its record and what it printed (stdout then stderr). */
export async function runInTurn(gw: RunningGateway, t: Tenant, command: string, extra: Record<string, unknown> = {}): Promise<{ status: string; output: string }> {
  const { id } = await expectStatus(submitInTurn(gw, t, command, extra), 201);
  let record: { status: string };
  do record = await expectStatus(call(gw, 'GET', `/v1/executions/${id}?waitMs=20000`, { token: t.token }), 200);
  while (!['exited', 'cancelled', 'failed', 'unknown'].includes(record.status));
  const stream = async (name: string) => (await call(gw, 'GET', `/v1/executions/${id}/output?stream=${name}`, { token: t.token })).text;
  return { status: record.status, output: (await stream('stdout')) + (await stream('stderr')) };
}

/**
 * A `call` whose JSON answer must have `status` and match the schema the server documents for `template`; the
 * gateway and its OpenAPI check are read when it is called (a spec makes both in beforeAll).
 */
export const documentedCalls =
  (gw: () => RunningGateway, openapi: () => OpenApiCheck) =>
  async (method: string, path: string, template: string, status: number, opts: CallOptions = {}): Promise<any> => {
    const body = await expectStatus(call(gw(), method, path, opts), status);
    openapi().expect(method, template, status, body);
    return body;
  };

