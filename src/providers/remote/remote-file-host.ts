/**
 * The file host of a remote allocation's workspace view (src/providers/file-host.ts), served by its Execution Host
 * (`POST /v1/files/capture|apply`, framed bodies: schemas/framed-body.ts). A capture's pack bytes come back after
 * its manifest and go into the control plane's pack at the offsets the host wrote them for; an apply sends the
 * blobs its changes need (the same changes the host's apply makes) after the manifests. The host confines both to
 * the view and checks the manifest itself.
 */
import type http from 'node:http';
import { BerthError } from '../../../schemas/errors.ts';
import { frameHead, readFramed } from '../../../schemas/framed-body.ts';
import { MAX_FILES_HEAD_BYTES, treeManifestSchema, type HostTarget } from '../../../schemas/host-protocol.ts';
import type { BlobLocation, BlobSource, CaptureLimits, FileHost, PackWriter, TreeManifest } from '../file-host.ts';
import { diffTrees } from '../tree-diff.ts';
import type { HostClient } from './host-client.ts';

export class RemoteFileHost implements FileHost {
  constructor(
    private readonly client: HostClient,
    private readonly target: HostTarget,
  ) {}

  async capture(previous: TreeManifest | undefined, pack: PackWriter, limits: CaptureLimits): Promise<TreeManifest> {
    const start = pack.offset;
    const head = { target: this.target, ...(previous ? { previous } : {}), limits, pack: { name: pack.pack, offset: start } };
    const answer = await this.client.open('/v1/files/capture', once(frameHead(head)));
    const incomplete = async (): Promise<never> => {
      await pack.truncate(start);
      throw new BerthError('unavailable', `The host ${this.client.config.name} did not send the whole capture.`, { host: this.client.config.name, reason: 'capture_incomplete' });
    };
    let manifest: unknown;
    try {
      const framed = await readFramed(answer, MAX_FILES_HEAD_BYTES);
      manifest = framed.head;
      for await (const chunk of framed.rest) await pack.write(chunk);
    } catch {
      // The connection cut mid-answer: nothing of it is taken.
      return incomplete();
    }
    const parsed = treeManifestSchema.safeParse(manifest);
    let end = start;
    for (const e of parsed.success ? parsed.data.entries : []) if (e.blob?.pack === pack.pack) end = Math.max(end, e.blob.offset + e.size);
    // A body cut short (the host gone mid-answer) is never taken for the view: the blobs it names must all be here.
    if (!parsed.success || pack.offset < end) return incomplete();
    return parsed.data as TreeManifest;
  }

  async apply(target: TreeManifest, base: TreeManifest | undefined, source: BlobSource): Promise<void> {
    const blobs = neededBlobs(target, base);
    const head = { target: this.target, manifest: target, ...(base ? { base } : {}), blobs };
    const answer = await this.client.open('/v1/files/apply', framed(frameHead(head), blobs, source));
    await drain(answer);
  }
}

/** The blobs of the files `base` → `target` writes (as tree-apply.ts makes them), each once. */
function neededBlobs(target: TreeManifest, base: TreeManifest | undefined): Array<BlobLocation & { size: number }> {
  const byPath = new Map(target.entries.map((e) => [e.path, e] as const));
  const seen = new Set<string>();
  const blobs: Array<BlobLocation & { size: number }> = [];
  for (const change of diffTrees(base, target)) {
    const entry = change.after === null ? undefined : byPath.get(change.path);
    if (entry?.type !== 'file' || !entry.blob || entry.size === 0) continue;
    const key = `${entry.blob.pack}\0${entry.blob.offset}`;
    if (seen.has(key)) continue;
    seen.add(key);
    blobs.push({ pack: entry.blob.pack, offset: entry.blob.offset, size: entry.size });
  }
  return blobs;
}

async function* once(bytes: Buffer): AsyncIterable<Buffer> {
  yield bytes;
}

async function* framed(head: Buffer, blobs: Array<BlobLocation & { size: number }>, source: BlobSource): AsyncIterable<Buffer> {
  yield head;
  for (const blob of blobs) {
    // Copied: a source may reuse its buffer for the next chunk while the socket still holds this one.
    for await (const chunk of source.read({ pack: blob.pack, offset: blob.offset }, blob.size)) yield Buffer.from(chunk);
  }
}

async function drain(answer: http.IncomingMessage): Promise<void> {
  for await (const _ of answer) {
    // The answer is `null`: read to its end so the connection is free again.
  }
}
