/**
 * A message submitted over SMTP is sent as the client wrote it. Only its header section is ever
 * read or edited here, field by field on the bytes, so everything else (the body, MIME parts,
 * the order and folding of the other fields, a DKIM signature over them) leaves unchanged.
 */

/** One header field: its name and where its bytes are, from its first line to its last CRLF. */
export type HeaderField = { name: string; start: number; end: number };

export type HeaderSection = {
  fields: HeaderField[];
  /** Where the header section ends: the empty line that starts the body, or the message's end. */
  end: number;
};

const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;

/** The line ending at or after `from`: its end (before CRLF or LF) and where the next line starts. */
function lineAt(raw: Buffer, from: number): { end: number; next: number } {
  const lf = raw.indexOf(0x0a, from);
  if (lf < 0) return { end: raw.length, next: raw.length };
  return { end: lf > from && raw[lf - 1] === 0x0d ? lf - 1 : lf, next: lf + 1 };
}

/**
 * The header fields of a message, or the 1-based number of the first line that is neither a
 * field (`name:`) nor the folded continuation of one.
 */
export function readHeaderSection(raw: Buffer): HeaderSection | { badLine: number } {
  const fields: HeaderField[] = [];
  let at = 0;
  let line = 0;
  while (at < raw.length) {
    line++;
    const { end, next } = lineAt(raw, at);
    if (end === at) return { fields, end: at };
    const first = raw[at]!;
    if (first === 0x20 || first === 0x09) {
      const last = fields.at(-1);
      if (!last) return { badLine: line };
      last.end = next;
    } else {
      const colon = raw.indexOf(0x3a, at);
      const name = colon > at && colon < end ? raw.toString('latin1', at, colon) : '';
      if (!FIELD_NAME.test(name)) return { badLine: line };
      fields.push({ name, start: at, end: next });
    }
    at = next;
  }
  return { fields, end: raw.length };
}

/** A field's value, unfolded and trimmed. */
export function fieldValue(raw: Buffer, field: HeaderField): string {
  return raw.toString('utf8', field.start + field.name.length + 1, field.end).replace(/\r?\n(?=[ \t])/g, '').trim();
}

/** The values of every field called `name` (any case), in order. */
export function fieldValues(raw: Buffer, section: HeaderSection, name: string): string[] {
  const lower = name.toLowerCase();
  return section.fields.filter((f) => f.name.toLowerCase() === lower).map((f) => fieldValue(raw, f));
}

/** Fields a submitted message never carries out: they are instructions to us, or hidden. */
const REMOVED = new Set(['bcc', 'x-mailroom-tags']);

/**
 * The bytes to send for a submitted message: `Bcc` and `X-Mailroom-Tags` removed, and a
 * `Message-ID` and `List-Unsubscribe` (with its RFC 8058 `List-Unsubscribe-Post`) added at the
 * top when the message has none, as composed mail gets them. Nothing else changes.
 */
export function prepareSubmitted(raw: Buffer, opts: { messageId: string; listUnsubscribeUrl?: string }): Buffer {
  const section = readHeaderSection(raw);
  // Refused at submission; should one be stored anyway, it goes out untouched rather than mangled.
  if ('badLine' in section) return raw;
  const has = (name: string) => section.fields.some((f) => f.name.toLowerCase() === name);
  const added: string[] = [];
  if (!has('message-id')) added.push(`Message-ID: ${opts.messageId}`);
  if (opts.listUnsubscribeUrl && !has('list-unsubscribe')) {
    added.push(`List-Unsubscribe: <${opts.listUnsubscribeUrl}>`);
    if (!has('list-unsubscribe-post')) added.push('List-Unsubscribe-Post: List-Unsubscribe=One-Click');
  }
  const kept = section.fields.filter((f) => !REMOVED.has(f.name.toLowerCase()));
  if (added.length === 0 && kept.length === section.fields.length) return raw;
  return Buffer.concat([
    ...added.map((line) => Buffer.from(`${line}\r\n`)),
    ...kept.map((f) => raw.subarray(f.start, f.end)),
    raw.subarray(section.end),
  ]);
}
