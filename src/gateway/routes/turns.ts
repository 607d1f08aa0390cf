/**
 * Tool turns (issue 13): open a turn on a session's workspace (it holds the storage), run file tools in it, release
 * it. File paths are relative to the workspace root, in `?path=`. Reads answer the bytes with the file's byte
 * version (`ETag`, `x-berth-version`); a write may name the version it expects (`If-Match`; `If-None-Match: *` to
 * create only): a stale one is `stale_version` (412) and nothing is written. Shell commands name the turn in
 * `POST /v1/executions {session, turn}`.
 */
import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  editFileBody,
  entryInfoSchema,
  fileChangesSchema,
  fileListSchema,
  fileQuery,
  fileWrittenJson,
  idParams,
  listFilesQuery,
  mkdirBody,
  openTurnBody,
  readFileQuery,
  releaseTurnBody,
  removeFileQuery,
  sessionTurnParams,
  turnSchema,
  writeFileQuery,
} from '../../../schemas/api.ts';
import { BerthError } from '../../../schemas/errors.ts';
import { MAX_FILE_BYTES } from '../../runtime/workspaces/turn-files.ts';
import { registerGroups } from '../body-groups.ts';
import { sentNatively } from '../native-sent-body.ts';
import { CheckedFileStream } from '../../runtime/workspaces/checked-file-stream.ts';
import { requestBytes } from '../content-plugin.ts';
import { defineRoute, type GatewayDeps, type ResourcePlugin } from '../route.ts';

const FILES = '/v1/sessions/{id}/turns/{turnId}/files';

/** The byte version a write expects: If-Match (quoted or bare), or `absent` for If-None-Match: *. */
function expected(request: FastifyRequest): string | undefined {
  const match = request.headers['if-match'];
  if (typeof match === 'string' && match.length > 0) return match.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
  return request.headers['if-none-match'] === '*' ? 'absent' : undefined;
}

/**
 * The raw body (a file's bytes) as it arrives: the tools hash and write it chunk by chunk and refuse it past their
 * limit; a declared length over the limit is refused before anything is read.
 */
function fileBody(request: FastifyRequest): AsyncIterable<Uint8Array> {
  if (Number(request.headers['content-length']) > MAX_FILE_BYTES) {
    throw new BerthError('file_too_large', 'The file is over the limit.', { max_bytes: MAX_FILE_BYTES });
  }
  return requestBytes(request);
}

const turnRoutes = [
  defineRoute(
    {
      method: 'POST',
      path: '/v1/sessions/{id}/turns',
      summary: "Open a tool turn on the session's workspace: it holds the storage until released",
      description:
        'Refused before anything is claimed when the session has no workspace, its binding no longer matches (workspace_unavailable: generation, identity, deletion) or its directory is missing or a link. Another holder: workspace_busy (409, retryable), or wait with waitMs.',
      params: idParams,
      body: openTurnBody,
      status: 201,
      responses: { 201: { description: 'The turn', schema: turnSchema } },
    },
    async ({ deps, caller, params, body }) => deps.api.openTurn(caller, params.id, body),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/sessions/{id}/turns/{turnId}',
      summary: 'One turn',
      params: sessionTurnParams,
      responses: { 200: { description: 'The turn', schema: turnSchema } },
    },
    async ({ deps, caller, params }) => deps.api.getTurn(caller, params.id, params.turnId),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/sessions/{id}/turns/{turnId}/release',
      summary: 'Close the gate, wait for admitted calls, record shell changes, give the storage back',
      description:
        'Idempotent: a released turn answers as it is. Calls still running at waitMs: workspace_busy (release again). An execution with an unknown outcome keeps the storage held: invalid_state, reason unknown_outcome.',
      params: sessionTurnParams,
      body: releaseTurnBody,
      responses: { 200: { description: 'The released turn', schema: turnSchema } },
    },
    async ({ deps, caller, params, body }) => deps.api.releaseTurn(caller, params.id, params.turnId, body),
  ),
  defineRoute(
    {
      method: 'GET',
      path: FILES,
      summary: "Read a file's bytes (offset/limit), with its byte version",
      params: sessionTurnParams,
      query: readFileQuery,
      responses: { 200: { description: 'The bytes; ETag and x-berth-version carry the byte version, x-berth-size the whole size', contentType: 'application/octet-stream', schema: z.string() } },
    },
    async ({ deps, caller, params, query, reply }) => {
      const read = await deps.api.files.readStream(caller, params.id, params.turnId, query.path, { ...(query.offset !== undefined ? { offset: query.offset } : {}), ...(query.limit !== undefined ? { limit: query.limit } : {}) });
      // However the answer ends (sent, cut off, never started), the file's stream ends with it and the call leaves the turn.
      if (!Buffer.isBuffer(read.body)) reply.raw.once('close', () => (read.body as Readable).destroy());
      const body = read.body instanceof CheckedFileStream ? sentNatively(read.body, reply.raw) : read.body;
      return reply
        .type('application/octet-stream')
        // Declared for a stream too: a file cut short meanwhile ends the answer in an error, never a short success.
        .header('content-length', read.length)
        .header('etag', `"${read.version}"`)
        .header('x-berth-version', read.version)
        .header('x-berth-size', read.size)
        .header('x-berth-offset', read.offset)
        .send(body);
    },
  ),
  defineRoute(
    {
      method: 'GET',
      path: `${FILES}/list`,
      summary: 'List a directory (sorted by name, paged by cursor)',
      params: sessionTurnParams,
      query: listFilesQuery,
      responses: { 200: { description: 'The entries', schema: fileListSchema } },
    },
    async ({ deps, caller, params, query }) =>
      deps.api.files.list(caller, params.id, params.turnId, query.path ?? '', { ...(query.limit !== undefined ? { limit: query.limit } : {}), ...(query.cursor !== undefined ? { cursor: query.cursor } : {}) }),
  ),
  defineRoute(
    {
      method: 'GET',
      path: `${FILES}/stat`,
      summary: 'Stat one path (never following a link)',
      params: sessionTurnParams,
      query: fileQuery,
      responses: { 200: { description: 'The entry', schema: entryInfoSchema } },
    },
    async ({ deps, caller, params, query }) => deps.api.files.stat(caller, params.id, params.turnId, query.path),
  ),
  defineRoute(
    {
      method: 'DELETE',
      path: FILES,
      summary: 'Remove a file or (recursive=true) a directory tree',
      params: sessionTurnParams,
      query: removeFileQuery,
      responses: { 200: { description: 'What was removed', schema: fileChangesSchema } },
    },
    async ({ deps, caller, params, query }) => deps.api.files.remove(caller, params.id, params.turnId, query.path, { ...(query.recursive !== undefined ? { recursive: query.recursive } : {}) }),
  ),
];

