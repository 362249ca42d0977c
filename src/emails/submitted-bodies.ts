import { isMimeRefusal, readBodies } from '../platform/mime-pool.ts';
import type { Logger } from '../platform/log.ts';

/**
 * `text` and `html` of an email submitted over SMTP, read once by the worker as the email is sent
 * (or fails), in the MIME pool (§22.1), and kept in its columns: the relay's acceptance reads only
 * the header section, and no read (`GET /v1/emails/{id}`, `/resend/emails`, the dashboard) parses
 * the message. Until then the email shows no bodies. Bodies are kept as sent: no text made up
 * from HTML, no cid: links rewritten. A message the parser cannot read, or that is over a parse
 * budget, shows no bodies; it is still sent as it was submitted.
 */
export async function submittedBodies(raw: Buffer, log: Logger): Promise<{ text: string | null; html: string | null }> {
  try {
    return await readBodies(raw);
  } catch (err) {
    if (!isMimeRefusal(err)) throw err;
    log.warn({ err: err.message, bytes: raw.length }, 'relayed message\'s bodies not read; it is sent as submitted, shown without them');
    return { text: null, html: null };
  }
}
