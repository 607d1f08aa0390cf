/**
 * Content calls the content-*.spec.ts end-to-end tests share, over HTTP against a real `berth serve` child: raw file
 * and archive bodies, waiting for a build, and running a command to its output.
 */
import { expect } from 'vitest';
import { waitFor } from '../fixtures/wait-for.ts';
import { finished, submit, tokens, type BerthServer } from './berth-server.ts';

/** Any body fetch takes, with an optional content type (none: fetch picks one, or none for bytes). */
export function send(
  server: BerthServer,
  method: string,
  path: string,
  body?: Buffer | string,
  headers: Record<string, string> = {},
  token = tokens.alice,
): Promise<Response> {
  return fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...headers }, body: body as BodyInit | undefined });
}

/** `{status, body}` of an answer, the body parsed as JSON when it is. */
export async function answer(response: Response): Promise<{ status: number; body: any }> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // bytes
  }
  return { status: response.status, body };
}

/** Asserts the answer is an error of this code (and status), and returns its detail. */
export async function expectError(response: Response | Promise<Response>, status: number, code: string): Promise<Record<string, any>> {
  const { status: got, body } = await answer(await response);
  expect({ status: got, code: body?.error?.code }, JSON.stringify(body).slice(0, 400)).toEqual({ status, code });
  return body.error.detail;
}

export async function putFile(server: BerthServer, env: string, path: string, content: Buffer | string, token = tokens.alice): Promise<void> {
  const { status, body } = await answer(await send(server, 'PUT', `/v1/environments/${env}/files/${path}`, content, {}, token));
  expect(status, JSON.stringify(body)).toBe(200);
}

export async function createNamed(server: BerthServer, name: string, token = tokens.alice, profile: Record<string, unknown> = {}): Promise<any> {
  return server.json('/v1/environments', { body: { name, profile }, token });
}

/** Starts a build and waits for its record to leave `building`. */
export async function build(server: BerthServer, env: string, token = tokens.alice): Promise<any> {
  const started = await server.json(`/v1/environments/${env}/build`, { method: 'POST', token });
  expect(started).toMatchObject({ object: 'build', status: 'building' });
  return waitBuild(server, env, started.version, token);
}

export function waitBuild(server: BerthServer, env: string, version: number, token = tokens.alice): Promise<any> {
  return waitFor(() => server.json<any>(`/v1/environments/${env}/builds/${version}`, { token }), {
    until: (record) => record.status !== 'building',
    timeoutMs: 120_000,
    intervalMs: 100,
    what: `build ${version} of ${env} to finish`,
  });
}

/** Runs a shell command in the environment to its end: the record and both streams as text. */
export async function run(
  server: BerthServer,
  env: string,
  command: string,
  token = tokens.alice,
  extra: Record<string, unknown> = {},
): Promise<{ record: Record<string, any>; stdout: string; stderr: string }> {
  const accepted = await submit(server, env, command, extra, token);
  const record = await finished(server, accepted.id, token);
  const output = async (stream: string) => (await server.call(`/v1/executions/${accepted.id}/output?stream=${stream}`, { token })).text();
  return { record, stdout: await output('stdout'), stderr: await output('stderr') };
}
