/**
 * The data directory's reserve against the real filesystem of a temporary directory: its default (1 GiB, at most a
 * tenth of the filesystem), none when configured 0, and a reserve over the free space reported as a shortage with
 * the free bytes statfs gives, refused as `storage_full`.
 */
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DiskReserve, storageFullFailure } from '../../../src/runtime/maintenance/disk-reserve.ts';

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'berth-reserve-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the disk reserve', () => {
  it('should default to 1 GiB, at most a tenth of the filesystem', async () => {
    const fs = statfsSync(dir);
    expect((await DiskReserve.of(dir)).reserveBytes).toBe(Math.min(1024 * MiB, Math.floor(fs.blocks * fs.bsize * 0.1)));
  });

  it('should keep none when configured 0, and report a reserve over the free space as a shortage', async () => {
    expect(await (await DiskReserve.of(dir, 0)).shortage()).toBeUndefined();
    const fs = statfsSync(dir);
    const over = Math.ceil((fs.bavail * fs.bsize) / MiB) + 1024;
    const reserve = await DiskReserve.of(dir, over);
    const short = await reserve.shortage();
    expect(short?.reserveBytes).toBe(over * MiB);
    expect(Math.abs(short!.freeBytes - fs.bavail * fs.bsize)).toBeLessThan(256 * MiB);
    await expect(reserve.assertRoom()).rejects.toMatchObject({ code: 'storage_full', detail: { reserveBytes: over * MiB } });
    expect(storageFullFailure(short!)).toMatchObject({ code: 'storage_full', message: expect.stringContaining(`reserve of ${over} MiB`) });
    expect(await (await DiskReserve.of(dir, 1)).shortage()).toBeUndefined();
  });
});
