/**
 * How a `berth host` admits calls: a client certificate its client CA signed (mTLS) and/or the bearer credential: read once from a file only its owner may read, compared
 * in constant time (both sides hashed first, so neither length nor content leaks through timing). The secret itself
 * is never logged, echoed in an error, or passed to a command.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type http from 'node:http';
import { resolve } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { BerthError } from '../../schemas/errors.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** Reads `file` and answers whether an Authorization header carries its secret. */
export function credentialCheck(file: string): (authorization: string | undefined) => boolean {
  let secret: string;
  try {
    if ((statSync(file).mode & 0o077) !== 0) {
      throw new BerthError('invalid_request', `the credential file ${file} may be read by others: make it mode 0600`, { reason: 'credential_mode', file });
    }
    secret = readFileSync(file, 'utf8').trim();
  } catch (e) {
    if (e instanceof BerthError) throw e;
    throw new BerthError('invalid_request', `cannot read the credential file ${file}: ${(e as Error).message}`, { reason: 'credential_file', file });
  }
  if (secret.length < 16) throw new BerthError('invalid_request', `the credential in ${file} must be at least 16 characters`, { reason: 'credential_short', file });
  const expected = digest(secret);
  return (authorization) => {
    const given = /^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? '';
    return timingSafeEqual(digest(given), expected);
  };
}

export interface HostAuthOptions {
  /** The bearer secret's file; absent when client certificates alone admit callers. */
  credentialFile?: string;
  /** Whether the TLS listener requires a client certificate its client CA signed (`--tls-client-ca`). */
  clientCertificates?: boolean;
}

/**
 * The host's admission of a call, before anything else is looked at: on TLS with a client CA, a certificate that CA
 * signed (the handshake asks for one but lets the call through, so the refusal is a typed answer, not a reset);
 * then the bearer secret, when one is configured. A Unix socket has no certificate: its callers need the secret.
 */
export function hostAuth(options: HostAuthOptions): (req: http.IncomingMessage) => void {
  const admits = options.credentialFile === undefined ? undefined : credentialCheck(options.credentialFile);
  return (req) => {
    const socket = req.socket as TLSSocket;
    if (options.clientCertificates && socket.encrypted) {
      if (!socket.authorized) {
        const presented = Object.keys(socket.getPeerCertificate() ?? {}).length > 0;
        throw new BerthError('unauthorized', presented ? 'The client certificate is not signed by the host\'s client CA.' : 'The host requires a client certificate.', {
          reason: presented ? 'client_certificate_untrusted' : 'client_certificate_missing',
        });
      }
    } else if (!admits) {
      throw new BerthError('unauthorized', 'This listener admits callers by client certificate only.', { reason: 'client_certificate_missing' });
    }
    if (admits && !admits(req.headers.authorization)) throw new BerthError('unauthorized', 'The host credential is missing or wrong.');
  };
}

/** The files a host's commands must never see: its credential and its TLS key. */
export function hostSecrets(options: { credentialFile?: string; tls?: { keyPath: string } }): string[] {
  return [options.credentialFile, options.tls?.keyPath].filter((f): f is string => f !== undefined).map((f) => resolve(f));
}
