/**
 * The web console in a real headless Chromium against a real `berth serve`: a wrong token is refused in words;
 * alice signs in, creates an environment and runs a command from the page, watches its output arrive in the
 * terminal while it runs, opens its timeline and scrubs to its second event, whose state the statechart highlights;
 * the lists update from the feed without a reload; bob's actors stay out of reach. Screenshots of each view go to
 * test-artifacts/console/. Without a chromium it skips, saying so (BERTH_REQUIRE_BROWSER=1: it fails).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../fixtures/wait-for.ts';
import { createEnvironment, startServer, submit, tokens, type BerthServer } from './berth-server.ts';
import { browserAvailable, browserRequired, chromiumPath, launchBrowser, signInAt } from './console-browser.ts';

const artifacts = join(import.meta.dirname, '..', '..', 'test-artifacts', 'console');
if (!browserAvailable) console.log(`skipped: the web console in a browser (no chromium at ${chromiumPath}; apt-get install -y chromium)`);

describe.runIf(!browserAvailable && browserRequired)('web console (BERTH_REQUIRE_BROWSER=1)', () => {
  it('needs a chromium', () => {
    throw new Error(`BERTH_REQUIRE_BROWSER=1 but there is no chromium at ${chromiumPath}`);
  });
});

describe.runIf(browserAvailable)('web console in headless Chromium', () => {
  let server: BerthServer;
  let browser: Browser;
  let page: Page;
  let executionId: string;
  const shot = (name: string) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
  const terminalText = () => page.locator('.terminal .xterm-rows').innerText();

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    server = await startServer();
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('refuses a wrong token with a clear message and keeps the sign-in form', async () => {
    await page.goto(`${server.url}/ui`);
    await page.fill('input[name=token]', 'not-a-token-of-this-server-0000');
    await page.click('form.signin button[type=submit]');
    await expect.poll(() => page.locator('[role=alert]').innerText()).toContain('That token is not known to this server');
    expect(await page.locator('table[data-view=environments]').count()).toBe(0);
    await shot('sign-in-refused');
  });

  it('signs in, creates an environment and runs a command whose output arrives live in the terminal', async () => {
    await signInAt(page, server.url, tokens.alice);
    await page.fill('form[data-form=create-environment] input[name=name]', 'console-e2e');
    await page.click('form[data-form=create-environment] button[type=submit]');
    // The list is not reloaded by the form: the feed's environment.created event brings the row.
    await page.waitForSelector('tr[data-environment=console-e2e]');
    await shot('environments');

    await page.selectOption('form[data-form=run-command] select[name=environment]', { label: 'console-e2e' });
    await page.fill('form[data-form=run-command] input[name=command]', 'for i in 1 2 3 4 5 6; do echo tick-$i; sleep 0.4; done');
    await page.click('form[data-form=run-command] button[type=submit]');
    await page.waitForURL(/#\/executions\/hexe_/);
    executionId = decodeURIComponent(page.url().split('/').pop()!);
    // Live: the first line is on screen while the command still runs (it takes over two seconds).
    const firstLine = await waitFor(async () => ({ text: await terminalText(), status: await page.locator('[data-status]').getAttribute('data-status') }), {
      what: 'tick-1 in the terminal',
      until: (seen) => seen.text.includes('tick-1'),
    });
    // (The record may still say accepted: the server's status events follow its lifecycle poll, not the bytes.)
    expect(firstLine.status).not.toBe('exited');
    expect(firstLine.text).not.toContain('tick-6');
    await page.waitForSelector('[data-status=exited]', { timeout: 20_000 });
    expect(await terminalText()).toMatch(/tick-1[\s\S]*tick-6/);
    await shot('execution-output');
  });

  it("opens the execution's timeline, and scrubbing to its second event highlights that state on the statechart", async () => {
    await page.click('dl.record a:text("execution")');
    const stream = `execution-${executionId}`;
    await page.waitForSelector(`[data-timeline="${stream}"][data-timeline-ready=yes]`);
    await page.waitForSelector('svg.statechart[data-kind=execution]');
    // What `berth replay` says of revision 1, from the API: the page must draw the same.
    const replay = await server.json<{ event: { type: string }; stateBefore: string; stateAfter: string }[]>(`/v1/streams/${stream}?at=1`);
    const second = replay[1];
    await page.locator('input[name=scrubber]').evaluate((input: HTMLInputElement) => {
      input.value = '1';
      input.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await page.waitForSelector('[data-step="1"]');
    expect(await page.locator('svg.statechart .state.current').getAttribute('data-state')).toBe(second.stateAfter);
    expect(await page.locator('svg.statechart .state.previous').getAttribute('data-state')).toBe(second.stateBefore);
    expect(await page.locator('svg.statechart .edge.taken').getAttribute('data-edge')).toBe(`${second.stateBefore}->${second.stateAfter}`);
    expect(await page.locator('li.selected').innerText()).toContain(second.event.type);
    await shot('timeline');

    await page.check('input[name=failures]');
    await page.waitForSelector('ol.events li.empty:text("No failures")');
    await page.uncheck('input[name=failures]');

    // execution → allocation → environment, by the links the timeline finds in its events.
    await page.click('p.related a:text-matches("^allocation ")');
    await page.waitForSelector('[data-timeline^="allocation-"][data-timeline-ready=yes]');
    await page.waitForSelector('svg.statechart[data-kind=allocation]');
    await page.click('p.related a:text-matches("^environment ")');
    await page.waitForSelector('[data-timeline^="environment-"][data-timeline-ready=yes]');
    await shot('timeline-environment');
  });

  it('updates the executions list and a running timeline from the feed, without a reload', async () => {
    await page.goto(`${server.url}/ui#/executions`);
    await page.waitForSelector(`tr[data-execution="${executionId}"]`);
    const env = (await server.json<{ id: string; name: string }[]>('/v1/environments')).find((e) => e.name === 'console-e2e')!;
    const second = await submit(server, env.id, 'sleep 1; echo later');
    await page.waitForSelector(`tr[data-execution="${second.id}"]`);
    await page.selectOption('select[name=status]', 'exited');
    await page.waitForSelector(`tr[data-execution="${second.id}"] td.state:text("exited")`, { timeout: 20_000 });
    await shot('executions');

    // A timeline opened while its command sleeps gets the rest of the story from the feed.
    const third = await submit(server, env.id, 'sleep 3');
    await page.goto(`${server.url}/ui#/timeline/execution-${third.id}`);
    await page.waitForSelector('[data-timeline-ready=yes]');
    expect(await page.locator('ol.events li:has-text("execution.exited")').count()).toBe(0);
    await page.waitForSelector('ol.events li:has-text("execution.released")', { timeout: 20_000 });
  });

  it('draws the other lists of the scope', async () => {
    for (const view of ['allocations', 'builds', 'workspaces', 'leases']) {
      await page.goto(`${server.url}/ui#/${view}`);
      await page.waitForSelector(`table[data-view=${view}]`);
      await shot(view);
    }
    expect(await page.locator('table[data-view=leases] td.empty').innerText()).toContain('No leases');
  });

  it("shows an admin the runtimes (this one serving, marked) and the pools; a member gets the admin-only line", async () => {
    const admin = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await signInAt(admin, server.url, tokens.admin);
      await admin.goto(`${server.url}/ui#/runtimes`);
      const self = admin.locator('table[data-view=runtimes] tr[data-self=yes]');
      await self.waitFor();
      expect(await self.count()).toBe(1);
      expect(await self.locator('td.state').innerText()).toBe('serving');
      expect(await self.innerText()).toContain('(this one)');
      const [own] = (await server.json<{ runtimeId: string; self: boolean }[]>('/v1/runtimes', { token: tokens.admin })).filter((r) => r.self);
      expect(await self.getAttribute('data-runtime')).toBe(own.runtimeId);
      await admin.screenshot({ path: join(artifacts, 'runtimes.png'), fullPage: true });
      await admin.goto(`${server.url}/ui#/pools`);
      await admin.waitForSelector('table[data-view=pools] td.empty:text("No pools configured")');
      await admin.screenshot({ path: join(artifacts, 'pools.png'), fullPage: true });
    } finally {
      await admin.close();
    }
    for (const view of ['runtimes', 'pools']) {
      await page.goto(`${server.url}/ui#/${view}`);
      await expect.poll(() => page.locator('[role=alert]').innerText()).toContain('This view needs an admin token');
      expect(await page.locator('[role=alert]').innerText()).toContain('(forbidden)');
      expect(await page.locator(`table[data-view=${view}]`).count()).toBe(0);
    }
    await shot('admin-only');
  });

  it("keeps another scope's actors out of reach", async () => {
    const bobEnv = await createEnvironment(server, tokens.bob);
    const bobRun = await submit(server, bobEnv, 'echo bob-secret', {}, tokens.bob);
    await page.goto(`${server.url}/ui#/timeline/execution-${bobRun.id}`);
    await expect.poll(() => page.locator('[role=alert]').innerText()).toContain('not_found');
    expect(await page.locator('ol.events li').count()).toBe(0);
    await page.goto(`${server.url}/ui#/executions/${bobRun.id}`);
    await expect.poll(() => page.locator('[role=alert]').innerText()).toContain('not_found');
    expect(await page.locator('.terminal').innerText()).not.toContain('bob-secret');
    await page.goto(`${server.url}/ui#/environments`);
    await page.waitForSelector('tr[data-environment=console-e2e]');
    expect(await page.locator('main').innerText()).not.toContain(bobEnv);
    await shot('other-scope-refused');
  });

  it('keeps only the failing steps under the failures filter: a command that exits 3', async () => {
    const env = (await server.json<{ id: string; name: string }[]>('/v1/environments')).find((e) => e.name === 'console-e2e')!;
    const failing = await submit(server, env.id, 'exit 3');
    await page.goto(`${server.url}/ui#/timeline/execution-${failing.id}`);
    await page.waitForSelector('ol.events li:has-text("execution.released")', { timeout: 20_000 });
    await page.check('input[name=failures]');
    await page.waitForSelector('ol.events li:has-text("execution.exited")');
    expect(await page.locator('ol.events li').count()).toBe(1);
    await shot('timeline-failures');
  });

  it('runs a command in a terminal and draws its pty output, escapes interpreted', async () => {
    await page.goto(`${server.url}/ui#/environments`);
    await page.waitForSelector('tr[data-environment=console-e2e]');
    await page.selectOption('form[data-form=run-command] select[name=environment]', { label: 'console-e2e' });
    await page.fill('form[data-form=run-command] input[name=command]', "test -t 1 && printf 'on a tty: \\033[1mbold\\033[0m\\n'");
    await page.check('form[data-form=run-command] input[name=pty]');
    await page.click('form[data-form=run-command] button[type=submit]');
    await page.waitForSelector('[data-status=exited]', { timeout: 20_000 });
    await expect.poll(terminalText).toContain('on a tty: bold');
    expect(await terminalText()).not.toContain('[1m');
    await shot('execution-pty');
  });

  it('resumes the output from its cursors after the server restarts under it: every line once', async () => {
    const env = (await server.json<{ id: string; name: string }[]>('/v1/environments')).find((e) => e.name === 'console-e2e')!;
    const run = await submit(server, env.id, 'for i in $(seq 1 12); do echo line-$i; sleep 0.3; done');
    await page.goto(`${server.url}/ui#/executions/${run.id}`);
    await waitFor(terminalText, { what: 'line-2 in the terminal', until: (text) => text.includes('line-2') });
    await server.restart('SIGTERM');
    await page.waitForSelector('[data-status=exited]', { timeout: 30_000 });
    const lines = (await terminalText()).split('\n').map((l) => l.trim()).filter(Boolean);
    expect(lines).toEqual(Array.from({ length: 12 }, (_, i) => `line-${i + 1}`));
    await shot('execution-resumed');
  });
});
