// Copies the files the compiled code loads beside itself (shell scripts, worker modules, static assets: everything
// under src/ that is not TypeScript) into dist/src/, the same relative place, after `tsc -p tsconfig.build.json`.
import { cpSync } from 'node:fs';

cpSync('src', 'dist/src', { recursive: true, filter: (path) => !path.endsWith('.ts') });
