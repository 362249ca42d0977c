import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Config } from '../platform/config.ts';
import type { ProviderConnection } from './connections.ts';
import { loadOnce } from '../platform/load-once.ts';

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

async function s3ClientFor(config: Config, conn: ProviderConnection): Promise<S3Client> {
  const version = `${conn.updatedAt.getTime()}:${conn.region}:${conn.accessKeyId}`;
  const cached = clients.get(conn.projectId);
  if (cached?.version === version) return cached.client;
  cached?.client.destroy();
  const { S3Client } = await sdk();
  const client = new S3Client({
    region: conn.region,
    credentials: { accessKeyId: conn.accessKeyId, secretAccessKey: conn.secretAccessKey },
    ...(config.awsEndpointS3 ? { endpoint: config.awsEndpointS3, forcePathStyle: true } : {}),
    maxAttempts: 2,
  });
  clients.set(conn.projectId, { version, client });
  return client;
}

export function s3ObjectStore(config: Config, conn: ProviderConnection): ObjectStore {
  return {
    async open(bucket, key, signal) {
      const { GetObjectCommand } = await sdk();
      const res = await (await s3ClientFor(config, conn)).send(new GetObjectCommand({ Bucket: bucket, Key: key }), { abortSignal: signal });
      if (!res.Body) throw new Error(`s3://${bucket}/${key} has no body`);
      return { length: res.ContentLength, body: res.Body as Readable };
    },
  };
}
