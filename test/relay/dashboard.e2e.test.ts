import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodemailer from 'nodemailer';
import { emailIdOf, startTestRelay } from './setup.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { settled } from '../sending/fixtures.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';

const skip = browserSkip('the relay dashboard browser test');

test('a real browser: the project page gives the relay\'s host, ports, TLS and username; a relayed email shows its subject; no console errors', { skip, timeout: 90_000 }, async () => {
  const ctx = await startTestRelay({ smtps: true, env: { NODE_ENV: 'development' } });
  const origin = await serveApp(ctx.app);

  const browser = await launchBrowser();
  const page = await browser.newPage();
  const consoleErrors: string[] = [];
  watchPage(page, consoleErrors);

  await signUpOwner(page, origin);
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
  // The worker reads the text as it sends the email.
  const worker = await startTestWorker(ctx.config, ctx.sql);
  try {
    const projectId = projectPath.split('/').at(-1)!;
    assert.equal((await settled(ctx.sql, projectId, id)).status, 'sent');
  } finally {
    await worker.stop();
  }
  await page.goto(`${origin}${projectPath}/emails`);
  await page.click('text=Reset your password');
  await page.waitForURL(new RegExp(`/emails/${id}$`));
  assert.ok(await page.locator('text=Click.').count() > 0, 'the text mailparser read is shown');
  assert.deepEqual(consoleErrors, []);
});
