import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSnsFetch } from '../../src/events/sns-fetch.ts';

// The real fetcher HTTPS push uses (the push tests inject their own), against a local server.
test('the SNS fetcher reads a certificate once, refuses a redirect or an error, and bounds the size', async () => {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url!);
    if (req.url === '/cert.pem') return res.end('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    if (req.url === '/moved') return res.writeHead(302, { location: '/cert.pem' }).end();
    if (req.url === '/huge') return res.end('x'.repeat(65 * 1024));
    res.writeHead(500).end('no');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const fetcher = createSnsFetch();
    const [a, b] = await Promise.all([fetcher.cert(`${base}/cert.pem`), fetcher.cert(`${base}/cert.pem`)]);
    assert.match(a, /BEGIN CERTIFICATE/);
    assert.equal(a, b);
    assert.equal(await fetcher.cert(`${base}/cert.pem`), a);
    assert.deepEqual(hits, ['/cert.pem'], 'one fetch for concurrent and later reads of one URL');
    await assert.rejects(fetcher.confirm(`${base}/moved`), /SNS answered 302/);
    await assert.rejects(fetcher.confirm(`${base}/fails`), /SNS answered 500/);
    await assert.rejects(fetcher.cert(`${base}/huge`), /more than 65536 bytes/);
    assert.ok(!hits.includes('/cert.pem') || hits.filter((h) => h === '/cert.pem').length === 1, 'the redirect was not followed');
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
