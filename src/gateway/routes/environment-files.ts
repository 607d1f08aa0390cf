/**
 * An environment's source files (seed 001 §3): the tree, one file's bytes, write one file (its bytes as sent, any
 * content type), make a directory, remove a file or tree, and import a whole project (a zip, tar or tar.gz body, or
 * `{"git": {"url", "ref"}, "replace"}` as JSON). Nothing here changes what sessions see until the next build.
 */
import { z } from 'zod';
import { idParams } from '../../../schemas/api.ts';
import {
  directoryBody,
  directoryMadeSchema,
  filePathParams,
  fileTreeSchema,
  fileWrittenSchema,
  gitImportBody,
  importQuery,
  importResultSchema,
} from '../../../schemas/content-api.ts';
import { contentOf, contentPlugin, requestBytes } from '../content-plugin.ts';
import { parseOrReject } from '../../../schemas/parse-input.ts';
import { defineRoute } from '../route.ts';

const pathNote = 'path is relative to the environment root, with its segments percent-decoded; one that escapes the root, or names anything but a regular file or directory, is environment_invalid.';

const declaredLength = (header: string | undefined): number | undefined => (header && /^\d+$/.test(header) ? Number(header) : undefined);

export const environmentFilesPlugin = contentPlugin([
  {
    routes: [
      defineRoute(
        {
          method: 'GET',
          path: '/v1/environments/{id}/files',
          summary: 'The source tree: every file and directory, with sizes',
          params: idParams,
          responses: { 200: { description: 'The tree', schema: fileTreeSchema } },
        },
        async ({ deps, caller, params, request }) => contentOf(deps, request.method, request.url).tree(caller, params.id),
      ),
      defineRoute(
        {
          method: 'GET',
          path: '/v1/environments/{id}/files/{path}',
          summary: "One file's bytes, with its content type",
          description: pathNote,
          params: filePathParams,
          responses: { 200: { description: 'The bytes', contentType: 'application/octet-stream', schema: z.string() } },
        },
        async ({ deps, caller, params, request, reply }) => {
          const file = await contentOf(deps, request.method, request.url).readFile(caller, params.id, params.path);
          return reply.type(file.contentType).header('content-length', file.size).send(file.stream);
        },
      ),
      defineRoute(
        {
          method: 'DELETE',
          path: '/v1/environments/{id}/files/{path}',
          summary: 'Remove a file or a directory tree',
          description: pathNote,
          params: filePathParams,
          responses: { 204: { description: 'Removed' } },
        },
        async ({ deps, caller, params, request }) => {
          await contentOf(deps, request.method, request.url).removePath(caller, params.id, params.path);
          return undefined;
        },
      ),
    ],
  },
  {
    body: 'json',
    routes: [
      defineRoute(
        {
          method: 'POST',
          path: '/v1/environments/{id}/directories',
          summary: 'Make an empty directory (and its parents)',
          params: idParams,
          body: directoryBody,
          status: 201,
          responses: { 201: { description: 'The directory', schema: directoryMadeSchema } },
        },
        async ({ deps, caller, params, body, request }) => contentOf(deps, request.method, request.url).makeDirectory(caller, params.id, body.path),
      ),
    ],
  },
  {
    body: 'raw',
    routes: [
      defineRoute(
        {
          method: 'PUT',
          path: '/v1/environments/{id}/files/{path}',
          summary: 'Write one file: the body is its bytes (any content type); its directories are made',
          description: `${pathNote} A file over the limit is file_too_large (413, detail.max_bytes), never truncated.`,
          params: filePathParams,
          rawBody: { 'application/octet-stream': { description: "The file's bytes (any content type)" } },
          errors: ['file_too_large'],
          responses: { 200: { description: 'Written', schema: fileWrittenSchema } },
        },
        async ({ deps, caller, params, request }) => {
          const content = contentOf(deps, request.method, request.url);
          return content.writeFile(caller, params.id, params.path, requestBytes(request), declaredLength(request.headers['content-length']));
        },
      ),
    ],
  },
  {
    body: 'archive',
    routes: [
      defineRoute(
        {
          method: 'POST',
          path: '/v1/environments/{id}/import',
          summary: 'Import a whole project: a zip, tar or tar.gz body (any content type but application/json), or a git repository as JSON',
          description:
            'A single wrapping directory is stripped. Links, absolute or escaping paths, NUL bytes, devices and dependency directories are dropped and counted in skipped; archive bombs are refused (environment_invalid). ?replace=true (archives) or "replace": true (JSON) clears the source first.',
          params: idParams,
          query: importQuery,
          rawBody: {
            'application/gzip': { description: 'A tar.gz archive' },
            'application/x-tar': { description: 'A tar archive' },
            'application/zip': { description: 'A zip archive' },
            'application/json': { description: 'A git repository to clone', schema: gitImportBody },
          },
          errors: ['environment_invalid', 'file_too_large'],
          responses: { 200: { description: 'What landed and what was dropped', schema: importResultSchema } },
        },
        async ({ deps, caller, params, query, request }) => {
          const content = contentOf(deps, request.method, request.url);
          if (request.headers['content-type']?.startsWith('application/json')) {
            const body = parseOrReject(gitImportBody, request.body, 'body');
            return content.importGit(caller, params.id, body.git, { replace: body.replace ?? query.replace ?? false });
          }
          return content.importArchive(caller, params.id, requestBytes(request), { replace: query.replace ?? false });
        },
      ),
    ],
  },
]);
