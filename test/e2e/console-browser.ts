/**
 * A real headless Chromium for the web console's spec and benchmark (Debian's `chromium`, driven by playwright-core),
 * and the two steps every console session starts with: open /ui and sign in with a token.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

export const chromiumPath = process.env.BERTH_CHROMIUM ?? '/usr/bin/chromium';
export const browserAvailable = existsSync(chromiumPath);
/** `.ci/run` sets it: there a missing browser fails the run instead of skipping the console's specs. */
export const browserRequired = process.env.BERTH_REQUIRE_BROWSER === '1';

export const launchBrowser = (): Promise<Browser> => chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });

/** Opens the console and signs in; resolves once the first view (environments) is drawn. */
export async function signInAt(page: Page, url: string, token: string): Promise<void> {
  await page.goto(`${url}/ui`);
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
