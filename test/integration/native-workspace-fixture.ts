/**
 * The native workspace-view specs' shared ground: a NativeProvider whose data directory lies outside /tmp (so hiding
 * it, not the private /tmp, keeps it out of sight) and holds a readable fake token, managed workspaces under it as
 * the runtime makes them (owned by Provider.workspaceOwner, a readable `.berth/secret` inside), staged inputs that
 * only the read-only bind keeps unwritten, and a contained and an uncontained allocation.
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Profile } from '../../schemas/profile.ts';
import { commandEnv } from '../../src/providers/command-env.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { sparesSettled } from '../../src/providers/native/supervisor-launcher.ts';
import type { ExecSpec, Executor, Receipt, WorkspaceView } from '../../src/providers/provider.ts';
import { run } from './native-harness.ts';

export const TOKEN = 'fake-server-token-4f1c';
export const BERTH_SECRET = 'workspace-private-9b2e';

export interface WorkspaceGround {
  dataDir: string;
  provider: NativeProvider;
  contained: Executor;
  uncontained: Executor;
  /**
   * A managed workspace `<dataDir>/workspaces/<name>` with `.berth/secret` and the directories `dirs` (relative),
   * owned as its commands' owner must have it.
   */
  workspace(name: string, dirs?: string[]): string;
  /** A staged-inputs directory (in the data directory) holding in.txt, writable by anyone but for the bind. */
  inputs(name: string): string;
  sh(executor: Executor, workspace: WorkspaceView, script: string, extra?: Partial<ExecSpec>): Promise<{ receipt: Receipt; stdout: string; stderr: string }>;
  close(): Promise<void>;
}

const contain: Profile = { provider: 'native', contain: true, network: 'none' };
const host: Profile = { provider: 'native' };

let operations = 0;

export async function workspaceGround(): Promise<WorkspaceGround> {
  const root = mkdtempSync('/var/tmp/berth-wsview-');
  chmodSync(root, 0o755);
  const dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o755 });
  // Readable by anyone: only the hiding keeps it from a contained command.
  writeFileSync(join(dataDir, 'token'), `${TOKEN}\n`, { mode: 0o644 });
  const provider = new NativeProvider({ dataDir });
  const executorFor = async (allocationId: string, profile: Profile) => {
    const ref = { requestId: `req-${allocationId}`, allocationId, environmentId: `env-${allocationId}` };
    await provider.allocate({ ...ref, generation: 1, profile });
    return provider.executor(ref, profile);
  };
  const contained = await executorFor('alloc-contained', contain);
  const uncontained = await executorFor('alloc-host', host);
  const owner = provider.workspaceOwner;
  const own = (path: string) => owner && chownSync(path, owner.uid, owner.gid);
  return {
    dataDir,
    provider,
    contained,
    uncontained,
    workspace(name, dirs = []) {
      const dir = join(dataDir, 'workspaces', name);
      mkdirSync(join(dir, '.berth'), { recursive: true, mode: 0o755 });
      writeFileSync(join(dir, '.berth', 'secret'), `${BERTH_SECRET}\n`, { mode: 0o644 });
      own(dir);
      for (const sub of dirs) {
        let path = dir;
        for (const part of sub.split('/')) {
          mkdirSync((path = join(path, part)), { recursive: true });
          own(path);
        }
      }
      return dir;
    },
    inputs(name) {
      const dir = join(dataDir, 'inputs', name);
      mkdirSync(dir, { recursive: true });
      chmodSync(dir, 0o777);
      writeFileSync(join(dir, 'in.txt'), 'staged input\n', { mode: 0o666 });
      chmodSync(join(dir, 'in.txt'), 0o666);
      return dir;
    },
    async sh(executor, workspace, script, extra = {}) {
      const spec: ExecSpec = {
        operationId: `wsview-${process.pid}-${++operations}`,
        command: ['/bin/sh', '-c', script],
        env: commandEnv(),
        stdin: false,
        workspace,
        ...extra,
      };
      const { receipt, stdout, stderr } = await run(executor, spec);
      return { receipt, stdout: stdout.toString(), stderr: stderr.toString() };
    },
    async close() {
      await sparesSettled();
      for (const allocationId of ['alloc-contained', 'alloc-host']) {
        await provider.deallocate({ requestId: `req-${allocationId}`, allocationId, environmentId: `env-${allocationId}` });
      }
      await provider.close();
      rmSync(root, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}
