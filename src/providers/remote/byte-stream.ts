/**
 * The client end of a host's byte stream (POST /v1/exec/stream) on a connection of its own, read with `onread` into
 * one reused buffer. Through the http module every socket read arrives in a fresh 64 KiB buffer: in a process whose
 * heap is of some size, that churn of external memory alone kept V8 in back-to-back full collections, which took more
 * of a 256 MiB follow than everything else on this side together. So HTTP/1.1 is spoken by hand for this one call: the
 * request, the response head, and a chunked body whose last chunk is the clean end; any other end is a broken stream.
 */
import net from 'node:net';
import tls from 'node:tls';

/** Where the bytes go. `view` is reused once `data` returns (copy what is kept); false pauses the connection. */
export interface ByteSink {
  data(view: Buffer): boolean;
  end(): void;
  broken(): void;
}

/** An accepted stream: resumed after its sink paused it, destroyed when no longer wanted. */
export interface ByteSource {
  resume(): void;
  destroy(): void;
}

/** A refused call's answer, as hostError reads it. */
export interface RefusedAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface StreamRequest {
  /** A Unix socket path, or a TLS endpoint with its options (CA, client certificate). */
  connect: { socketPath: string } | { host: string; port: number; tls: tls.ConnectionOptions };
  /** The request line and header lines, without the blank line that ends them (content-length is added). */
  head: string;
  body: Buffer;
  refused(answer: RefusedAnswer): Error;
  unreachable(e: NodeJS.ErrnoException): Error;
}

const READ_BYTES = 1 << 20;
/** A response head, a chunk's size line or a refusal's body longer than this is not the host's. */
const MAX_HEAD_BYTES = 64 * 1024;
/** Read synchronously out of it by whichever connection read, so one buffer serves them all. */
let readBuffer: Buffer | undefined;

export function openByteStream(request: StreamRequest, sink: ByteSink): Promise<ByteSource> {
  return new Promise((resolve, reject) => {
    let head = '';
    let answer: RefusedAnswer | undefined;
    let body: ChunkedBody | undefined;
    let settled = false;
    let accepted = false;
    let ended = false;
    const refusedBody: Buffer[] = [];
    let refusedBytes = 0;
    const onread = {
      buffer: (readBuffer ??= Buffer.allocUnsafeSlow(READ_BYTES)),
      callback: (n: number, buffer: Buffer): boolean => {
        let view = buffer.subarray(0, n);
        if (!answer) {
          const text = view.toString('latin1');
          const end = (head + text).indexOf('\r\n\r\n');
          if (end < 0) {
            head += text;
            if (head.length > MAX_HEAD_BYTES) socket.destroy(new Error('response head too long'));
            return true;
          }
          view = view.subarray(end + 4 - head.length);
          answer = parseHead((head + text).slice(0, end));
          const chunked = /\bchunked\b/i.test(answer.headers['transfer-encoding'] ?? '');
          if (answer.status === 200 && !chunked) return (socket.destroy(new Error('not a chunked body')), false);
          // A refusal's body is read to its last chunk, or to the close (connection: close) when it has a length.
          if (chunked) body = new ChunkedBody();
          if (answer.status === 200) {
            settled = accepted = true;
            resolve({ resume: () => socket.resume(), destroy: () => socket.destroy() });
          }
        }
        if (!accepted && (refusedBytes += view.length) > MAX_HEAD_BYTES) return (socket.destroy(new Error('refusal too long')), false);
        if (!body) return (refusedBody.push(Buffer.from(view)), true);
        let more = true;
        let done: boolean;
        try {
          done = body.feed(view, (data) => (accepted ? (more = sink.data(data) && more) : refusedBody.push(Buffer.from(data))));
        } catch (e) {
          return (socket.destroy(e as Error), false);
        }
        if (done) {
          ended = true;
          socket.destroy();
          if (accepted) sink.end();
          return false;
        }
        return more;
      },
    };
    const { connect } = request;
    const socket =
      'socketPath' in connect
        ? net.connect({ path: connect.socketPath, onread })
        : // tls.connect documents `onread` (as net.connect's); @types/node does not declare it.
          tls.connect({ host: connect.host, port: connect.port, ...(net.isIP(connect.host) ? {} : { servername: connect.host }), ...connect.tls, onread } as tls.ConnectionOptions);
    // One write: a second small one could wait on Nagle for the first one's acknowledgement.
    socket.write(Buffer.concat([Buffer.from(`${request.head}\r\ncontent-length: ${request.body.length}\r\nconnection: close\r\n\r\n`, 'latin1'), request.body]));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      if (!settled) (settled = true), reject(request.unreachable(e));
    });
    socket.on('close', () => {
      if (accepted) return void (ended || sink.broken());
      if (settled) return;
      settled = true;
      reject(answer ? request.refused({ ...answer, body: Buffer.concat(refusedBody) }) : request.unreachable(Object.assign(new Error('closed before answering'), { code: 'ECONNRESET' })));
    });
  });
}

function parseHead(text: string): RefusedAnswer {
  const [statusLine, ...lines] = text.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0), headers, body: Buffer.alloc(0) };
}

/** A chunked body fed in arbitrary pieces: hands over the chunks' data and says when the last chunk was read. */
class ChunkedBody {
  /** Data bytes left in the current chunk; -1 while a size line is read, -2 while a chunk's CRLF is skipped. */
  private left = -1;
  private line = '';
  private crlf = 0;
  private last = false;

  /** Answers true once the body ended (the last chunk and its trailer's blank line). */
  feed(view: Buffer, data: (bytes: Buffer) => void): boolean {
    let at = 0;
    while (at < view.length) {
      if (this.left > 0) {
        const take = Math.min(this.left, view.length - at);
        data(view.subarray(at, at + take));
        at += take;
        this.left -= take;
        if (this.left === 0) (this.left = -2), (this.crlf = 2);
      } else if (this.left === -2) {
        const skip = Math.min(this.crlf, view.length - at);
        at += skip;
        this.crlf -= skip;
        if (this.crlf === 0) this.left = -1;
      } else {
        const newline = view.indexOf(10, at);
        const end = newline < 0 ? view.length : newline;
        this.line += view.toString('latin1', at, end);
        if (this.line.length > MAX_HEAD_BYTES) throw new Error('chunk size line too long');
        at = end + (newline < 0 ? 0 : 1);
        if (newline < 0) continue;
        const line = this.line.replace(/\r$/, '');
        this.line = '';
        if (this.last) {
          if (line === '') return true;
        } else {
          const size = parseInt(line, 16);
          if (!Number.isSafeInteger(size) || size < 0) throw new Error(`bad chunk size line ${JSON.stringify(line.slice(0, 40))}`);
          if (size === 0) this.last = true;
          else this.left = size;
        }
      }
    }
    return false;
  }
}
