/** The content type of an environment file, guessed from its extension (the bytes are served as stored). */
import path from 'node:path';

const text = (type: string) => `${type}; charset=utf-8`;

const byExtension: Record<string, string> = {
  '.txt': text('text/plain'),
  '.md': text('text/markdown'),
  '.csv': text('text/csv'),
  '.tsv': text('text/tab-separated-values'),
  '.html': text('text/html'),
  '.htm': text('text/html'),
  '.css': text('text/css'),
  '.js': text('text/javascript'),
  '.mjs': text('text/javascript'),
  '.cjs': text('text/javascript'),
  '.ts': text('text/plain'),
  '.py': text('text/x-python'),
  '.sh': text('application/x-sh'),
  '.json': 'application/json',
  '.yaml': text('application/yaml'),
  '.yml': text('application/yaml'),
  '.toml': text('application/toml'),
  '.xml': 'application/xml',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.pdf': 'application/pdf',
  '.zip': 'application/zip',
  '.gz': 'application/gzip',
  '.tar': 'application/x-tar',
  '.wasm': 'application/wasm',
  '.mp3': 'audio/mpeg',
  '.wav': 'audio/wav',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.woff2': 'font/woff2',
};

export function contentTypeOf(filePath: string): string {
  return byExtension[path.extname(filePath).toLowerCase()] ?? 'application/octet-stream';
}
