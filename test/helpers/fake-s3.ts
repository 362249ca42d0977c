import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after } from 'node:test';

/**
 * A small S3 answering path-style `GET /<bucket>/<key>` (GetObject) as @aws-sdk/client-s3 v3
 * sends it with `forcePathStyle`: the bytes with Content-Length, or S3's XML NoSuchKey /
 * NoSuchBucket / AccessDenied. Objects are Buffers, or a generator of chunks for objects too
 * large to hold (the 40 MiB bench). Listens on 127.0.0.1, port 0; closed after the file.
 */
type StoredObject = { length: number; chunks: () => Iterable<Buffer> };

export type FakeS3 = Awaited<ReturnType<typeof startFakeS3>>;

function xmlError(res: ServerResponse, status: number, code: string, message: string) {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>fake</RequestId></Error>`);
}

export async function startFakeS3(opts: { closeAfterFile?: boolean } = {}) {
  const buckets = new Map<string, Map<string, StoredObject>>();
  const gets: { bucket: string; key: string; at: number }[] = [];
  const denied = new Set<string>();
  /** Objects whose reads answer headers and then nothing (`s3://bucket/key`). */
  const stalled = new Set<string>();
  /** Objects whose reads answer nothing at all. */
  const stalledHeaders = new Set<string>();

  /** Object bodies being written now, and the most there ever were at once. */
  const reading = { now: 0, peak: 0 };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://s3.local');
    const [, bucket = '', ...rest] = url.pathname.split('/');
    const key = rest.map(decodeURIComponent).join('/');
    if (req.method !== 'GET' && req.method !== 'HEAD') return xmlError(res, 405, 'MethodNotAllowed', 'Only GetObject is faked.');
    if (!req.headers.authorization?.startsWith('AWS4-HMAC-SHA256 ')) return xmlError(res, 403, 'AccessDenied', 'Unsigned request.');
    if (denied.has(bucket)) return xmlError(res, 403, 'AccessDenied', 'Access Denied');
    const objects = buckets.get(bucket);
    if (!objects) return xmlError(res, 404, 'NoSuchBucket', 'The specified bucket does not exist');
    const object = objects.get(key);
    if (!object) return xmlError(res, 404, 'NoSuchKey', 'The specified key does not exist.');
    gets.push({ bucket, key, at: Date.now() });
    if (stalledHeaders.has(`${bucket}/${key}`)) {
      res.on('error', () => {});
      return; // not even the headers
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(object.length), etag: '"fake"' });
    if (req.method === 'HEAD') return res.end();
    if (stalled.has(`${bucket}/${key}`)) {
      // Headers, then silence: the body never comes, and the connection stays open.
      res.flushHeaders();
      res.on('error', () => {});
      return;
    }
    reading.now++;
    reading.peak = Math.max(reading.peak, reading.now);
    res.once('close', () => { reading.now--; });
    const it = object.chunks()[Symbol.iterator]();
    // Written with backpressure, so a large object is never held whole here either.
    const pump = () => {
      for (;;) {
        const next = it.next();
        if (next.done) return res.end();
        if (!res.write(next.value)) return res.once('drain', pump);
      }
    };
    res.on('error', () => {});
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const api = {
    endpoint,
    gets,
    reading,
    put(bucket: string, key: string, body: Buffer) {
      if (!buckets.has(bucket)) buckets.set(bucket, new Map());
      buckets.get(bucket)!.set(key, { length: body.length, chunks: () => [body] });
    },
    /** An object made of chunks as it is read, `length` bytes in all. */
    putGenerated(bucket: string, key: string, length: number, chunks: () => Iterable<Buffer>) {
      if (!buckets.has(bucket)) buckets.set(bucket, new Map());
      buckets.get(bucket)!.set(key, { length, chunks });
    },
    deny(bucket: string) { denied.add(bucket); },
    /** Reads of the object from now on send their headers and then nothing (or not even those), until `unstall`. */
    stall(bucket: string, key: string, before: 'body' | 'headers' = 'body') { (before === 'headers' ? stalledHeaders : stalled).add(`${bucket}/${key}`); },
    unstall(bucket: string, key: string) { stalled.delete(`${bucket}/${key}`); stalledHeaders.delete(`${bucket}/${key}`); },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  // A benchmark process (not a test file) closes it itself.
  if (opts.closeAfterFile !== false) after(() => api.close());
  return api;
}
