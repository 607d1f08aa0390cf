/**
 * The workspace benchmarks' test bed: the bench gateway (real runtime, native provider, loopback listener) with
 * managed workspaces, each with a session bound to it, and the raw baselines' scratch directory on the same disk.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { caller, startBenchGateway, type BenchGateway } from './bench-gateway.ts';

export interface WorkspaceBed extends BenchGateway {
  /** Where the raw baselines read and write (the same temporary filesystem as the data directory). */
  rawDir: string;
  /** `count` managed workspaces, each with one session bound to it; answers the session ids. */
  sessions(count: number): Promise<string[]>;
}

export async function startWorkspaceBed(): Promise<WorkspaceBed> {
  const bed = await startBenchGateway();
  const rawDir = mkdtempSync(join(tmpdir(), 'berth-bench-raw-'));
  const { api } = bed.berth;
  return {
    ...bed,
    rawDir,
    async sessions(count) {
      const ids: string[] = [];
      for (let i = 0; i < count; i++) {
        const ws = await api.createWorkspace(caller, { name: `bench ${i}` });
        ids.push((await api.createSession(caller, { workspaceId: ws.id })).id);
      }
      return ids;
    },
    async close() {
      await bed.close();
      rmSync(rawDir, { recursive: true, force: true });
    },
  };
}
