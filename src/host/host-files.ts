/**
 * The workspace file host served by a `berth host` (`POST /v1/files/capture|apply`, framed bodies: schemas/
 * framed-body.ts): the allocation's view captured into a pack the control plane keeps, and a checkpoint applied to
 * it from the blobs the control plane sends. Both go through the provider's own file host (confined to the view, no
 * link followed, a manifest naming a place outside it refused before anything is written), after the target's fence.
 * Bytes in transit wait in a private file under the host's data directory, never whole in memory.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, rmSync, type WriteStream } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type http from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { BerthError } from '../../schemas/errors.ts';
import { frameHead, readFramed } from '../../schemas/framed-body.ts';
import { filesCallSchemas, MAX_APPLY_BYTES, MAX_FILES_HEAD_BYTES, type FilesCall, type FilesOp } from '../../schemas/host-protocol.ts';
import type { BlobLocation, BlobSource, PackWriter } from '../providers/file-host.ts';
import type { HostDispatch } from './host-dispatch.ts';

const READ_CHUNK = 1 << 20;

export class HostFiles {
  private readonly dir: string;

  constructor(
    dataDir: string,
    private readonly dispatch: HostDispatch,
  ) {
    this.dir = join(dataDir, 'host', 'transfers');
    // What an interrupted transfer left is never used again.
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  async serve(op: FilesOp, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { head, rest } = await readFramed(req, MAX_FILES_HEAD_BYTES);
    const parsed = filesCallSchemas[op].safeParse(head);
    if (!parsed.success) {
      throw new BerthError('invalid_request', 'The call does not match the host protocol.', { issues: parsed.error.issues.slice(0, 10).map((i) => `${i.path.join('.')}: ${i.message}`) });
    }
    const file = join(this.dir, randomUUID());
    try {
      if (op === 'capture') await this.capture(parsed.data as FilesCall<'capture'>, file, res);
      else await this.apply(parsed.data as FilesCall<'apply'>, rest, file, res);
    } finally {
      rmSync(file, { force: true });
    }
  }

  /** Captures into a private pack file, then answers the manifest and that file's bytes. */
  private async capture(call: FilesCall<'capture'>, file: string, res: http.ServerResponse): Promise<void> {
    const files = await this.dispatch.fileHost(call.target);
    const handle = await open(file, 'wx+', 0o600);
    let manifest;
    try {
      manifest = await files.capture(call.previous, new FilePack(handle, call.pack.name, call.pack.offset), call.limits);
    } finally {
      await handle.close();
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(frameHead(manifest));
    await pipeline(createReadStream(file), res);
  }

  /** Receives the listed blobs whole into a private file (exactly their sizes), then applies from it. */
  private async apply(call: FilesCall<'apply'>, body: AsyncIterable<Buffer>, file: string, res: http.ServerResponse): Promise<void> {
    const files = await this.dispatch.fileHost(call.target);
    const index = new Map<string, { at: number; size: number }>();
    let total = 0;
    for (const blob of call.blobs) {
      index.set(blobKey(blob), { at: total, size: blob.size });
      total += blob.size;
    }
    if (total > MAX_APPLY_BYTES) throw new BerthError('body_too_large', 'The apply sends more bytes than a view may hold.', { max_bytes: MAX_APPLY_BYTES });
    const received = await receive(body, createWriteStream(file, { flags: 'wx', mode: 0o600 }), total);
    if (received !== total) {
      throw new BerthError('invalid_request', 'The apply\'s body does not hold exactly the blobs it lists.', { reason: 'blob_bytes', listed: total, received });
    }
    const handle = await open(file, 'r');
    try {
      await files.apply(call.manifest, call.base, new FileBlobs(handle, index));
    } finally {
      await handle.close();
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 4 });
    res.end('null');
  }
}

const blobKey = (l: BlobLocation) => `${l.pack}\0${l.offset}`;

/** Writes the body into `out`, stopping (and counting on) once it is past `limit`; resolves the bytes it saw. */
async function receive(body: AsyncIterable<Buffer>, out: WriteStream, limit: number): Promise<number> {
  let seen = 0;
  try {
    for await (const chunk of body) {
      seen += chunk.length;
      if (seen > limit) break;
      if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
    }
  } finally {
    await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
  }
  return seen;
}

/** The capture's PackWriter: the control plane's pack name and offsets, the bytes in a private file here. */
class FilePack implements PackWriter {
  private written = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly pack: string,
    private readonly start: number,
  ) {}

  get offset(): number {
    return this.start + this.written;
  }

  async write(bytes: Buffer): Promise<void> {
    for (let at = 0; at < bytes.length; ) at += (await this.handle.write(bytes, at, bytes.length - at, this.written + at)).bytesWritten;
    this.written += bytes.length;
  }

  async truncate(offset: number): Promise<void> {
    this.written = offset - this.start;
    await this.handle.truncate(this.written);
  }
}

/** The blobs an apply sent, by the location its manifest names them at. */
class FileBlobs implements BlobSource {
  constructor(
    private readonly handle: FileHandle,
    private readonly index: Map<string, { at: number; size: number }>,
  ) {}

  async *read(location: BlobLocation, size: number): AsyncIterable<Buffer> {
    const blob = this.index.get(blobKey(location));
    if (!blob || blob.size !== size) {
      throw new BerthError('invalid_request', 'The manifest names a blob the apply did not send.', { reason: 'blob_missing', pack: location.pack, offset: location.offset });
    }
    for (let done = 0; done < size; ) {
      const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK, size - done));
      const { bytesRead } = await this.handle.read(buffer, 0, buffer.length, blob.at + done);
      if (bytesRead === 0) throw new BerthError('internal', 'A received blob is shorter than listed.', {});
      done += bytesRead;
      yield buffer.subarray(0, bytesRead);
    }
  }
}
