/**
 * The host side of the spool (spool.ts) against a command that owns its operation directory and replaces spool
 * entries with links to host files, FIFOs, directories or hard links, or swaps the directory itself: the server
 * reads only bytes of regular files inside the directory it opened and writes only its own files. Drives the Spool
 * class directly (natively, an uncontained command is the server's own user; the spool code must hold anyway).
 */
import { spawn } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { outputStreams } from '../../schemas/output.ts';
import { Spool } from '../../src/providers/spool.ts';

const SECRET = `CANARY-${Math.random().toString(36).slice(2)}`;
const RECEIPT = '{"v":1,"status":0,"cancelled":false,"timedOut":false}\n';

let root: string;
let spool: Spool;
/** A host file outside the spool, holding the secret; links point at it. */
let canary: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'berth-spool-links-'));
  spool = new Spool(join(root, 'spool'));
  canary = join(root, 'host-secret');
  writeFileSync(canary, `${SECRET}\n`);
});
afterEach(() => {
  spool.close();
  rmSync(root, { recursive: true, force: true });
});

/** What a call gave back, or its error, as text: the secret must be in neither. */
const outcome = (p: Promise<unknown>): Promise<string> =>
  p.then(
    (v) => JSON.stringify(v, (_, x) => (Buffer.isBuffer(x) || x?.type === 'Buffer' ? Buffer.from(x.data ?? x).toString() : x)),
    (e: Error & { code?: string }) => `error ${e.code}: ${e.message}`,
  );

const plant = (name: string, target = canary) => symlinkSync(target, join(spool.dir('op'), name));
const canaryUnchanged = () => expect(readFileSync(canary, 'utf8')).toBe(`${SECRET}\n`);

