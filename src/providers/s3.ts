import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Config } from '../platform/config.ts';
import type { ProviderConnection } from './connections.ts';
import { loadOnce } from '../platform/load-once.ts';
import { AWS_DEADLINES, awsRequestHandler, type AwsDeadlines } from './aws-http.ts';

/** Where received messages are read from: the customer's bucket, behind this one small interface. */
export type ObjectStore = {
  /** The object's length and its body as a stream; nothing is read until the stream is. */
  open(bucket: string, key: string, signal?: AbortSignal): Promise<{ length: number | undefined; body: Readable }>;
};

const clients = new Map<string, { version: string; client: S3Client }>();

/**
 * One S3 client per connection, with its keys, in its SES region (SES writes only to a bucket of
 * its own region). `AWS_ENDPOINT_URL_S3` sends the calls elsewhere, path-style, as local S3
 * servers expect.
 */
/** Loaded on first use: most processes never read a bucket, and the client is large. */
const sdk = loadOnce(() => import('@aws-sdk/client-s3'));

async function s3ClientFor(config: Config, conn: ProviderConnection, deadlines: AwsDeadlines): Promise<S3Client> {
  const version = `${conn.updatedAt.getTime()}:${conn.region}:${conn.accessKeyId}:${Object.values(deadlines).join(':')}`;
  const cached = clients.get(conn.projectId);
  if (cached?.version === version) return cached.client;
  cached?.client.destroy();
  const { S3Client } = await sdk();
  const client = new S3Client({
    region: conn.region,
    credentials: { accessKeyId: conn.accessKeyId, secretAccessKey: conn.secretAccessKey },
    ...(config.awsEndpointS3 ? { endpoint: config.awsEndpointS3, forcePathStyle: true } : {}),
    maxAttempts: 2,
    requestHandler: awsRequestHandler(deadlines),
  });
  clients.set(conn.projectId, { version, client });
  return client;
}

/**
 * Reads with the connection's keys. `signal` ends the read at any point, the body's too (a
 * shutdown must not wait for a stalled object). `deadlines` is for tests that cannot wait
 * the real ones out.
 */
export function s3ObjectStore(config: Config, conn: ProviderConnection, deadlines: AwsDeadlines = AWS_DEADLINES.s3): ObjectStore {
  return {
    async open(bucket, key, signal) {
      const { GetObjectCommand } = await sdk();
      const client = await s3ClientFor(config, conn, deadlines);
      // The headers' deadline holds across the SDK's attempts, not per attempt.
      const headers = new AbortController();
      const timer = setTimeout(() => headers.abort(), deadlines.headersMs);
      let res;
      try {
        res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }), { abortSignal: signal ? AbortSignal.any([signal, headers.signal]) : headers.signal });
      } catch (err) {
        if (headers.signal.aborted && !signal?.aborted) throw Object.assign(new Error(`s3://${bucket}/${key} did not answer within ${deadlines.headersMs} ms`), { name: 'TimeoutError' });
        throw err;
      } finally {
        clearTimeout(timer);
      }
      if (!res.Body) throw new Error(`s3://${bucket}/${key} has no body`);
      const body = res.Body as Readable;
      if (signal) {
        const onAbort = () => body.destroy(new Error(`reading s3://${bucket}/${key} was stopped`));
        if (signal.aborted) onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        body.once('close', () => signal.removeEventListener('abort', onAbort));
      }
      return { length: res.ContentLength, body };
    },
  };
}
