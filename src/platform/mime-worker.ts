import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { MessagePort } from 'node:worker_threads';
import EmailReplyParser from 'email-reply-parser';
import libmime from 'libmime';
import { MailParser, simpleParser, type AttachmentStream, type MessageText } from 'mailparser';
import { autoReply, bounce, declaredType, headerObject, mailboxes, messageIds, subjectOf, type AddressField, type HeaderMap } from './mime-fields.ts';

/**
 * The MIME thread's side of mime-pool.ts: every parse and decode of mail someone else wrote runs
 * here, in a pool thread with a deadline and a heap cap, never on an event loop. This module and
 * its entry (src/mime-thread.ts) are the only code that imports mailparser, libmime or the reply
 * parser (test/platform/mime-door.test.ts holds that).
 *
 * A task's budget counts from when the thread starts on it. A message handed over whole says so
 * with a stamp in shared memory. A streamed one carries a MessagePort: the thread says `start` on
 * it, pulls the message through it chunk by chunk (`pull` → `chunk` | `end` | `error`), and sends
 * an attachment's bytes back through it (`out`, `outEnd`), pausing while the reader is behind
 * (`pause`, `resume`).
 */

export type ParsedSinkMessage = {
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  subject: string;
  text: string | null;
  html: string | null;
  headers: Record<string, string>;
  attachments: { filename: string | null; content_type: string; size_bytes: number }[];
};

/** A received message as the thread reads it; the event loop adds attachment ids and the stripped reply. */
export type ReceivedReading = {
  from: string;
  to: string[];
  cc: string[];
  replyTo: string[];
  subject: string;
  messageId: string | null;
  inReplyTo: string | null;
  references: string[];
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  attachments: { index: number; filename: string | null; size: number; content_type: string; content_id: string | null; content_disposition: string | null }[];
  isAutoReply: boolean;
  isBounce: boolean;
  /** The reply stripped here when the text is short (its cost bounded); else undefined, stripped as a task of its own. */
  strippedText?: string | null;
};

/**
 * A task whose input travels whole with it: the thread stamps when it starts into `started`
 * (microseconds since the epoch), not on a port.
 */
export type WholeTask =
  | { op: 'sink'; started: BigInt64Array; raw: Uint8Array; envelope: { from: string; recipients: string[] } }
  | { op: 'bodies'; started: BigInt64Array; raw: Uint8Array }
  | { op: 'stripReply'; started: BigInt64Array; text: string }
  | { op: 'decodeWords'; started: BigInt64Array; value: string };
/** A task that streams through its own port. */
export type StreamTask =
  | { op: 'received'; port: MessagePort }
  | { op: 'attachment'; port: MessagePort; index: number };
export type MimeTask = WholeTask | StreamTask;

export type PortMessage =
  | { t: 'start' }
  | { t: 'pull' }
  | { t: 'chunk'; data: ArrayBuffer }
  | { t: 'end' }
  | { t: 'error'; message: string }
  | { t: 'out'; data: ArrayBuffer }
  | { t: 'outEnd' }
  | { t: 'pause' }
  | { t: 'resume' };

/** Header fields kept in `headers`: a message with more is cut there (the budget a loop over it carries). */
const MAX_HEADER_LINES = 1000;
/** The bodies kept; past these a body is cut, so one message's text cannot take the thread's memory. */
const MAX_BODY_CHARS = 8 * 1024 * 1024;

/** Texts up to this long are stripped with the parse: the reply parser's worst case on them is well inside the budget. */
const STRIP_INLINE_CHARS = 64 * 1024;

/** Bodies are kept as sent: no text made up from HTML, no cid: links rewritten. */
const AS_SENT = { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, keepCidLinks: true, checksumAlgo: false } as const;

/** Text as the API shows it: no NUL, no lone surrogates, as for the columns API mail fills. */
const shown = (s: string) => s.replaceAll('\0', '').toWellFormed();

/** The message the event loop streams through the port, pulled a chunk at a time. */
function pulled(port: MessagePort): Readable {
  const source = new Readable({
    read() { port.postMessage({ t: 'pull' } satisfies PortMessage); },
  });
  port.on('message', (m: PortMessage) => {
    if (m.t === 'chunk') source.push(Buffer.from(m.data));
    else if (m.t === 'end') source.push(null);
    else if (m.t === 'error') source.destroy(new Error(m.message));
  });
  return source;
}

/** A copy in a buffer of its own, so it can be transferred (mailparser's chunks may share one). */
const own = (chunk: Buffer): ArrayBuffer => {
  const copy = new Uint8Array(chunk.length);
  copy.set(chunk);
  return copy.buffer;
};

async function sinkMessage(raw: Uint8Array, envelope: { from: string; recipients: string[] }): Promise<ParsedSinkMessage> {
  const mail = await simpleParser(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), AS_SENT);
  const to = mailboxes(mail.to as AddressField | AddressField[] | undefined);
  const cc = mailboxes(mail.cc as AddressField | AddressField[] | undefined);
  return {
    fromAddress: mailboxes(mail.from as AddressField | undefined).join(', ') || envelope.from,
    // A message with neither To nor Cc (all Bcc, or a bare SMTP client) still shows who got it.
    toAddresses: to.length || cc.length ? to : envelope.recipients,
    ccAddresses: cc,
    subject: mail.subject ?? '',
    // With no plain text part mailparser reports '' (skipHtmlToText); that is no text at all.
    text: mail.text || null,
    html: typeof mail.html === 'string' ? mail.html : null,
    headers: headerObject(mail.headerLines),
    attachments: mail.attachments.map((a) => ({
      filename: a.filename ?? null,
      // mailparser guesses a type from the file name; report the one the message declares.
      content_type: declaredType(a.headers.get('content-type')) ?? a.contentType,
      size_bytes: a.size,
    })),
  };
}

