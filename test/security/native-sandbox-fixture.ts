/**
 * The native sandbox attacks' shared ground: a real `berth serve` whose data directory is outside /tmp (so hiding it,
 * not the private /tmp, is what keeps it out of sight), a host directory the sandbox may see with a root-owned 0600
 * secret in it, and a contained environment of alice with a built version. Needs bwrap: skipped visibly without it,
 * a failure under BERTH_REQUIRE_BWRAP=1.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBubblewrap } from '../../src/providers/native/bubblewrap.ts';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { build, createNamed, putFile, run } from '../e2e/content-client.ts';

export const bwrap = findBubblewrap();
if (!bwrap) {
  if (process.env.BERTH_REQUIRE_BWRAP === '1') throw new Error('bubblewrap (bwrap) is required (BERTH_REQUIRE_BWRAP=1)');
  console.warn('SKIPPED: native sandbox attacks need bubblewrap (bwrap)');
}
export const asRoot = process.getuid?.() === 0;

export interface SandboxGround {
  server: BerthServer;
  root: string;
  dataDir: string;
  /** A host directory contained commands see (read-only). */
  shown: string;
  /** Root-owned, mode 0600, in `shown`. */
  secret: string;
  /** alice's contained environment, built: its version at /env/<slug>. */
  env: { id: string; slug: string };
  close(): Promise<void>;
  sh(script: string, extra?: Record<string, unknown>, token?: string): ReturnType<typeof run>;
}

export async function sandboxGround(name: string): Promise<SandboxGround> {
  const root = mkdtempSync('/var/tmp/berth-sandbox-');
  // Searchable, not listable, by the sandbox identity: an operator's data directory must be (README).
  chmodSync(root, 0o711);
  const dataDir = join(root, 'data');
  const shown = join(root, 'shown');
  mkdirSync(shown, { mode: 0o755 });
  chmodSync(shown, 0o755);
  const secret = join(shown, 'secret');
  writeFileSync(secret, 'host-secret\n', { mode: 0o600 });
  const server = await startServer(['--data-dir', dataDir]);
  const created = await createNamed(server, name, tokens.alice, { contain: true, network: 'none' });
  await putFile(server, created.id, 'data.txt', 'pristine\n');
  const built = await build(server, created.id);
  if (built.status !== 'ready') throw new Error(`the fixture's build failed: ${JSON.stringify(built)}`);
  return {
    server,
    root,
    dataDir,
    shown,
    secret,
    env: { id: created.id, slug: created.slug },
    sh: (script, extra = {}, token = tokens.alice) => run(server, created.id, script, token, extra),
    async close() {
      await server.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
