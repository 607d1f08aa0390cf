/**
 * The e2e server's close (a SIGKILL, as a crash) leaves no command of its running: supervisors outlive the runtime by
 * design, so the fixture stops them, or each test file would leak its sleepers and a late receipt would race the
 * data directory's removal (CI once failed with ENOTEMPTY in a spool directory).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../fixtures/wait-for.ts';
import { createEnvironment, startServer, submit } from './berth-server.ts';

/** Live processes whose argv is exactly `argv`. */
function processesRunning(argv: string[]): number[] {
  const wanted = `${argv.join('\0')}\0`;
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8') === wanted && !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('the e2e server fixture', () => {
  it('stops the commands its killed server left running, a cancelled one too, and removes the directory', async () => {
    const server = await startServer();
    const env = await createEnvironment(server);
    const marks = [`${process.pid}${Date.now() % 100000}1`, `${process.pid}${Date.now() % 100000}2`];
    await submit(server, env, ['sleep', marks[0]!]);
    const cancelled = await submit(server, env, ['sleep', marks[1]!]);
    for (const mark of marks) await waitFor(() => processesRunning(['sleep', mark]).length, { until: (n) => n === 1, what: `sleep ${mark} running` });
    await server.call(`/v1/executions/${cancelled.id}/cancel`, { method: 'POST', body: {} });

    await server.close();
    for (const mark of marks) expect(processesRunning(['sleep', mark])).toEqual([]);
    expect(existsSync(server.dataDir)).toBe(false);
  });
});
