/**
 * A build's installers (a member's setup.sh, an npm postinstall) run on the host's toolchain in a sandbox: it must
 * hide everything a contained command's sandbox hides, not only the data directory and the tokens file. Here the
 * admin maps a directory workspace root for bob (another tenant's files, written as the sandbox identity so that his
 * commands can change them, so no file mode keeps alice's build out) and alice's build tries to read it.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { build, createNamed, putFile, run } from '../e2e/content-client.ts';
import { bwrap } from './native-sandbox-fixture.ts';

describe.skipIf(!bwrap)("a member's build sees no more of the host than its commands", () => {
  let bobRoot: string;
  let server: BerthServer;

  beforeAll(async () => {
    bobRoot = mkdtempSync('/var/tmp/berth-bob-root-');
    chmodSync(bobRoot, 0o755);
    writeFileSync(join(bobRoot, 'secret.txt'), 'bob-workspace-secret\n', { mode: 0o644 });
    server = await startServer([], { BERTH_WORKSPACE_ROOTS: JSON.stringify([{ scope: 'bob', storageId: 'bob-files', root: bobRoot }]) });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    rmSync(bobRoot, { recursive: true, force: true });
  });

  // Hidden, the root is an empty directory or missing: the listing is empty either way.
  const probe = (root: string) => `cat ${root}/secret.txt 2>/dev/null; echo "listing:$(ls -A ${root} 2>/dev/null | tr '\\n' ' ')."`;

  it("alice's command cannot read bob's mapped workspace root (the view builds must match)", async () => {
    const env = await createNamed(server, 'Root Probe Command', tokens.alice, { contain: true });
    const { stdout } = await run(server, env.id, probe(bobRoot));
    expect(stdout).toContain('listing:.');
    expect(stdout).not.toContain('bob-workspace-secret');
  });

  it("alice's build step cannot read it either", async () => {
    const env = await createNamed(server, 'Root Probe Build', tokens.alice, { contain: true });
    await putFile(server, env.id, 'setup.sh', `${probe(bobRoot)}\n`);
    const built = await build(server, env.id);
    expect(built.status, built.log).toBe('ready');
    const log: string = built.log;
    expect(log).toContain('listing:.');
    expect(log).not.toContain('bob-workspace-secret');
  });

  it("a build's recorded log never names the data directory, a successful one's included", async () => {
    const env = await createNamed(server, 'Data Dir Echo', tokens.alice, { contain: true });
    // As a tenant that learned the path (from /proc/self/mountinfo, say) would print it.
    await putFile(server, env.id, 'setup.sh', `echo "here: ${server.dataDir}/x"\n`);
    const built = await build(server, env.id);
    expect(built.status, built.log).toBe('ready');
    expect(built.log).toContain('here: <data>/x');
    expect(built.log).not.toContain(server.dataDir);
  });
});
