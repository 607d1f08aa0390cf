/**
 * The host side of the spool protocol on hand-written files (what a supervisor would leave): parsing, receipt
 * derivation, cursor reads that close only at the agreed final size, and the claim/abandon fence.
 */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { deriveReceipt, parseClaim, parseReceiptLine, parseStarted, splitStatus, Spool } from '../../../src/providers/spool.ts';

describe('spool parsers', () => {
  it('reads every claim form, and an unwritten one as pending', () => {
    expect(parseClaim('supervisor 42\n')).toEqual({ kind: 'supervisor', pid: 42 });
    expect(parseClaim('supervisor 42 1026620\n')).toEqual({ kind: 'supervisor', pid: 42, startTime: '1026620' });
    expect(parseClaim('pty 7 12345\n')).toEqual({ kind: 'pty', pid: 7, startTime: '12345' });
    expect(parseClaim('abandoned\n')).toEqual({ kind: 'abandoned' });
    expect(parseClaim('')).toEqual({ kind: 'pending' });
  });

  it('accepts a receipt or started line only once it is complete', () => {
    expect(parseReceiptLine('{"v":1,"status":0,"cancelled":false,"timedOut":false}')).toBeUndefined();
    expect(parseReceiptLine('{"v":1,"status":0,"canc')).toBeUndefined();
    expect(parseReceiptLine('{"v":2,"status":0,"cancelled":false,"timedOut":false}\n')).toBeUndefined();
    expect(parseReceiptLine('{"v":1,"status":null,"cancelled":true,"timedOut":false,"error":"cwd"}\n')).toEqual({
      status: null,
      cancelled: true,
      timedOut: false,
      error: 'cwd',
    });
    expect(parseStarted('{"supervisor":1,"pid":2,"pgid":2}', new Date(0))).toBeUndefined();
    expect(parseStarted('{"supervisor":1,"pid":2,"pgid":2}\n', new Date(0))).toEqual({ supervisor: 1, pid: 2, pgid: 2, at: new Date(0).toISOString() });
  });

  it('splits an sh wait status into exit code or signal', () => {
    expect(splitStatus(0)).toEqual({ exitCode: 0, signal: null });
    expect(splitStatus(3)).toEqual({ exitCode: 3, signal: null });
    expect(splitStatus(128)).toEqual({ exitCode: 128, signal: null });
    expect(splitStatus(137)).toEqual({ exitCode: null, signal: 'SIGKILL' });
    expect(splitStatus(143)).toEqual({ exitCode: null, signal: 'SIGTERM' });
    expect(splitStatus(null)).toEqual({ exitCode: null, signal: null });
  });

  it('derives absent, running and exited, and absent for a dead owner', () => {
    const sizes = { stdout: 1, stderr: 0, pty: 0 };
    const claim = { kind: 'supervisor', pid: 1 } as const;
    expect(deriveReceipt('op', {}, false).state).toBe('absent');
    expect(deriveReceipt('op', { claim: { kind: 'abandoned' } }, true).state).toBe('absent');
    expect(deriveReceipt('op', { claim }, true)).toMatchObject({ state: 'running' });
    expect(deriveReceipt('op', { claim }, false)).toMatchObject({ state: 'absent' });
    const receipt = { status: 143, cancelled: true, timedOut: false, exitedAt: 'x', sizes };
    expect(deriveReceipt('op', { claim, receipt }, false)).toMatchObject({
      protocolVersion: 1,
      state: 'exited',
      exitCode: null,
      signal: 'SIGTERM',
      cancelled: true,
      sizes,
    });
  });
});

describe('Spool', () => {
  let root: string;
  let spool: Spool;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-spool-'));
    spool = new Spool(join(root, 'spool'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('lets exactly one claimant win, so an abandoned operation can never be claimed to run', async () => {
    expect(await spool.abandon('op')).toBe(true);
    expect(await spool.claim('op', 'supervisor 1')).toBe(false);
    expect(await spool.readClaim('op')).toEqual({ kind: 'abandoned' });
    expect(await spool.claim('other', 'supervisor 1')).toBe(true);
    expect(await spool.abandon('other')).toBe(false);
  });

  it('reads from any cursor, is not closed before the receipt, and never past the frozen final size', async () => {
    await spool.prepare('op');
    writeFileSync(spool.file('op', 'stdout'), 'abcdef');
    expect(await spool.read('op', 'stdout', 2, 3)).toMatchObject({ next: 5, closed: false, final: false });
    expect((await spool.read('op', 'stdout', 2, 3)).data.toString()).toBe('cde');
    expect(await spool.read('op', 'stdout', 6)).toMatchObject({ next: 6, closed: false });
    writeFileSync(spool.file('op', 'receipt'), '{"v":1,"status":0,"cancelled":false,"timedOut":false}\n');
    expect(await spool.read('op', 'stdout', 6)).toMatchObject({ next: 6, closed: true, size: 6 });
    // An escaped writer appending after the receipt does not move the end every reader agreed on.
    appendFileSync(spool.file('op', 'stdout'), 'late');
    expect(await new Spool(join(root, 'spool')).read('op', 'stdout', 4)).toMatchObject({ next: 6, closed: true });
    expect((await spool.readReceipt('op'))?.sizes).toEqual({ stdout: 6, stderr: 0, pty: 0 });
  });

  it('ignores a receipt that is still being written', async () => {
    await spool.prepare('op');
    writeFileSync(spool.file('op', 'receipt'), '');
    expect(await spool.readReceipt('op')).toBeUndefined();
    writeFileSync(spool.file('op', 'receipt'), '{"v":1,"status":5,"cancelled":false,"timedOut":false}\n');
    expect(await spool.readReceipt('op')).toMatchObject({ status: 5 });
  });

  it('waitUntil wakes on a change in the operation directory well before its timeout', async () => {
    await spool.prepare('op');
    setTimeout(() => writeFileSync(spool.file('op', 'started'), '{"supervisor":1,"pid":2,"pgid":2}\n'), 50);
    const start = Date.now();
    const started = await spool.waitUntil('op', () => spool.readStarted('op'), 5000);
    expect(started?.pid).toBe(2);
    expect(Date.now() - start).toBeLessThan(1000);
    expect(await spool.waitUntil('op', async () => undefined, 100)).toBeUndefined();
  });

  it('release drops the operation directory, also one holding a directory, and is idempotent', async () => {
    await spool.prepare('op');
    writeFileSync(spool.file('op', 'stdout'), 'abc');
    writeFileSync(spool.file('op', 'receipt'), '{"v":1,"status":0,"cancelled":false,"timedOut":false}\n');
    await spool.read('op', 'stdout', 0);
    await spool.release('op');
    expect(existsSync(spool.dir('op'))).toBe(false);
    await spool.prepare('nested');
    mkdirSync(join(spool.dir('nested'), 'made-by-the-command'));
    writeFileSync(join(spool.dir('nested'), 'made-by-the-command', 'f'), 'x');
    await spool.release('nested');
    expect(existsSync(spool.dir('nested'))).toBe(false);
    await spool.release('nested');
  });

  it('rejects operation ids that are not one plain path component', () => {
    for (const id of ['', '.', '..', 'a/b', 'a b', 'x'.repeat(129)]) expect(() => spool.dir(id)).toThrow(/operationId/);
    expect(spool.dir('ok-1.2_3')).toBe(join(root, 'spool', 'ok-1.2_3'));
  });
});
