// `npm run build`: compiles src/ and schemas/ into dist/ (JS and .d.ts, tsconfig.build.json), copies the files the
// compiled code loads beside itself (shell scripts, worker modules: everything under src/ that is not TypeScript),
// then writes dist/.built. bin/berth.js runs dist/ only when that stamp is newer than every source file, so a build
// in progress (the stamp removed first) or a stale one is never run.
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

rmSync('dist/.built', { force: true });
execFileSync(process.execPath, [createRequire(import.meta.url).resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
cpSync('src', 'dist/src', { recursive: true, filter: (path) => !path.endsWith('.ts') });
writeFileSync('dist/.built', '');
