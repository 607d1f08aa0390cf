/** The native provider borrows the host: allocation makes only a spool directory, deallocation never destroys. */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { commandEnv } from '../../../src/providers/command-env.ts';
import { NativeProvider } from '../../../src/providers/native/native-provider.ts';

describe('NativeProvider', () => {
  let dataDir: string;
  let provider: NativeProvider;
  const intent = { environmentId: 'env-1', allocationId: 'alloc-1', requestId: 'req-1', generation: 1, profile: { provider: 'native' as const } };
  const ref = { requestId: 'req-1', allocationId: 'alloc-1', environmentId: 'env-1' };

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-native-provider-'));
    provider = new NativeProvider({ dataDir });
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it('is the borrowed native provider and always available', async () => {
    expect(provider.kind).toBe('native');
    expect(provider.ownership).toBe('borrowed');
    expect(await provider.available()).toBe(true);
  });

  it('allocates the host itself, creating only the allocation spool directory', async () => {
    const report = await provider.allocate(intent);
    expect(report).toEqual({ status: 'ready', identity: { provider: 'native', resourceId: hostname() } });
    expect(existsSync(join(dataDir, 'spool', 'alloc-1'))).toBe(true);
    expect(await provider.allocate(intent)).toEqual(report);
    expect(await provider.inspect(ref)).toEqual(report);
  });

  it('runs commands through an executor over <dataDir>/spool/<allocationId>', async () => {
    await provider.allocate(intent);
    const executor = provider.executor(ref, intent.profile);
    let receipt = await executor.submit({ operationId: 'op-1', command: ['true'], env: commandEnv(), stdin: false });
    while (receipt.state === 'running') {
      await executor.waitForChange('op-1', 1000);
      receipt = await executor.status('op-1');
    }
    expect(receipt).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(existsSync(join(dataDir, 'spool', 'alloc-1', 'op-1', 'receipt'))).toBe(true);
  });

  it('deallocates as terminated, dropping the spool directory only when it is empty', async () => {
    await provider.allocate(intent);
    writeFileSync(join(dataDir, 'spool', 'alloc-1', 'unsaved'), '');
    expect(await provider.deallocate(ref)).toBe('terminated');
    expect(existsSync(join(dataDir, 'spool', 'alloc-1', 'unsaved'))).toBe(true);
    rmSync(join(dataDir, 'spool', 'alloc-1', 'unsaved'));
    expect(await provider.deallocate(ref)).toBe('terminated');
    expect(existsSync(join(dataDir, 'spool', 'alloc-1'))).toBe(false);
    expect(await provider.deallocate(ref)).toBe('terminated');
  });

  it('refuses an allocation id that is not a plain directory name', async () => {
    await expect(provider.allocate({ ...intent, allocationId: '../escape' })).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
