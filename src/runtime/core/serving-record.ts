/**
 * Where the server holding a data directory answers: `berth serve` writes `<data-dir>/serving.json` (its pid and
 * start time, its URL, the admin token's file) once it listens and removes it when it stops, so a CLI command run
 * beside it talks to that server instead of starting a runtime of its own. A record left by a process that is gone
 * counts as none (the pid and start time are checked as the data-dir lock checks them).
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isProcessAlive, processStartTime } from '../../providers/native/host-process.ts';

export interface ServingRecord {
  pid: number;
  startTime?: string;
  /** The URL a client on this machine uses (the first listener's). */
  url: string;
  /** The admin token's file; absent when the token came from BERTH_TOKEN. */
  tokenFile?: string;
}

const recordFile = (dataDir: string) => join(dataDir, 'serving.json');

/** Records this process as the server of `dataDir`; the returned function removes the record (if still ours). */
export async function recordServing(dataDir: string, where: { url: string; tokenFile?: string }): Promise<() => Promise<void>> {
  const record: ServingRecord = { pid: process.pid, startTime: await processStartTime(process.pid), ...where };
  await writeFile(recordFile(dataDir), `${JSON.stringify(record)}\n`, { mode: 0o600 });
  return async () => {
    const current = await readRecord(dataDir);
    if (current?.pid === record.pid && current.startTime === record.startTime) await rm(recordFile(dataDir), { force: true });
  };
}

/** The live server of `dataDir`, if any. */
export async function findServing(dataDir: string): Promise<ServingRecord | undefined> {
  const record = await readRecord(dataDir);
  return record && (await isProcessAlive(record.pid, record.startTime)) ? record : undefined;
}

async function readRecord(dataDir: string): Promise<ServingRecord | undefined> {
  try {
    const parsed = JSON.parse(await readFile(recordFile(dataDir), 'utf8')) as Partial<ServingRecord>;
    return typeof parsed.pid === 'number' && typeof parsed.url === 'string' ? (parsed as ServingRecord) : undefined;
  } catch {
    return undefined;
  }
}
