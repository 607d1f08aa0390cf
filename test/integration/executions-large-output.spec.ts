/**
 * A 256 MiB stdout through the spool into the artifact store, native and Docker: the saved artifact's digest is the
 * digest of the bytes the command wrote, the artifact file hashes to it, and reading it back by cursor through the
 * runtime API gives the same bytes.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExecutionContext } from '../../src/machines/execution.machine.ts';
import { dockerAvailable, newTestRun, removeTestResources } from './docker-env.ts';
import { caller, environmentFor, settled, startTestBerth, tempDir, type ProviderKind } from './executions-harness.ts';

const SIZE = 256 * 1024 * 1024;
const LINE = 'berth 256 MiB of known bytes 0123456789abcdefghijklmnopqrstuvwxyz\n';

/** sha256 of LINE repeated and cut at SIZE bytes, as `yes … | head -c SIZE` writes it. */
function expectedDigest(): string {
  const hash = createHash('sha256');
  const block = Buffer.from(LINE.repeat(Math.ceil((1024 * 1024) / LINE.length) * 4));
  // Each block is a whole number of lines, so blocks can follow each other.
  let left = SIZE;
  while (left > 0) {
    const n = Math.min(left, block.length);
    hash.update(block.subarray(0, n));
    left -= n;
  }
  return `sha256:${hash.digest('hex')}`;
}

const providers: ProviderKind[] = ['native', 'docker'];

describe.each(providers)('256 MiB of stdout, %s provider', (kind) => {
  const labels = kind === 'docker' ? newTestRun() : false;
  let dir: ReturnType<typeof tempDir> | undefined;
  afterAll(async () => {
    if (labels) await removeTestResources(labels);
    dir?.remove();
  });

  it.skipIf(kind === 'docker' && !dockerAvailable)('should save it intact and read it back by cursor', { timeout: 180_000 }, async () => {
    dir = tempDir(`berth-large-${kind}-`);
    const berth = await startTestBerth(join(dir.path, 'data'), labels);
    try {
      const { api } = berth;
      const environment = await environmentFor(api, kind);
      const submitted = await api.submitExecution(caller, {
        operationId: 'large',
        environment,
        command: ['/bin/sh', '-c', `yes '${LINE.trimEnd()}' | head -c ${SIZE}`],
      });
      const record = await settled(api, submitted.id, 150_000);
      expect(record).toMatchObject({ status: 'exited', exitCode: 0 });

      const digest = expectedDigest();
      const view = await berth.runtime.actors.get<ExecutionContext>('execution', submitted.id);
      expect(view?.context.artifacts?.stdout).toEqual({ digest, size: SIZE });

      const onDisk = createHash('sha256');
      for await (const chunk of createReadStream(berth.services.artifacts.pathOf(digest))) onDisk.update(chunk as Buffer);
      expect(`sha256:${onDisk.digest('hex')}`).toBe(digest);

      const readBack = createHash('sha256');
      let cursor = 0;
      for (;;) {
        const chunk = await api.readOutput(caller, submitted.id, 'stdout', cursor);
        readBack.update(chunk.data);
        cursor = chunk.next;
        if (chunk.complete) break;
      }
      expect(cursor).toBe(SIZE);
      expect(`sha256:${readBack.digest('hex')}`).toBe(digest);
    } finally {
      await berth.stop();
    }
  });
});
