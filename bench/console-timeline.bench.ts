/**
 * Opening an actor's timeline in the web console, measured in a real headless Chromium: from the hash change to its
 * first page of events and its statechart drawn, for an environment whose stream holds 10,000 events against one with
 * 10 (the raw baseline, same run, alternating; one of 100, a full first page, is printed beside them). The timeline
 * is paged from the server, so the target is <= 2x. Then the long stream's last page against its first, as the
 * console reads it again on every event of a followed actor (HTTP from here, no browser): a page folds from the
 * snapshot before it, so the end of a stream costs what its start does (target <= 2x).
 * Value and baseline are median milliseconds; the browser figure needs /usr/bin/chromium (BERTH_CHROMIUM), else it
 * says so and is skipped.
 */
import { browserAvailable, chromiumPath, launchBrowser, signInAt, timeToTimeline } from '../test/e2e/console-browser.ts';
import { caller, startBenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const LONG = Number(process.env.BENCH_TIMELINE_EVENTS ?? 10_000);
const SHORT = 10;
/** A stream that just fills the first page: what the long one costs beyond it is its history, not its page. */
const FULL_PAGE = 100;
/** The console's page size (src/gateway/ui/timeline.js). */
const PAGE = 100;
const RUNS = Number(process.env.BENCH_RUNS ?? 25);
const WARMUP = 3;

const bed = await startBenchGateway();
const browser = browserAvailable ? await launchBrowser() : undefined;
try {
  const { api } = bed.berth;
  /** An environment whose stream holds `events` events: created, then described again and again (real appends). */
  const environmentWith = async (events: number, name: string): Promise<string> => {
    const env = await api.createEnvironment(caller, { name });
    for (let i = 1; i < events; i++) await api.updateEnvironment(caller, env.id, { description: `revision ${i}` });
    return `environment-${env.id}`;
  };
  const started = performance.now();
  const short = await environmentWith(SHORT, 'short history');
  const fullPage = await environmentWith(FULL_PAGE, 'one page of history');
  const long = await environmentWith(LONG, 'long history');
  console.error(`console-timeline: wrote ${LONG + FULL_PAGE + SHORT} events in ${((performance.now() - started) / 1000).toFixed(1)} s`);

  const pageMs = async (stream: string, from: number): Promise<number> => {
    const started = performance.now();
    const res = await fetch(`${bed.url}/v1/streams/${encodeURIComponent(stream)}/timeline?from=${from}&limit=${PAGE}`, { headers: bed.headers });
    if (!res.ok) throw new Error(`timeline page: HTTP ${res.status}`);
    await res.json();
    return performance.now() - started;
  };
  const lastPage = Math.floor((LONG - 1) / PAGE) * PAGE;
  const firstMs: number[] = [];
  const lastMs: number[] = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const first = await pageMs(long, 0);
    const last = await pageMs(long, lastPage);
    if (i >= WARMUP) (firstMs.push(first), lastMs.push(last));
  }
  console.error(`console-timeline: ${LONG} events, page from ${lastPage} median ${median(lastMs).toFixed(1)} ms, from 0 ${median(firstMs).toFixed(1)} ms`);
  figure('console-timeline-last-page', median(lastMs), 'ms per last page', median(firstMs), { op: '<=', ratio: 2 });

  if (!browser) console.error(`console-timeline: the browser figure is skipped, no chromium at ${chromiumPath}`);
  else {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await signInAt(page, bed.url, bed.headers.authorization.replace('Bearer ', ''));
    const open = async (stream: string): Promise<number> => {
      const ms = await timeToTimeline(page, stream);
      await page.evaluate("location.hash = '#/environments'");
      await page.waitForSelector('table[data-view=environments]');
      return ms;
    };
    for (let i = 0; i < WARMUP; i++) for (const stream of [short, fullPage, long]) await open(stream);
    const shortMs: number[] = [];
    const fullPageMs: number[] = [];
    const longMs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      shortMs.push(await open(short));
      fullPageMs.push(await open(fullPage));
      longMs.push(await open(long));
    }
    console.error(`console-timeline: ${FULL_PAGE} events (one full page) median ${median(fullPageMs).toFixed(1)} ms`);
    console.error(`console-timeline: ${LONG} events median ${median(longMs).toFixed(1)} ms [${longMs.map((x) => x.toFixed(0)).join(' ')}]`);
    console.error(`console-timeline: ${SHORT} events median ${median(shortMs).toFixed(1)} ms [${shortMs.map((x) => x.toFixed(0)).join(' ')}]`);
    figure('console-timeline', median(longMs), 'ms to first page', median(shortMs), { op: '<=', ratio: 2 });
  }
} finally {
  await browser?.close();
  await bed.close();
}
