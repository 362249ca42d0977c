import { loadMailparser } from '../platform/mailparser.ts';

/**
 * `text` and `html` of an email submitted over SMTP. The relay stores the message as submitted
 * and reads only its header section, so accepting a message costs no MIME parse. The worker reads
 * the bodies (npm `mailparser`) once, as the email settles, and stores them in its columns; until
 * then they are read from the stored message when the email is shown, through the API, the
 * Resend-compatible API or the dashboard.
 */

/** Text as the API shows it: no NUL, no lone surrogates, as for the columns API mail fills. */
const shown = (s: string) => s.replaceAll('\0', '').toWellFormed();

/**
 * Bodies are kept as sent: no text made up from HTML, no cid: links rewritten. A message mailparser
 * cannot read shows no bodies; it is still sent as it was submitted.
 */
export async function submittedBodies(raw: Buffer): Promise<{ text: string | null; html: string | null }> {
  const { simpleParser } = await loadMailparser();
  try {
    const mail = await simpleParser(raw, {
      skipHtmlToText: true,
      skipTextToHtml: true,
      skipTextLinks: true,
      skipImageLinks: true,
      keepCidLinks: true,
      checksumAlgo: false,
    });
    return {
      html: typeof mail.html === 'string' ? shown(mail.html) : null,
      text: mail.text ? shown(mail.text) : null,
    };
  } catch {
    return { text: null, html: null };
  }
}

/**
 * A row read with `submitted_raw` (the stored message of an SMTP email whose bodies columns are
 * empty, else null), with its `text` and `html` read from that message.
 */
export async function withSubmittedBodies<T extends { text: string | null; html: string | null; submittedRaw?: Buffer | null }>(row: T): Promise<Omit<T, 'submittedRaw'>> {
  const { submittedRaw, ...rest } = row;
  if (!submittedRaw) return rest;
  return { ...rest, ...(await submittedBodies(submittedRaw)) };
}