const jsonRoutes = [
  defineRoute(
    {
      method: 'POST',
      path: `${FILES}/edit`,
      summary: 'Replace text that occurs exactly once',
      description: 'old must occur exactly once: else invalid_request (reason old_text_missing or old_text_not_unique). ifMatch as for writes.',
      params: sessionTurnParams,
      body: editFileBody,
      responses: { 200: { description: 'The file as written', schema: fileWrittenJson } },
    },
    async ({ deps, caller, params, body }) =>
      deps.api.files.edit(caller, params.id, params.turnId, body.path, body.old, body.new, { ...(body.ifMatch !== undefined ? { ifMatch: body.ifMatch } : {}) }),
  ),
  defineRoute(
    {
      method: 'POST',
      path: `${FILES}/mkdir`,
      summary: 'Make a directory (parents: true makes the missing ones)',
      params: sessionTurnParams,
      body: mkdirBody,
      status: 201,
      responses: { 201: { description: 'What was made', schema: fileChangesSchema } },
    },
    async ({ deps, caller, params, body }) => deps.api.files.mkdir(caller, params.id, params.turnId, body.path, { ...(body.parents !== undefined ? { parents: body.parents } : {}) }),
  ),
];

const rawRoutes = [
  defineRoute(
    {
      method: 'PUT',
      path: FILES,
      summary: "Write a file: the body is its bytes; If-Match names the byte version expected (If-None-Match: * creates only)",
      description: 'A stale If-Match is stale_version (412): nothing written. parents=true makes missing directories. A file over the limit is file_too_large (413).',
      params: sessionTurnParams,
      query: writeFileQuery,
      headers: {
        'if-match': { description: 'The byte version the file must still have', schema: z.string() },
        'if-none-match': { description: '`*`: only if the file does not exist', schema: z.string() },
      },
      rawBody: { 'application/octet-stream': { description: "The file's bytes (any content type)" } },
      errors: ['stale_version', 'file_too_large'],
      responses: { 200: { description: 'Written', schema: fileWrittenJson } },
    },
    async ({ deps, caller, params, query, request }) => {
      const ifMatch = expected(request);
      return deps.api.files.write(caller, params.id, params.turnId, query.path, fileBody(request), { ...(ifMatch ? { ifMatch } : {}), ...(query.parents !== undefined ? { parents: query.parents } : {}) });
    },
  ),
  defineRoute(
    {
      method: 'PUT',
      path: `${FILES}/inputs`,
      summary: 'Stage an input at .berth-inputs/<path>: read-only to tools and commands from then on',
      params: sessionTurnParams,
      query: fileQuery,
      rawBody: { 'application/octet-stream': { description: "The input's bytes (any content type)" } },
      errors: ['file_too_large'],
      responses: { 200: { description: 'Staged', schema: fileWrittenJson } },
    },
    async ({ deps, caller, params, query, request }) => deps.api.files.stage(caller, params.id, params.turnId, query.path, fileBody(request)),
  ),
];

const groups = [{ routes: turnRoutes }, { routes: jsonRoutes, body: 'json' as const }, { routes: rawRoutes, body: 'raw' as const }];

export const turnsPlugin: ResourcePlugin = Object.assign(
  async (app: Parameters<ResourcePlugin>[0], opts: { deps: GatewayDeps }) => registerGroups(app, groups, opts),
  { routes: groups.flatMap((g) => g.routes) },
);
