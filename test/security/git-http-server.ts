/**
 * A real git smart-HTTP server for the git import attack specs: `git http-backend` behind a Node HTTP listener on
 * loopback, serving bare repositories under one directory, counting every request it answers (a refused import must
 * cost it none). `redirectTo` makes a listener that only redirects, as a public host could to an internal one.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import path from 'node:path';

export interface GitHttpServer {
  port: number;
  /** Request lines seen so far (`GET /project.git/info/refs?service=git-upload-pack`). */
  requests: string[];
  close(): Promise<void>;
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', '-c', 'init.defaultBranch=main', ...args], { cwd, stdio: 'pipe' });

/** A bare repository `<root>/project.git` with one commit on `main` holding `README.md`. */
export function makeBareRepository(root: string): void {
  const work = path.join(root, 'work');
  mkdirSync(work, { recursive: true });
  git(root, 'init', '--bare', path.join(root, 'project.git'));
  git(work, 'init');
  writeFileSync(path.join(work, 'README.md'), '# internal\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-m', 'internal');
  git(work, 'push', path.join(root, 'project.git'), 'HEAD:main');
}

export async function startGitHttpServer(options: { projectRoot?: string; redirectTo?: string; host?: string }): Promise<GitHttpServer> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    if (options.redirectTo) {
      res.writeHead(302, { location: `${options.redirectTo}${req.url}` }).end();
      return;
    }
    serveCgi(options.projectRoot!, req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, options.host ?? '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** One request through `git http-backend` (CGI): headers up to the blank line, then the body. */
function serveCgi(projectRoot: string, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const child = spawn('git', ['http-backend'], {
    env: {
      ...process.env,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      REMOTE_ADDR: '127.0.0.1',
    },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  req.pipe(child.stdin);
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  child.on('close', () => {
    const out = Buffer.concat(chunks);
    const split = out.indexOf('\r\n\r\n');
    const head = out.subarray(0, split).toString('latin1').split('\r\n');
    let status = 200;
    for (const line of head) {
      const [name, ...rest] = line.split(':');
      const value = rest.join(':').trim();
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else if (name) res.setHeader(name, value);
    }
    res.writeHead(status).end(out.subarray(split + 4));
  });
}
