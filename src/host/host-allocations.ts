/**
 * What a `berth host` keeps in its data directory so it can fence calls after a restart: its incarnation (made once:
 * another data directory at the same address is another host) and one record per allocation it made (the intent's
 * identity, generation, profile and, once ready, its backend's physical identity), plus the newest generation it saw per environment.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { physicalIdentitySchema } from '../../schemas/events/allocation.ts';
import { hostTargetSchema } from '../../schemas/host-protocol.ts';
import { profileSchema } from '../../schemas/profile.ts';

const recordSchema = z.strictObject({
  target: hostTargetSchema.omit({ incarnation: true }),
  profile: profileSchema,
  /** What the backend reported once the allocation was ready (a container's id and incarnation), which fences it. */
  identity: physicalIdentitySchema.optional(),
});
export type AllocationRecord = z.infer<typeof recordSchema>;

export class HostAllocations {
  readonly incarnation: string;
  private readonly dir: string;
  private readonly records = new Map<string, AllocationRecord>();
  private readonly newest = new Map<string, number>();

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'host', 'allocations');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.incarnation = keptIncarnation(join(dataDir, 'host', 'incarnation'));
    for (const name of readdirSync(this.dir).filter((n) => n.endsWith('.json'))) {
      const record = recordSchema.parse(JSON.parse(readFileSync(join(this.dir, name), 'utf8')));
      this.remember(record);
    }
  }

  get(allocationId: string): AllocationRecord | undefined {
    return this.records.get(allocationId);
  }

  /** The newest generation any call named for the environment (a smaller one is stale). */
  newestGeneration(environmentId: string): number {
    return this.newest.get(environmentId) ?? -1;
  }

  /** Written before the allocation is made, so a crash between the two still finds it by its request id. */
  put(record: AllocationRecord): void {
    const file = join(this.dir, `${record.target.allocationId}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
    this.remember(record);
  }

  delete(allocationId: string): void {
    rmSync(join(this.dir, `${allocationId}.json`), { force: true });
    this.records.delete(allocationId);
  }

  private remember(record: AllocationRecord): void {
    this.records.set(record.target.allocationId, record);
    const { environmentId, generation } = record.target;
    if (generation > this.newestGeneration(environmentId)) this.newest.set(environmentId, generation);
  }
}

function keptIncarnation(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const incarnation = `hinc_${randomUUID().replaceAll('-', '')}`;
  writeFileSync(file, `${incarnation}\n`, { mode: 0o600, flag: 'wx' });
  return incarnation;
}