/**
 * Parses a received message as it streams in. Attachments are counted and dropped as they pass,
 * never held: a download parses the message again and keeps only the one asked for. So the
 * largest message costs its bodies' text, not its size.
 */
async function received(port: MessagePort): Promise<ReceivedReading> {
  const parser = new MailParser(AS_SENT as never);
  let headers: HeaderMap = new Map();
  let lines: { key: string; line: string }[] = [];
  let html: string | null = null;
  let text: string | null = null;
  const attachments: ReceivedReading['attachments'] = [];
  parser.on('headers', (h: HeaderMap) => { headers = h; });
  parser.on('headerLines', (l: { key: string; line: string }[]) => { lines = l.slice(0, MAX_HEADER_LINES); });
  parser.on('data', (data: AttachmentStream | MessageText) => {
    if (data.type === 'text') {
      if (typeof data.html === 'string') html = data.html.slice(0, MAX_BODY_CHARS);
      if (data.text) text = data.text.slice(0, MAX_BODY_CHARS);
      return;
    }
    const entry = {
      index: attachments.length,
      filename: data.filename ?? null,
      size: 0,
      content_type: declaredType(data.headers.get('content-type')) ?? data.contentType,
      content_id: data.cid ? `<${data.cid}>` : null,
      content_disposition: data.contentDisposition ?? null,
    };
    attachments.push(entry);
    data.content.on('data', (chunk: Buffer) => { entry.size += chunk.length; });
    data.content.on('end', () => data.release?.());
  });
  await pipeline(pulled(port), parser);
  const from = mailboxes(headers.get('from') as AddressField | undefined).join(', ');
  return {
    from,
    to: mailboxes(headers.get('to') as AddressField | undefined),
    cc: mailboxes(headers.get('cc') as AddressField | undefined),
    replyTo: mailboxes(headers.get('reply-to') as AddressField | undefined),
    subject: subjectOf(headers),
    messageId: messageIds(headers.get('message-id'))[0] ?? null,
    inReplyTo: messageIds(headers.get('in-reply-to'))[0] ?? null,
    references: messageIds(headers.get('references')),
    html,
    text,
    headers: headerObject(lines),
    attachments,
    isAutoReply: autoReply(headers),
    isBounce: bounce(headers, from),
    ...(text === null ? { strippedText: null } : (text as string).length <= STRIP_INLINE_CHARS ? { strippedText: stripReply(text) } : {}),
  };
}

/**
 * `text` and `html` of a message submitted over SMTP, kept as sent. A message mailparser cannot
 * read shows no bodies; it is still sent as it was submitted.
 */
async function bodies(raw: Uint8Array): Promise<{ text: string | null; html: string | null }> {
  try {
    const mail = await simpleParser(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), { ...AS_SENT, skipImageLinks: true });
    return {
      html: typeof mail.html === 'string' ? shown(mail.html) : null,
      text: mail.text ? shown(mail.text) : null,
    };
  } catch {
    return { text: null, html: null };
  }
}

/**
 * The `index`th attachment's decoded bytes, as mailparser yields attachments, sent back through
 * the port as the message streams in; the others pass through and are dropped. Answers whether
 * there was one.
 */
async function attachment(port: MessagePort, index: number): Promise<boolean> {
  const parser = new MailParser(AS_SENT as never);
  let seen = 0;
  let found = false;
  let sending: Promise<void> | undefined;
  parser.on('data', (data: AttachmentStream | MessageText) => {
    if (data.type !== 'attachment') return;
    data.content.on('end', () => data.release?.());
    if (seen++ !== index) { data.content.resume(); return; }
    found = true;
    const content = data.content;
    port.on('message', (m: PortMessage) => {
      if (m.t === 'pause') content.pause();
      else if (m.t === 'resume') content.resume();
    });
    sending = new Promise((resolve, reject) => {
      content.on('data', (chunk: Buffer) => {
        const data = own(chunk);
        port.postMessage({ t: 'out', data } satisfies PortMessage, [data]);
      });
      content.on('end', () => { port.postMessage({ t: 'outEnd' } satisfies PortMessage); resolve(); });
      content.on('error', reject);
    });
  });
  await pipeline(pulled(port), parser);
  await sending;
  return found;
}

/** The reply without its quoted history and signature (email-reply-parser, see docs/inbound.md). */
function stripReply(text: string): string | null {
  try {
    return new EmailReplyParser().parseReply(text).trim() || null;
  } catch {
    return null;
  }
}

/** A header value with its RFC 2047 encoded words decoded; left as it is when they don't decode. */
function decodeWords(value: string): string {
  try {
    return libmime.decodeWords(value);
  } catch {
    return value;
  }
}

export default async function run(task: MimeTask): Promise<unknown> {
  // A whole task's start is a stamp in shared memory (no message: most tasks are small, and a
  // message each way costs more than their parse); a streamed one's is said on its port, which
  // the event loop's side closes once the task is over (its last messages read).
  if ('started' in task) Atomics.store(task.started, 0, BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)));
  else task.port.postMessage({ t: 'start' } satisfies PortMessage);
  switch (task.op) {
    case 'sink': return sinkMessage(task.raw, task.envelope);
    case 'received': return received(task.port);
    case 'bodies': return bodies(task.raw);
    case 'attachment': return attachment(task.port, task.index);
    case 'stripReply': return stripReply(task.text);
    case 'decodeWords': return decodeWords(task.value);
  }
}
