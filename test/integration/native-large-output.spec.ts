/**
 * 256 MiB of stdout goes through the spool intact: followed live through the cursor API while the command writes,
 * then checked against the sha256 of the same bytes generated here.
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { nativeFixture, spec, untilExited, type Fixture } from './native-harness.ts';

const SIZE = 256 * 1024 * 1024;
const BLOCK = 1024 * 1024;

/** Block i holds the 32-bit big-endian counters i*BLOCK/4 ...: any lost, doubled or reordered block changes the hash. */
const generator = `const b = Buffer.alloc(${BLOCK}); const fs = require('fs');
for (let o = 0; o < ${SIZE}; o += b.length) { for (let i = 0; i < b.length; i += 4) b.writeUInt32BE((o + i) / 4, i); fs.writeSync(1, b); }`;

function expectedSha(): string {
  const hash = createHash('sha256');
  const b = Buffer.alloc(BLOCK);
  for (let o = 0; o < SIZE; o += b.length) {
    for (let i = 0; i < b.length; i += 4) b.writeUInt32BE((o + i) / 4, i);
    hash.update(b);
  }
  return hash.digest('hex');
}

let fx: Fixture;
beforeEach(() => {
  fx = nativeFixture();
});
afterEach(() => fx.cleanup());

it('spools 256 MiB of stdout and reads it back intact while it is written', async () => {
  const s = spec([process.execPath, '-e', generator]);
  await fx.executor.submit(s);
  const hash = createHash('sha256');
  let cursor = 0;
  for (;;) {
    const chunk = await fx.executor.read(s.operationId, 'stdout', cursor, 4 * BLOCK);
    hash.update(chunk.data);
    cursor = chunk.next;
    if (chunk.closed) break;
    if (chunk.data.length === 0) await fx.executor.waitForChange(s.operationId, 1000);
  }
  expect(cursor).toBe(SIZE);
  expect(await untilExited(fx.executor, s.operationId)).toMatchObject({ exitCode: 0, sizes: { stdout: SIZE } });
  expect(hash.digest('hex')).toBe(expectedSha());
}, 180_000);
