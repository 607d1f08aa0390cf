#!/usr/bin/env node
// Entry point of the `berth` command: runs the built CLI (dist/, `npm run build`) when its finished build (the stamp
// dist/.built, written last) is newer than every source file, else the TypeScript sources through tsx, so a checkout
// works without a build and never runs a stale or half-written one.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The version is answered here only (main.ts leaves it to this file): one file read, no module of the CLI loaded.
if (process.argv[2] === '--version' && process.argv.length === 3) {
  console.log(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
  process.exit(0);
}

const root = fileURLToPath(new URL('..', import.meta.url));
const built = `${root}dist/src/cli/main.js`;

/** The newest modification time under a source folder (0 when it does not exist, as in a package without sources). */
const newestSource = (dir) => {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true, recursive: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (entry.isFile()) newest = Math.max(newest, statSync(`${entry.parentPath}/${entry.name}`).mtimeMs);
  }
  return newest;
};

const builtAt = (() => {
  try {
    return statSync(`${root}dist/.built`).mtimeMs;
  } catch {
    return undefined;
  }
})();

// Only a checkout's sources change after a build: an installed package's never do, so it skips the walk.
const inCheckout = existsSync(`${root}.git`);
if (builtAt !== undefined && (!inCheckout || builtAt >= Math.max(newestSource(`${root}src`), newestSource(`${root}schemas`)))) {
  await import(built);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
