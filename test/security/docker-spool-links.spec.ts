/**
 * A Docker command (UID 1000, owner of its operation directory in the allocation's volume) replaces its own spool
 * files with links to host files, a FIFO, or swaps the directory itself, against a real `berth serve` whose runtime
 * reaches the spool through the volume's host mountpoint: `GET …/output` and the execution record never carry a
 * host file's bytes, host files are never written or removed, and the server keeps answering.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerAvailable } from '../integration/docker-env.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';

const SECRET = `CANARY-${Math.random().toString(36).slice(2)}`;
const VICTIM = 'host file the server must never write\n';

describe.skipIf(!dockerAvailable)('a Docker command tampering with its own spool (real server, host spool access)', () => {
  let server: BerthServer;
  let env: string;
  /** Host paths outside the volume: the command plants links to them (resolved, if ever, by the server). */
  let host: { canary: string; tokensFile: string; victim: string; receiptCanary: string; dir: string };

  beforeAll(async () => {
    server = await startServer();
    const root = dirname(server.dataDir);
    host = {
      canary: join(root, 'host-canary'),
      tokensFile: join(root, 'tokens.json'),
      victim: join(root, 'host-victim'),
      receiptCanary: join(root, 'host-receipt'),
      dir: join(root, 'host-dir'),
    };
    writeFileSync(host.canary, `${SECRET}\n`);
    writeFileSync(host.victim, VICTIM);
    writeFileSync(host.receiptCanary, `{"v":1,"status":0,"cancelled":false,"timedOut":false,"error":"${SECRET}"}\n`);
    mkdirSync(host.dir);
    writeFileSync(join(host.dir, 'stdout'), SECRET);
    writeFileSync(join(host.dir, 'claim'), 'supervisor 1\n');
    writeFileSync(join(host.dir, 'receipt'), '{"v":1,"status":0,"cancelled":false,"timedOut":false}\n');
    env = await createEnvironment(server, tokens.alice, { provider: 'docker', memoryMb: 128, network: 'none' });
    await server.json(`/v1/environments/${env}/allocations`, { method: 'POST' });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
  });

  /** The command's operation directory: the directory of its stdout (fd 1 of the shell). */
  const OPDIR = 'd=$(dirname "$(readlink /proc/$$/fd/1)")';
  const output = async (id: string, stream: string) => (await server.call(`/v1/executions/${id}/output?stream=${stream}`)).text();
  const everything = async (id: string) =>
    [JSON.stringify(await server.json(`/v1/executions/${id}`)), await output(id, 'stdout'), await output(id, 'stderr'), await output(id, 'pty')].join('\n');
  const healthzMs = async () => {
    const started = performance.now();
    const response = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(5_000) });
    expect(response.status).toBe(200);
    return performance.now() - started;
  };
  const hostDirIntact = () => expect(readdirSync(host.dir).sort()).toEqual(['claim', 'receipt', 'stdout']);

  it('stdout and stderr replaced by links to a host file and the tokens file: the output never carries them', async () => {
    const record = await submit(server, env, `${OPDIR}; echo own; rm "$d/stdout" "$d/stderr"; ln -s ${host.canary} "$d/stdout"; ln -s ${host.tokensFile} "$d/stderr"`);
    expect((await finished(server, record.id)).status).toBe('exited');
    const seen = await everything(record.id);
    expect(seen).not.toContain(SECRET);
    for (const token of Object.values(tokens)) expect(seen).not.toContain(token);
  });

  it('claim, started, docker-exec, sizes and receipt replaced by links: neither the record nor the output shows the host files', async () => {
    const plant = ['claim', 'started', 'docker-exec', 'sizes'].map((f) => `ln -s ${host.canary} "$d/${f}"`).join('; ');
    const record = await submit(server, env, `${OPDIR}; sleep 0.3; echo own; rm -f "$d/claim" "$d/started" "$d/docker-exec"; ${plant}; ln -s ${host.receiptCanary} "$d/receipt"`);
    await finished(server, record.id);
    expect(await everything(record.id)).not.toContain(SECRET);
    expect(await healthzMs()).toBeLessThan(1_000);
  });

  it('FIFOs in place of started and stdout never block the server: other requests answer meanwhile', async () => {
    const record = await submit(server, env, `${OPDIR}; sleep 0.3; rm "$d/stdout" "$d/started"; mkfifo "$d/stdout" "$d/started"; sleep 2`);
    // A blocking open of the FIFO on the server would hold its event loop (or its thread pool) until a writer came.
    const pending = server.call(`/v1/executions/${record.id}/output`).then((r) => r.text());
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await healthzMs()).toBeLessThan(1_000);
    await finished(server, record.id);
    expect(await healthzMs()).toBeLessThan(1_000);
    const answered = await Promise.race([pending, new Promise((resolve) => setTimeout(() => resolve('no answer'), 10_000))]);
    expect(answered).not.toBe('no answer');
  });

  it('the operation directory swapped for a link to a host directory: nothing of it read, nothing removed', async () => {
    const record = await submit(server, env, `${OPDIR}; echo own; cd /; mv "$d" "$d.moved" && ln -s ${host.dir} "$d"; sleep 0.5`);
    // Its outcome can no longer be proven (the host directory's receipt is never read): unknown.
    expect((await finished(server, record.id)).status).toBe('unknown');
    expect(await everything(record.id)).not.toContain(SECRET);
    // The runtime releases an operation's spool once its output is saved; give it the time to try.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    hostDirIntact();
    expect(await healthzMs()).toBeLessThan(1_000);
  });

  it('the ops directory cannot be swapped by the command (the volume root is not its own)', async () => {
    const record = await submit(server, env, `mv /berth/spool/ops /berth/spool/taken && ln -s ${host.dir} /berth/spool/ops`);
    const done = await finished(server, record.id);
    expect(done.exitCode).not.toBe(0);
    hostDirIntact();
  });

  it('a PTY command planting pty and receipt.tmp links: the host file stays as it was, the terminal output never carries them', async () => {
    // The command's own pid is in `started` (the terminal wrapper writes it, then becomes the command).
    const own = `o=$(dirname "$(grep -l "\\"pid\\":$$," /berth/spool/ops/*/started)")`;
    const plant = `rm -f "$o/pty"; ln -s ${host.canary} "$o/pty"; ln -s ${host.victim} "$o/receipt.tmp"`;
    const record = await submit(server, env, ['/bin/sh', '-c', `${own}; ${plant}; echo planted; sleep 0.5; exit 4`], { pty: { cols: 80, rows: 24 } });
    const done = await finished(server, record.id);
    expect(readFileSync(host.victim, 'utf8')).toBe(VICTIM);
    // The runtime's own receipt was written (the planted name unlinked, a file of its own renamed into place).
    expect(done).toMatchObject({ status: 'exited', exitCode: 4 });
    expect(await everything(record.id)).not.toContain(SECRET);
  });

  it('after all of it, the allocation releases without touching anything outside its volume', async () => {
    const allocations = await server.json<{ items?: Array<{ allocationId: string }> } | Array<{ allocationId: string }>>(`/v1/environments/${env}/allocations`);
    const items = Array.isArray(allocations) ? allocations : (allocations.items ?? []);
    for (const { allocationId } of items) await server.call(`/v1/environments/${env}/allocations/${allocationId}`, { method: 'DELETE' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    hostDirIntact();
    expect(readFileSync(host.canary, 'utf8')).toBe(`${SECRET}\n`);
    expect(readFileSync(host.victim, 'utf8')).toBe(VICTIM);
  });
});
if (!dockerAvailable) console.log('skipped: docker spool links (no Docker engine)');
