import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { after } from 'node:test';
import sesLocal from 'aws-ses-v2-local';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { eventsOf, settled } from './fixtures.ts';

type StoredEmail = {
  messageId: string;
  from: string;
  destination: { to: string[]; cc: string[]; bcc: string[] };
  subject: string;
  body: { html?: string; text?: string };
  attachments: { filename?: string; contentType: string; content: string; size: number }[];
};

// The emulator is CommonJS with an ES-style default export.
const startEmulator = ((sesLocal as unknown as { default?: unknown }).default ?? sesLocal) as (c: { host: string; port: number }) => Promise<Server>;
const emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
after(() => new Promise<void>((resolve) => { emulator.closeAllConnections(); emulator.close(() => resolve()); }));
const emulatorUrl = `http://127.0.0.1:${(emulator.address() as AddressInfo).port}`;

const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: emulatorUrl, SINK_SMTP_PORT: '0' } });
const { projectId, key } = await ctx.tenant('ses-local');
await connectProvider(ctx.sql, ctx.config, { projectId, region: 'us-east-1', accessKeyId: 'AKIDLOCAL', secretAccessKey: 'local-secret' });
await startTestWorker(ctx.config, ctx.sql);

test('POST /v1/emails → worker → SES v2 (aws-ses-v2-local): subject, bodies and attachments arrive', async () => {
  const pdf = Buffer.from('%PDF-1.4 pretend invoice\n');
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    body: {
      from: 'Billing <billing@example.com>',
      to: ['ann@example.net'],
      cc: 'cc@example.net',
      subject: 'Your invoice ✓',
      html: '<h1>Invoice</h1><p>Thanks!</p>',
      text: 'Invoice. Thanks!',
      headers: { 'X-Campaign': 'spring' },
      attachments: [
        { filename: 'invoice.pdf', content: pdf.toString('base64'), content_type: 'application/pdf' },
        { filename: 'notes.bin', content: Buffer.from('plain notes').toString('base64') },
      ],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = (await res.json()) as { id: string };

  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent', state.lastError ?? '');
  assert.ok(state.providerMessageId && state.sentAt);

  const store = (await (await fetch(`${emulatorUrl}/store`)).json()) as { emails: StoredEmail[] };
  const stored = store.emails.find((e) => e.messageId === state.providerMessageId);
  assert.ok(stored, 'the emulator holds the message under the id the email records');
  assert.equal(stored.subject, 'Your invoice ✓');
  assert.equal(stored.from, '"Billing" <billing@example.com>');
  assert.deepEqual(stored.destination.to, ['ann@example.net']);
  assert.equal(stored.body.html, '<h1>Invoice</h1><p>Thanks!</p>');
  assert.equal(stored.body.text?.trim(), 'Invoice. Thanks!');
  assert.deepEqual(
    stored.attachments.map((a) => [a.filename, a.contentType, Buffer.from(a.content, 'base64').toString()]),
    [['invoice.pdf', 'application/pdf', pdf.toString()], ['notes.bin', 'application/octet-stream', 'plain notes']],
  );

  const events = await eventsOf(ctx.sql, projectId, id);
  assert.deepEqual(events.map((e) => e.type), ['email.sent']);
  const read = (await (await ctx.call(key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.equal(read.status, 'sent');
  assert.equal(read.provider_message_id, state.providerMessageId);
  assert.equal(read.delivered_at, null);
  assert.equal(read.last_error, null);
});
