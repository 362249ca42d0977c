import { SESv2Client } from '@aws-sdk/client-sesv2';
import type { Config } from '../platform/config.ts';
import type { ProviderConnection } from './connections.ts';
import { AWS_DEADLINES, awsRequestHandler } from './aws-http.ts';

const clients = new Map<string, { version: string; client: SESv2Client }>();

/**
 * One SES v2 client per connection, reused across sends (it holds the HTTP keep-alive pool).
 * A changed connection (new keys or region) gets a fresh client. `region` reaches an identity
 * that lives outside the connection's region (identities are per-region) with the same keys;
 * each such region gets its own cached client.
 */
export function sesClientFor(config: Config, conn: ProviderConnection, region: string = conn.region): SESv2Client {
  const key = region === conn.region ? conn.projectId : `${conn.projectId}@${region}`;
  const version = `${conn.updatedAt.getTime()}:${conn.region}:${conn.accessKeyId}`;
  const cached = clients.get(key);
  if (cached?.version === version) return cached.client;
  cached?.client.destroy();
  const client = new SESv2Client({
    region,
    credentials: { accessKeyId: conn.accessKeyId, secretAccessKey: conn.secretAccessKey },
    ...(config.awsEndpointSesv2 ? { endpoint: config.awsEndpointSesv2 } : {}),
    maxAttempts: 1, // retries are the job queue's, with backoff an hour long, not the SDK's
    requestHandler: awsRequestHandler(AWS_DEADLINES.sesv2),
  });
  clients.set(key, { version, client });
  return client;
}
