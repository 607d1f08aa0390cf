/**
 * A client that never stops writing: sends a chunked body (POST unless told) piece after piece (`make` gives the next) for at most
 * `maxBytes`, reading the answer as it comes, as node:http does. Resolves with the server's answer, or with only
 * `sent` when the server read all `maxBytes` without answering; a write that fails before any answer (EPIPE,
 * ECONNRESET: the server closed under the client) rejects.
 */
import { request } from 'node:http';

export interface EndlessAnswer {
  status?: number;
  body?: any;
  connection?: string;
  sent: number;
}

export function postEndless(url: string, token: string, contentType: string, make: () => Buffer, maxBytes: number, method = 'POST'): Promise<EndlessAnswer> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let done = false;
    const headers = { authorization: `Bearer ${token}`, 'content-type': contentType };
    const req = request(url, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        done = true;
        req.destroy();
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined, connection: res.headers.connection, sent });
      });
    });
    req.on('error', (e) => (done ? undefined : sent >= maxBytes ? resolve({ sent }) : reject(e)));
    const write = (): void => {
      while (!done && sent < maxBytes) {
        const piece = make();
        sent += piece.length;
        if (!req.write(piece)) return void req.once('drain', write);
      }
      if (!done) req.end();
    };
    write();
  });
}
