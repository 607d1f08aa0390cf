/**
 * The OpenAPI document is complete: every route fastify registered is in it (and nothing else), every schema compiles
 * (responses, error answers, JSON and raw request bodies), every operation carries its resource's tag, the file
 * writes and the import document their bodies, and each route's error answers list registry codes under their own
 * status — real error answers match them, and every code of the registry is documented somewhere.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorCodes, type ErrorCode } from '../../schemas/errors.ts';
import { OpenApiCheck, registeredRoutes, type OpenApiDocument } from '../e2e/openapi-check.ts';
import { startGateway, tokens, type RunningGateway } from './gateway-fixture.ts';

type Operation = {
  tags: string[];
  security?: unknown[];
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: { allOf?: [unknown, { properties: { error: { properties: { code: { enum: ErrorCode[] } } } } }] } }> }>;
};

let gw: RunningGateway;
let doc: OpenApiDocument & { tags: { name: string }[]; paths: Record<string, Record<string, Operation>> };
let check: OpenApiCheck;

beforeAll(async () => {
  gw = await startGateway();
  doc = await (await fetch(`${gw.url}/v1/openapi.json`)).json();
  check = new OpenApiCheck(doc);
});
afterAll(() => gw?.close());

const operations = () => Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));
/** The codes a route's documented error answer of `status` allows. */
const codesOf = (op: Operation, status: string) => op.responses[status]?.content?.['application/json']?.schema.allOf?.[1].properties.error.properties.code.enum;

describe('the OpenAPI document', () => {
  it('lists exactly the routes fastify registered', () => {
    const registered = registeredRoutes(gw.gateway.app.printRoutes({ commonPrefix: false }));
    expect(registered.length).toBeGreaterThan(50);
    expect(check.operations().sort()).toEqual(registered.sort());
  });

  it('compiles every schema in it, request bodies and error answers included', () => {
    expect(check.compileAll()).toBeGreaterThan(operations().length * 2);
  });

  it('tags each operation with its resource, and lists the tags', () => {
    for (const { path, op } of operations()) {
      const [, first, second] = path.split('/');
      expect(op.tags, path).toEqual([first === 'v1' && second ? second : first]);
    }
    expect(doc.tags.map((t) => t.name)).toEqual([...new Set(operations().map(({ op }) => op.tags[0]))].sort());
    expect(doc.paths['/v1/executions/{id}']!.get!.tags).toEqual(['executions']);
  });

  it('documents the bodies of file writes and imports', () => {
    const write = doc.paths['/v1/environments/{id}/files/{path}']!.put!;
    expect(Object.keys(write.requestBody!.content)).toEqual(['application/octet-stream']);
    const imported = doc.paths['/v1/environments/{id}/import']!.post!.requestBody!.content;
    expect(Object.keys(imported).sort()).toEqual(['application/gzip', 'application/json', 'application/x-tar', 'application/zip']);
    expect(JSON.stringify(imported['application/json']!.schema)).toContain('"git"');
    const turnFiles = Object.entries(doc.paths).filter(([path, ops]) => path.includes('/turns/') && path.includes('/files') && ops.put);
    expect(turnFiles.length).toBe(2);
    for (const [, ops] of turnFiles) expect(ops.put!.requestBody!.content['application/octet-stream']).toBeDefined();
  });

  it("enumerates each route's error codes from the registry under their own status, and documents every code", () => {
    const documented = new Set<ErrorCode>();
    for (const { path, method, op } of operations()) {
      for (const status of Object.keys(op.responses).filter((s) => Number(s) >= 400)) {
        const codes = codesOf(op, status);
        expect(codes, `${method} ${path} ${status}`).toBeDefined();
        for (const code of codes!) {
          expect(errorCodes[code]?.status, `${method} ${path}: ${code}`).toBe(Number(status));
          documented.add(code);
        }
        expect(op.responses[status]!.description).toContain(codes!.join(', '));
      }
      // Open routes (`security: []`) answer no 401; every other one does.
      expect(codesOf(op, '401'), `${method} ${path}`).toEqual(op.security?.length === 0 ? undefined : ['unauthorized']);
    }
    expect([...documented].sort()).toEqual(Object.keys(errorCodes).sort());
    expect(codesOf(doc.paths['/v1/environments/{id}/files/{path}']!.put!, '413')).toEqual(['file_too_large', 'body_too_large']);
    expect(codesOf(doc.paths['/v1/executions']!.post!, '409')).toContain('operation_conflict');
  });

  it('matches real error answers', async () => {
    const missing = await fetch(`${gw.url}/v1/executions/hexe_${'0'.repeat(32)}`, { headers: gw.headers(tokens.alice) });
    check.expect('GET', '/v1/executions/{id}', missing.status, await missing.json());
    const anonymous = await fetch(`${gw.url}/v1/environments`);
    check.expect('GET', '/v1/environments', anonymous.status, await anonymous.json());
    const malformed = await fetch(`${gw.url}/v1/executions`, { method: 'POST', headers: { ...gw.headers(tokens.alice), 'content-type': 'application/json' }, body: '{"nope":1}' });
    check.expect('POST', '/v1/executions', malformed.status, await malformed.json());
    // A code the route does not list fails the check.
    expect(() => check.expect('GET', '/v1/executions/{id}', 404, { error: { code: 'operation_conflict', message: 'x', detail: {} } })).toThrow(/does not match/);
  });
});
