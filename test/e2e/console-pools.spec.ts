/**
 * The console's Pools view with a real warm pool (a real Docker engine, a `berth serve` with BERTH_POOLS): the admin
 * sees the pool's row fill (ready = size) and drains it from the page, which shows the server's answer. Skips,
 * saying so, without Docker or a chromium; the runtimes view and the member's refusal are in console.spec.ts.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerAvailable } from '../integration/docker-env.ts';
import { startPoolServer, type PoolServer } from '../security/pool-server.ts';
import { tokens } from './berth-server.ts';
import { browserAvailable, launchBrowser, signInAt } from './console-browser.ts';

const POOL = 'console-pool';
if (!dockerAvailable || !browserAvailable) console.log('skipped: the console\'s Pools view with a real pool (needs Docker and a chromium)');

describe.runIf(dockerAvailable && browserAvailable)('console Pools view with a warm pool', () => {
  let pool: PoolServer;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    pool = await startPoolServer(POOL, 1);
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await pool?.close();
  });

  it('shows the full pool and drains it from the page, showing the answer', async () => {
    await signInAt(page, pool.server.url, tokens.admin);
    await page.goto(`${pool.server.url}/ui#/pools`);
    const row = page.locator(`table[data-view=pools] tr[data-pool=${POOL}]`);
    await expect.poll(() => row.locator('td.state').innerText().catch(() => ''), { timeout: 10_000 }).toBe('1');
    expect(await row.innerText()).toContain('docker');
    await row.locator('button[data-drain]').click();
    await expect.poll(() => row.locator('.answer').innerText(), { timeout: 20_000 }).toBe('drained 1');
  }, 90_000);
});
