/**
 * The worker thread of sqlite-checkpointer.ts: copies the store's write-ahead log into the database file on its own
 * connection (PASSIVE checkpoints: they never wait for or block a writer), at most one per `intervalMs` while the
 * main thread reports commits. Plain JavaScript (imports node: modules and better-sqlite3 only), so it loads alike
 * under node, tsx and vitest.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';

const db = new Database(workerData.file);
// The checkpoint syncs the database file before the log may be reused: what was committed stays durable.
db.pragma('synchronous = FULL');
let last = 0;

parentPort.on('message', () => {
  setTimeout(
    () => {
      let reply = {};
      try {
        const [result] = db.pragma('wal_checkpoint(PASSIVE)');
        reply = { frames: result.log, copied: result.checkpointed };
      } catch (error) {
        reply = { error: error.message };
      }
      last = Date.now();
      parentPort.postMessage(reply);
    },
    Math.max(0, last + workerData.intervalMs - Date.now()),
  );
});
