/**
 * A self-signed certificate for `localhost` (openssl), for the test server's TLS: the client trusts it through
 * `tlsCAFile`, as an operator points Berth at a cluster's own CA.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SelfSignedCert {
  cert: Buffer;
  key: Buffer;
  /** The certificate's file: the `tlsCAFile` of a client that trusts it. */
  certFile: string;
}

export function selfSignedCert(): SelfSignedCert {
  const dir = mkdtempSync(join(tmpdir(), 'berth-esdb-tls-'));
  const certFile = join(dir, 'node.crt');
  const keyFile = join(dir, 'node.key');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { cert: readFileSync(certFile), key: readFileSync(keyFile), certFile };
}
