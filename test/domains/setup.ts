import { createTestContext } from '../helpers/app.ts';
import { startFakeSesIdentities } from '../helpers/fake-ses-identities.ts';
import { connectProvider } from '../../src/providers/connections.ts';

/** A test database and app pointed at a fake SES, plus a way to make connected projects. */
export async function domainsContext() {
  const ses = await startFakeSesIdentities();
  const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: ses.url, SINK_SMTP_PORT: '0' } });
  return {
    ses,
    ctx,
    /** A project with a key and (unless told otherwise) an SES connection in us-east-1. */
    async project(opts: { connected?: boolean; name?: string } = {}) {
      const t = await ctx.tenant(opts.name);
      if (opts.connected !== false) {
        await connectProvider(ctx.sql, ctx.config, { projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'fake-secret' });
      }
      return t;
    },
  };
}
