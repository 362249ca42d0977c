import { after } from 'node:test';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium, driven headless by playwright-core. `.ci/run` installs it. */
export const CHROMIUM = '/usr/bin/chromium';

/** The `skip` option of a browser test: false, or why it cannot run here (and a line saying so). */
export function browserSkip(what: string): string | false {
  const reason = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (apt-get install chromium)`;
  if (reason) console.log(`# skipping ${what}: ${reason}`);
  return reason;
}

/** Serves `app` on a free loopback port until the test file ends; answers its origin. */
export async function serveApp(app: { fetch: (request: Request) => Response | Promise<Response> }): Promise<string> {
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  after(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    // The live inbox holds an event stream open; without this, close would wait for it.
    (server as unknown as { closeAllConnections(): void }).closeAllConnections();
  }));
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Headless Chromium with the flags a closed network needs, closed when the test file ends. */
export async function launchBrowser(): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  after(() => browser.close());
  return browser;
}

/**
 * Collects into `errors` what a page reports as broken: console errors, uncaught exceptions and,
 * unless the test provokes them on purpose, answers of 400 and above.
 */
export function watchPage(page: Page, errors: string[], opts: { httpErrors?: boolean; timeoutMs?: number } = {}): Page {
  page.setDefaultTimeout(opts.timeoutMs ?? 10_000);
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
  page.on('pageerror', (err) => errors.push(err.message));
  if (opts.httpErrors !== false) page.on('response', (res) => { if (res.status() >= 400) errors.push(`${res.status()} ${res.url()}`); });
  return page;
}

/** Signs up the owner in development, where no setup link is needed, and lands on the dashboard. */
export async function signUpOwner(page: Page, origin: string): Promise<void> {
  await page.goto(`${origin}/dashboard/signup`);
  await page.fill('input[name=email]', 'owner@example.com');
  await page.fill('input[name=password]', 'correct horse battery');
  await page.click('button[type=submit]');
  await page.waitForURL(`${origin}/dashboard`);
}
