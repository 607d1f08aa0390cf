/**
 * One runtime per data directory: `<data-dir>/runtime.lock` names the process holding it (pid and start time, so a
 * reused pid does not count). A lock left by a killed runtime is taken over; a live holder refuses the start, so
 * `berth env` next to a serving `berth serve`, or a second serve, cannot reconcile the same actors twice.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import { isProcessAlive, processStartTime } from '../../providers/native/host-process.ts';

interface Holder {
  pid: number;
  startTime?: string;
}

/** Locks held by this process, so a second runtime in the same process is refused too. */
const heldHere = new Set<string>();

export class DataDirLock {
  private constructor(
    private readonly file: string,
    private readonly holder: Holder,
  ) {}

  static async acquire(dataDir: string): Promise<DataDirLock> {
    await mkdir(dataDir, { recursive: true });
    const file = join(dataDir, 'runtime.lock');
    const holder: Holder = { pid: process.pid, startTime: await processStartTime(process.pid) };
    for (let attempt = 0; attempt < 3; attempt++) {
      if (heldHere.has(file)) throw busy(dataDir, process.pid);
      try {
        await writeFile(file, `${JSON.stringify(holder)}\n`, { flag: 'wx', mode: 0o600 });
        heldHere.add(file);
        return new DataDirLock(file, holder);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const other = await readHolder(file);
      if (other && other.pid !== process.pid && (await isProcessAlive(other.pid, other.startTime))) throw busy(dataDir, other.pid);
      // The holder is gone (killed runtime): take the lock over.
      await rm(file, { force: true });
    }
    throw busy(dataDir, undefined);
  }

  async release(): Promise<void> {
    heldHere.delete(this.file);
    const current = await readHolder(this.file);
    if (current?.pid === this.holder.pid && current.startTime === this.holder.startTime) await rm(this.file, { force: true });
  }
}

async function readHolder(file: string): Promise<Holder | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as Holder;
  } catch {
    return undefined;
  }
}

const busy = (dataDir: string, pid: number | undefined) =>
  new BerthError(
    'unavailable',
    `The data directory ${dataDir} is in use by another Berth runtime${pid ? ` (pid ${pid})` : ''}; talk to it with --url, or stop it first.`,
    { dataDir, ...(pid ? { pid } : {}) },
  );
