/**
 * Shared by the execution tests (integration and recovery): a Berth on a temporary data directory with the
 * providers a test asks for (Docker resources labelled with the test run's label), and helpers that use only the
 * runtime API: run a command to its end, read a stream back by cursor until it is complete.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DockerProvider } from '../../src/providers/docker/docker-provider.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import type { OutputStream } from '../../schemas/output.ts';
import type { Provider } from '../../src/providers/provider.ts';
import { startBerth, type Berth, type StartBerthOptions } from '../../src/runtime/berth.ts';
import type { Caller, ExecutionRecord, RuntimeApi, SubmitExecutionInput } from '../../src/runtime/runtime-api.ts';
import { dockerEndpoint } from './docker-env.ts';

export type ProviderKind = 'native' | 'docker';

export const caller: Caller = { scope: 'default', role: 'admin' };

/** Native always; Docker (labelled with `labels`, so the test's cleanup finds what it made) when asked for. */
export function testProviders(dataDir: string, docker: Record<string, string> | false): Provider[] {
  const providers: Provider[] = [new NativeProvider({ dataDir })];
  if (docker) providers.push(new DockerProvider({ endpoint: dockerEndpoint, extraLabels: docker }));
  return providers;
}

export function startTestBerth(
  dataDir: string,
  docker: Record<string, string> | false,
  runtimeId = 'rt_test',
  more: Partial<StartBerthOptions> = {},
): Promise<Berth> {
  return startBerth({
    settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId,
    providers: testProviders(dataDir, docker),
    ...more,
  });
}

export const tempDir = (prefix: string): { path: string; remove(): void } => {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
};

/** The environment named `name` (created with the provider's profile when missing). */
export async function environmentFor(api: RuntimeApi, kind: ProviderKind, name = `exec-${kind}`): Promise<string> {
  const found = ((await api.listEnvironments(caller)).items).find((e) => e.name === name);
  if (found) return found.id;
  return (await api.createEnvironment(caller, { name, profile: { provider: kind } })).id;
}

/** Waits (long polls) until the record no longer changes: saved, released, or closed without output. */
export async function settled(api: RuntimeApi, id: string, timeoutMs = 60_000): Promise<ExecutionRecord> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const record = await api.getExecution(caller, id, Math.max(1, Math.min(5_000, deadline - Date.now())));
    if (['saved', 'released', 'closing'].includes(record.step ?? '')) return record;
    if (Date.now() > deadline) throw new Error(`execution ${id} did not settle: ${JSON.stringify(record)}`);
  }
}

/** Every byte of `stream`, read through `readOutput` by cursor until it says complete. */
export async function readAll(api: RuntimeApi, id: string, stream: OutputStream, timeoutMs = 60_000): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const deadline = Date.now() + timeoutMs;
  for (let cursor = 0; ; ) {
    const chunk = await api.readOutput(caller, id, stream, cursor);
    if (chunk.next !== cursor + chunk.data.length) throw new Error(`cursor jumped from ${cursor} to ${chunk.next}`);
    chunks.push(chunk.data);
    cursor = chunk.next;
    if (chunk.complete) return Buffer.concat(chunks);
    if (Date.now() > deadline) throw new Error(`${stream} of ${id} not complete after ${timeoutMs} ms at ${cursor}`);
    if (chunk.data.length === 0) await api.waitForOutput(caller, id, 1_000);
  }
}

/** Submits and waits until settled; answers the record with stdout and stderr as text. */
export async function run(
  api: RuntimeApi,
  environment: string,
  command: SubmitExecutionInput['command'],
  more: Partial<SubmitExecutionInput> = {},
): Promise<ExecutionRecord & { stdout: string; stderr: string }> {
  const submitted = await api.submitExecution(caller, {
    operationId: `op-${Math.random().toString(36).slice(2)}`,
    environment,
    command,
    ...more,
  });
  const record = await settled(api, submitted.id);
  const [stdout, stderr] = await Promise.all([readAll(api, record.id, 'stdout'), readAll(api, record.id, 'stderr')]);
  return { ...record, stdout: stdout.toString('utf8'), stderr: stderr.toString('utf8') };
}
