/**
 * Copies and hashes local files off the main thread, for the artifact store: one long-lived worker
 * (artifact-copy.worker.mjs), started on first use and unreferenced while idle, takes the jobs in order. A worker
 * that dies or errs fails every job it held, never answers a digest for them; the next job starts a new worker.
 */
import { Worker } from 'node:worker_threads';

interface Job {
  resolve(digest: string): void;
  reject(error: Error): void;
}

interface Reply {
  id: number;
  digest?: string;
  error?: string;
  code?: string;
}

interface Running {
  worker: Worker;
  jobs: Map<number, Job>;
}

export class ArtifactCopier {
  private running?: Running;
  private nextId = 0;

  /**
   * Copies the first `size` bytes of `source` into `dest` (a new file: it must not exist), read-only and synced;
   * answers the copy's digest (`sha256:<hex>`). Fails when `source` holds fewer bytes.
   */
  copy(source: string, dest: string, size: number): Promise<string> {
    const { worker, jobs } = this.started();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      jobs.set(id, { resolve, reject });
      // Referenced only while a job is out: an idle worker never keeps the process alive.
      if (jobs.size === 1) worker.ref();
      worker.postMessage({ id, source, dest, size });
    });
  }

  /** Stops the worker: the jobs it held fail. */
  async close(): Promise<void> {
    const running = this.running;
    this.running = undefined;
    await running?.worker.terminate();
  }

  private started(): Running {
    if (this.running) return this.running;
    const worker = new Worker(new URL('./artifact-copy.worker.mjs', import.meta.url));
    worker.unref();
    const running: Running = { worker, jobs: new Map() };
    const { jobs } = running;
    worker.on('message', (reply: Reply) => {
      const job = jobs.get(reply.id);
      if (!job) return;
      jobs.delete(reply.id);
      if (jobs.size === 0) worker.unref();
      if (reply.digest !== undefined) job.resolve(reply.digest);
      else job.reject(Object.assign(new Error(reply.error ?? 'the artifact copy failed'), reply.code ? { code: reply.code } : {}));
    });
    const fail = (error: Error): void => {
      if (this.running === running) this.running = undefined;
      for (const job of jobs.values()) job.reject(error);
      jobs.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the artifact copy worker exited (code ${code})`)));
    this.running = running;
    return running;
  }
}

/** The process's copier: one worker however many artifact stores there are. */
export const sharedCopier = new ArtifactCopier();