describe('reads never follow a link out of the operation directory', () => {
  for (const stream of outputStreams) {
    it(`a ${stream} replaced by a link to a host file reads as empty, running and exited`, async () => {
      await spool.claim('op', 'supervisor 1');
      plant(stream);
      expect(await spool.currentSizes('op')).toEqual({ stdout: 0, stderr: 0, pty: 0 });
      const running = await outcome(spool.read('op', stream, 0));
      expect(running).not.toContain(SECRET);
      writeFileSync(join(spool.dir('op'), 'receipt'), RECEIPT);
      const exited = await spool.read('op', stream, 0);
      expect(exited).toMatchObject({ next: 0, closed: true, size: 0 });
      expect(exited.data.toString()).not.toContain(SECRET);
    });

    it(`a ${stream} swapped for a link while it is followed is refused, never read through`, async () => {
      await spool.claim('op', 'supervisor 1');
      writeFileSync(join(spool.dir('op'), stream), 'own bytes');
      expect((await spool.read('op', stream, 0)).data.toString()).toBe('own bytes');
      rmSync(join(spool.dir('op'), stream));
      plant(stream);
      const read = await outcome(spool.read('op', stream, 0));
      expect(read).not.toContain(SECRET);
      expect(read).toMatch(/invalid_state|"data":""/);
      expect(await outcome(spool.holdOutput('op', stream))).toMatch(/invalid_state: .*symbolic link/);
    });
  }

  it('a hard link to a host file in place of stdout is refused', async () => {
    await spool.claim('op', 'supervisor 1');
    linkSync(canary, join(spool.dir('op'), 'stdout'));
    expect(await outcome(spool.read('op', 'stdout', 0))).not.toContain(SECRET);
    expect(await outcome(spool.holdOutput('op', 'stdout'))).toMatch(/invalid_state: .*several links/);
  });

  it('protocol files that are links read as not written (claim pending, no started, no receipt)', async () => {
    await spool.prepare('op');
    const forged = join(root, 'host-forged');
    writeFileSync(forged, 'abandoned\n');
    plant('claim', forged);
    expect(await spool.readClaim('op')).toEqual({ kind: 'pending' });
    writeFileSync(forged, '{"supervisor":1,"pid":2,"pgid":2}\n');
    plant('started', forged);
    expect(await spool.readStarted('op')).toBeUndefined();
    writeFileSync(forged, `{"v":1,"status":0,"cancelled":false,"timedOut":false,"error":"${SECRET}"}\n`);
    plant('receipt', forged);
    expect(await outcome(spool.readState('op'))).not.toContain(SECRET);
    expect(await spool.readReceipt('op')).toBeUndefined();
    plant('docker-exec');
    expect(await spool.readText('op', 'docker-exec')).toBe('');
  });

  it('a FIFO in place of any spool file never blocks the server', async () => {
    await spool.claim('op', 'supervisor 1');
    for (const name of [...outputStreams, 'started', 'receipt']) {
      const fifo = join(spool.dir('op'), name);
      // The old code's blocking open would wait for this writer (3 s): the elapsed time tells, without a hang.
      const unblock = spawn('sh', ['-c', `mkfifo "$1" && sleep 3 && exec 3>"$1"`, 'sh', fifo], { stdio: 'ignore' });
      while (!existsSync(fifo)) await new Promise((r) => setTimeout(r, 5));
      const started = performance.now();
      const seen = [
        await outcome(spool.readState('op')),
        await outcome(spool.currentSizes('op')),
        ...(outputStreams.includes(name as never) ? [await outcome(spool.read('op', name as never, 0))] : []),
      ];
      expect(performance.now() - started, name).toBeLessThan(1000);
      expect(seen.join()).not.toContain(SECRET);
      unblock.kill('SIGKILL');
      rmSync(fifo);
    }
  });

  it('a directory in place of stdout is refused with a typed error', async () => {
    await spool.claim('op', 'supervisor 1');
    mkdirSync(join(spool.dir('op'), 'stdout'));
    expect(await outcome(spool.read('op', 'stdout', 0))).toMatch(/^error invalid_state: .*directory/);
  });

  it('an operation directory swapped for a link to a host directory is never read through', async () => {
    const outside = join(root, 'host-dir');
    mkdirSync(outside);
    writeFileSync(join(outside, 'stdout'), SECRET);
    writeFileSync(join(outside, 'claim'), 'supervisor 1\n');
    writeFileSync(join(outside, 'receipt'), RECEIPT);
    await spool.claim('op', 'supervisor 1');
    renameSync(spool.dir('op'), join(root, 'spool', 'op.moved'));
    symlinkSync(outside, spool.dir('op'));
    for (const call of [spool.read('op', 'stdout', 0), spool.readState('op'), spool.currentSizes('op'), spool.holdOutput('op', 'stdout')]) {
      expect(await outcome(call)).not.toContain(SECRET);
    }
    // Its outcome can never be proven and it can never start: it reads as abandoned.
    expect(await spool.readClaim('op')).toEqual({ kind: 'abandoned' });
    await outcome(spool.marker('op', 'cancel'));
    await outcome(spool.writeReceipt('op', { status: 0, cancelled: false, timedOut: false }));
    await outcome(spool.claim('op', 'abandoned'));
    expect(readdirSync(outside).sort()).toEqual(['claim', 'receipt', 'stdout']);
    await spool.release('op');
    expect(readdirSync(outside).sort()).toEqual(['claim', 'receipt', 'stdout']);
    expect(existsSync(spool.dir('op'))).toBe(false);
  });

  it('a spool root that is a link is never read through', async () => {
    const outside = join(root, 'host-ops');
    mkdirSync(join(outside, 'op'), { recursive: true });
    writeFileSync(join(outside, 'op', 'stdout'), SECRET);
    writeFileSync(join(outside, 'op', 'claim'), 'supervisor 1\n');
    symlinkSync(outside, join(root, 'spool'));
    expect(await outcome(spool.read('op', 'stdout', 0))).not.toContain(SECRET);
    await outcome(spool.release('op'));
    expect(readdirSync(join(outside, 'op')).sort()).toEqual(['claim', 'stdout']);
  });
});

