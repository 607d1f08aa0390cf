/** The Docker endpoint as the docker CLI reads it from the environment (DESIGN §6). */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { endpointFromEnv } from '../../src/providers/docker/docker-client.ts';

describe('endpointFromEnv', () => {
  const certs = mkdtempSync(join(tmpdir(), 'berth-docker-certs-'));
  for (const name of ['ca', 'cert', 'key']) writeFileSync(join(certs, `${name}.pem`), `${name} pem`);
  afterAll(() => rmSync(certs, { recursive: true, force: true }));

  it('should use the default socket when DOCKER_HOST is unset', () => {
    expect(endpointFromEnv({})).toEqual({ socketPath: '/var/run/docker.sock' });
  });

  it('should take a unix:// socket path', () => {
    expect(endpointFromEnv({ DOCKER_HOST: 'unix:///tmp/berth-docker/docker.sock' })).toEqual({
      socketPath: '/tmp/berth-docker/docker.sock',
    });
  });

  it('should take a plain tcp:// host with the default port 2375', () => {
    expect(endpointFromEnv({ DOCKER_HOST: 'tcp://10.0.0.5' })).toEqual({ host: '10.0.0.5', port: 2375 });
    expect(endpointFromEnv({ DOCKER_HOST: 'tcp://engine:4243' })).toEqual({ host: 'engine', port: 4243 });
  });

  it('should read ca, cert and key from DOCKER_CERT_PATH when DOCKER_TLS_VERIFY is set', () => {
    const endpoint = endpointFromEnv({ DOCKER_HOST: 'tcp://engine', DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs });
    expect(endpoint).toMatchObject({ host: 'engine', port: 2376 });
    if (!('host' in endpoint)) throw new Error('expected a TCP endpoint');
    expect(String(endpoint.ca)).toBe('ca pem');
    expect(String(endpoint.cert)).toBe('cert pem');
    expect(String(endpoint.key)).toBe('key pem');
  });

  it('should refuse schemes it cannot speak', () => {
    expect(() => endpointFromEnv({ DOCKER_HOST: 'ssh://user@engine' })).toThrow(/only unix:\/\/ and tcp:\/\//);
  });
});
