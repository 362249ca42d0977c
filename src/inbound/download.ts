import { Readable } from 'node:stream';
import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import { getProviderConnection } from '../providers/connections.ts';
import { s3ObjectStore } from '../providers/s3.ts';
import { verifyDownload } from './links.ts';
import { getReceived, getReceivedRaw, type ReceivedRow } from './queries.ts';
import { rawAvailable, withheld } from './schemas.ts';
import { extractAttachment, isMimeRefusal } from '../platform/mime-pool.ts';

/**
 * The message's bytes: from PostgreSQL for an inline delivery, else from the customer's bucket
 * (the object SES wrote, which Mailroom never deletes), streamed either way.
 */
export async function openRaw(deps: { sql: Sql; config: Config }, row: ReceivedRow): Promise<Readable | undefined> {
  if (row.hasRaw) {
    const raw = await getReceivedRaw(deps.sql, row.projectId, row.id);
    return raw ? Readable.from([raw]) : undefined;
  }
  if (!row.s3Bucket || !row.s3Key) return undefined;
  const conn = await getProviderConnection(deps.sql, deps.config, row.projectId);
  if (!conn) return undefined;
  return (await s3ObjectStore(deps.config, conn).open(row.s3Bucket, row.s3Key)).body;
}

const notFound = () => new Response('Not found\n', { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' } });

/** The declared type when it is a plain `type/subtype`; anything else is served as bytes. */
const safeType = (type: string) => (/^[a-z0-9][\w.+-]*\/[\w.+-]+$/i.test(type) ? type : 'application/octet-stream');

/** `attachment; filename*=…`: always a download, never rendered under Mailroom's origin. */
function disposition(filename: string | null) {
  const name = (filename ?? 'attachment').replace(/[\r\n"\\]/g, '_');
  const ascii = name.replace(/[^\x20-\x7e]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * The download links of received emails (§20.3). Outside /v1: the signed link is the credential,
 * so they take no key. What they serve is the sender's, untrusted: it is always a download, with
 * a sandbox CSP and no sniffing.
 */
export function registerDownloadRoutes(app: Hono<AppEnv>) {
  app.get('/inbound/files/:token', async (c) => {
    const { config, sql } = c.var.deps;
    const target = verifyDownload(config.secretKey, c.req.param('token'));
    if (!target) return notFound();
    const row = await getReceived(sql, target.projectId, target.receivedId);
    if (!row || withheld(row) || !rawAvailable(row)) return notFound();
    const attachment = target.part === 'raw' ? undefined : row.attachments.find((a) => a.id === target.part);
    if (target.part !== 'raw' && !attachment) return notFound();
    const raw = await openRaw({ sql, config }, row);
    if (!raw) return notFound();
    // The attachment is found by parsing the message again, in the MIME pool (§22.1).
    const body = attachment ? await extractAttachment(raw, attachment.index).catch((err: unknown) => {
      if (isMimeRefusal(err)) return undefined;
      throw err;
    }) : raw;
    if (!body) return notFound();
    const headers: Record<string, string> = {
      'content-type': attachment ? safeType(attachment.content_type) : 'message/rfc822',
      'content-disposition': disposition(attachment ? attachment.filename : `${row.id}.eml`),
      'content-security-policy': "sandbox; default-src 'none'",
      'x-content-type-options': 'nosniff',
      'cache-control': 'private, no-store',
    };
    if (attachment) headers['content-length'] = String(attachment.size);
    else if (row.rawSize !== null) headers['content-length'] = String(row.rawSize);
    return new Response(Readable.toWeb(body) as ReadableStream, { status: 200, headers });
  });
}
