import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { chromium } from 'playwright-core';
import nodemailer from 'nodemailer';
import { emailIdOf, startTestRelay } from './setup.ts';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (apt-get install chromium)`;
if (skip) console.log(`# skipping the relay dashboard browser test: ${skip}`);

test('a real browser: the project page gives the relay\'s host, ports, TLS and username; a relayed email shows its subject; no console errors', { skip, timeout: 90_000 }, async () => {
  const ctx = await startTestRelay({ smtps: true, env: { NODE_ENV: 'development' } });
  const server = serve({ fetch: ctx.app.fetch, port: 0, hostname: '127.0.0.1' });
  after(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    (server as unknown as { closeAllConnections(): void }).closeAllConnections();
  }));
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  after(() => browser.close());
  const page = await browser.newPage();
  page.setDefaultTimeout(10_000);
  const consoleErrors: string[] = [];
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => consoleErrors.push(err.message));
  page.on('response', (res) => { if (res.status() >= 400) consoleErrors.push(`${res.status()} ${res.url()}`); });

  await page.goto(`${origin}/dashboard/signup`);
  await page.fill('input[name=email]', 'owner@example.com');
  await page.fill('input[name=password]', 'correct horse battery');
  await page.click('button[type=submit]');
  await page.waitForURL(`${origin}/dashboard`);
  await page.fill('input[name=name]', 'Relay project');
  await page.click('button:has-text("Create project")');
  await page.waitForURL(/\/keys$/);
  const projectPath = new URL(page.url()).pathname.replace(/\/keys$/, '');
  await page.fill('input[name=name]', 'keycloak');
  await page.selectOption('select[name=permission]', 'sending');
  await page.click('button:has-text("Create key")');
  const key = (await page.textContent('#new-key'))!;

  await page.goto(`${origin}${projectPath}`);
  const rows = Object.fromEntries(await page.locator('#smtp-relay tr').evaluateAll((trs) =>
    trs.map((tr) => [tr.querySelector('th')!.textContent, tr.querySelector('td')!.textContent])));
  assert.deepEqual(rows, {
    Host: '127.0.0.1',
    Port: `${ctx.port} (STARTTLS)`,
    'Implicit TLS port': `${ctx.smtpsPort} (SMTPS)`,
    TLS: 'STARTTLS, or implicit TLS (SMTPS) on its own port; AUTH is also taken without TLS',
    Username: 'mailroom',
    Password: 'password: an API key (full or sending)',
  });

  // The settings as shown work: a sending key over STARTTLS.
  const transport = nodemailer.createTransport({
    host: rows.Host, port: ctx.port, requireTLS: true, tls: { ca: ctx.cert, servername: 'localhost' }, auth: { user: rows.Username!, pass: key },
  });
  const info = await transport.sendMail({ from: 'Keycloak <auth@example.com>', to: 'ann@example.net', subject: 'Reset your password', text: 'Click.' });
  transport.close();
  const id = emailIdOf(info.response)!;
  await page.goto(`${origin}${projectPath}/emails`);
  await page.click('text=Reset your password');
  await page.waitForURL(new RegExp(`/emails/${id}$`));
  assert.ok(await page.locator('text=Click.').count() > 0, 'the text mailparser read is shown');
  assert.deepEqual(consoleErrors, []);
});