describe('writes land only in files the server made', () => {
  it('a receipt.tmp link: the receipt is written, the host file is unchanged', async () => {
    await spool.claim('op', 'pty 1 1');
    plant('receipt.tmp');
    await spool.writeReceipt('op', { status: 7, cancelled: false, timedOut: false });
    canaryUnchanged();
    expect(await spool.readReceipt('op')).toMatchObject({ status: 7 });
  });

  for (const marker of ['cancel', 'timedout'] as const) {
    it(`a ${marker} link: marking leaves the host file unchanged`, async () => {
      await spool.claim('op', 'supervisor 1');
      plant(marker);
      await spool.marker('op', marker);
      canaryUnchanged();
      expect(await spool.hasMarker('op', marker)).toBe(true);
    });
  }

  it('a sizes link made before the receipt: the sizes are frozen in a file of the server, the host file unchanged', async () => {
    await spool.claim('op', 'supervisor 1');
    writeFileSync(join(spool.dir('op'), 'stdout'), 'abc');
    plant('sizes');
    writeFileSync(join(spool.dir('op'), 'receipt'), RECEIPT);
    expect((await spool.readReceipt('op'))?.sizes).toEqual({ stdout: 3, stderr: 0, pty: 0 });
    canaryUnchanged();
  });

  it('a claim link: the exclusive create fails without writing the host file', async () => {
    await spool.prepare('op');
    plant('claim');
    expect(await spool.claim('op', 'abandoned')).toBe(false);
    canaryUnchanged();
  });

  it('pty, started and spec.json links: appending and creating never write the host file', async () => {
    await spool.claim('op', 'pty 1 1');
    plant('pty');
    plant('started');
    plant('spec.json');
    expect(await outcome(spool.openAppend('op', 'pty'))).toMatch(/^error invalid_state: .*symbolic link/);
    expect(await spool.writeNew('op', 'started', 'forged\n')).toBe(false);
    expect(await spool.writeNew('op', 'spec.json', 'forged\n')).toBe(false);
    canaryUnchanged();
  });

  it('a stdin link to a host FIFO or file is refused as the stdin writer', async () => {
    await spool.claim('op', 'supervisor 1');
    const hostFifo = join(root, 'host-fifo');
    await new Promise((resolve) => spawn('mkfifo', [hostFifo]).on('exit', resolve));
    plant('stdin', hostFifo);
    expect(() => spool.openFifo('op', 'stdin')).toThrow(/symbolic link/);
    rmSync(join(spool.dir('op'), 'stdin'));
    plant('stdin');
    expect(() => spool.openFifo('op', 'stdin')).toThrow(/symbolic link/);
    canaryUnchanged();
  });
});

describe('release removes only what is inside the operation directory', () => {
  it('links to host files and directories go as links; their targets stay', async () => {
    const outside = join(root, 'host-dir');
    mkdirSync(join(outside, 'deep'), { recursive: true });
    writeFileSync(join(outside, 'deep', 'keep'), SECRET);
    await spool.claim('op', 'supervisor 1');
    plant('stdout');
    plant('sub', outside);
    mkdirSync(join(spool.dir('op'), 'made', 'nested'), { recursive: true });
    symlinkSync(outside, join(spool.dir('op'), 'made', 'nested', 'escape'));
    await spool.release('op');
    canaryUnchanged();
    expect(readFileSync(join(outside, 'deep', 'keep'), 'utf8')).toBe(SECRET);
    expect(existsSync(spool.dir('op'))).toBe(false);
  });

  it('a subdirectory swapped for a link during release never takes the release outside', async () => {
    const outside = join(root, 'host-dir');
    for (let round = 0; round < 12; round++) {
      mkdirSync(outside, { recursive: true });
      for (let i = 0; i < 50; i++) writeFileSync(join(outside, `f${i}`), SECRET);
      const op = `op${round}`;
      await spool.claim(op, 'supervisor 1');
      const dir = spool.dir(op);
      for (let i = 0; i < 50; i++) mkdirSync(join(dir, `d${i}`, 'x'), { recursive: true });
      // The racer turns each subdirectory into a link to the host directory as fast as it can.
      const racer = spawn('sh', ['-c', 'for i in $(seq 0 49); do mv "$1/d$i" "$1/m$i" 2>/dev/null; ln -s "$2" "$1/d$i" 2>/dev/null; done', 'sh', dir, outside], { stdio: 'ignore' });
      await spool.release(op).catch(() => undefined);
      await new Promise((resolve) => racer.on('exit', resolve));
      expect(readdirSync(outside)).toHaveLength(50);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
