/**
 * A real headless Chromium for the web console's spec and benchmark (Debian's `chromium`, driven by playwright-core),
 * and the two steps every console session starts with: open /ui and sign in with a token.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type ConsoleMessage, type Page, type Request } from 'playwright-core';

export const chromiumPath = process.env.BERTH_CHROMIUM ?? '/usr/bin/chromium';
export const browserAvailable = existsSync(chromiumPath);
/** `.ci/run` sets it: there a missing browser fails the run instead of skipping the console's specs. */
export const browserRequired = process.env.BERTH_REQUIRE_BROWSER === '1';

export const launchBrowser = (): Promise<Browser> => chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });

/**
 * Opens the console and signs in; resolves once the first view (environments) is drawn. On a loaded machine the page
 * twice drew nothing in 30 s (CI, stops 38 and 41): what the browser saw then (failed requests, script errors, the
 * root's content) is printed, the page is loaded once more, and a second blank page fails with that account.
 */
export async function signInAt(page: Page, url: string, token: string): Promise<void> {
  const seen: string[] = [];
  const onFailed = (r: Request) => seen.push(`request failed: ${r.url()} (${r.failure()?.errorText})`);
  const onError = (e: Error) => seen.push(`page error: ${e.message}`);
  const onConsole = (m: ConsoleMessage) => void (m.type() === 'error' && seen.push(`console: ${m.text()}`));
  page.on('requestfailed', onFailed).on('pageerror', onError).on('console', onConsole);
  try {
    for (let attempt = 1; ; attempt++) {
      await page.goto(`${url}/ui`);
      const drawn = await page.waitForSelector('input[name=token]', { timeout: 15_000 }).then(() => true, () => false);
      if (drawn) break;
      const root = await page.evaluate('document.readyState + ", root: " + (document.getElementById("root")?.innerHTML.length ?? "none")');
      const account = `the console drew no sign-in form in 15 s (attempt ${attempt}; ${root}): ${seen.join('; ') || 'no failed request or error seen'}`;
      if (attempt === 2) throw new Error(account);
      console.warn(`${account}; loading the page again`);
    }
  } finally {
    page.off('requestfailed', onFailed).off('pageerror', onError).off('console', onConsole);
  }
  await page.fill('input[name=token]', token);
  await page.click('form.signin button[type=submit]');
  await page.waitForSelector('table[data-view=environments]');
}

/**
 * Milliseconds, measured in the page, from asking for a stream's timeline (a hash change) until its first page of
 * events and its statechart are drawn.
 */
export function timeToTimeline(page: Page, stream: string): Promise<number> {
  // A string, not a function: tsx (the benchmarks' loader) would wrap a function with helpers the page lacks.
  const s = JSON.stringify(stream);
  return page.evaluate(`new Promise((resolve) => {
    const ready = () => document.querySelector('[data-timeline=' + JSON.stringify(${s}) + '][data-timeline-ready="yes"]') && document.querySelector('svg.statechart .state.current');
    const started = performance.now();
    const observer = new MutationObserver(() => {
      if (!ready()) return;
      observer.disconnect();
      resolve(performance.now() - started);
    });
    observer.observe(document.body, { childList: true, subtree: true, attributes: true });
    location.hash = '#/timeline/' + encodeURIComponent(${s});
  })`) as Promise<number>;
}
