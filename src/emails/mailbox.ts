import addressparser from 'nodemailer/lib/addressparser';

// A dot-atom local part and a dotted host name. Non-ASCII letters are let through for
// internationalised addresses; quoted local parts and address literals are not accepted.
const ATOM = "[^\\s\\x00-\\x1f\\x7f@<>()\\[\\]\\\\,;:\".]+";
const LABEL = '[^\\s\\x00-\\x1f\\x7f@<>()\\[\\]\\\\,;:"._!#$%&\'*+/=?^`{|}~]+';
const ADDR_SPEC = new RegExp(`^${ATOM}(?:\\.${ATOM})*@${LABEL}(?:\\.${LABEL})+$`);

// `addr`, `<addr>`, `Display Name <addr>` or `"Quoted, Name" <addr>`: anything else (comments,
// trailing words, a second address, a group) is refused rather than guessed at.
const PHRASE = '[^\\x00-\\x1f\\x7f()<>\\[\\]:;@\\\\,"]+';
const QUOTED = '"(?:[^"\\\\\\x00-\\x1f\\x7f]|\\\\[^\\x00-\\x1f\\x7f])*"';
const NAME_ADDR = new RegExp(`^(?:(?:${PHRASE}|${QUOTED})\\s*)?<([^<>]+)>$`);

function plausibleAddrSpec(address: string): boolean {
  if (address.length > 254 || !ADDR_SPEC.test(address)) return false;
  const [local = '', domain = ''] = address.split('@');
  return local.length <= 64 && domain.split('.').every((l) => l.length <= 63 && !l.startsWith('-') && !l.endsWith('-'));
}

const recent = new Map<string, boolean>();
const MAX_REMEMBERED = 1024;
const MAX_REMEMBERED_LENGTH = 998;

/**
 * True when `value` is exactly one RFC 5322 mailbox, optionally with a display name. The
 * address parser must agree with the shape check, so what is stored is what MailComposer will
 * put in the header and the SMTP envelope.
 *
 * Answers are remembered for the last addresses seen: a project sends from the same few
 * addresses, and the parse is about a twentieth of the API's CPU for a small send. Only values
 * of a valid length are kept, so the memory stays under a few megabytes.
 */
export function isMailbox(value: string): boolean {
  let answer = recent.get(value);
  if (answer === undefined) {
    answer = checkMailbox(value);
    if (value.length <= MAX_REMEMBERED_LENGTH) {
      if (recent.size >= MAX_REMEMBERED) recent.clear();
      recent.set(value, answer);
    }
  }
  return answer;
}

// The everyday shape: a dot-atom of letters, digits and `_+-`, at a host of letter-digit-hyphen
// labels, within the lengths. Every such value passes the full check below (the tests hold the
// two together), so it is answered without the address parser: a million-row contact import
// checks a million addresses, most of them of this shape.
const PLAIN_LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const PLAIN_ADDR_SPEC = new RegExp(`^[A-Za-z0-9_+-]{1,64}(?:\\.[A-Za-z0-9_+-]+)*@${PLAIN_LABEL}(?:\\.${PLAIN_LABEL})+$`);

/** Whether `value` is a bare address of the everyday shape (which `checkMailbox` accepts). */
export function isPlainAddrSpec(value: string): boolean {
  return value.length <= 254 && PLAIN_ADDR_SPEC.test(value) && value.indexOf('@') <= 64;
}

/** The same answer, worked out afresh. */
export function checkMailbox(value: string): boolean {
  return isPlainAddrSpec(value) || parsesAsMailbox(value);
}

/** The full check: the shape, then the address parser's agreement with it. */
export function parsesAsMailbox(value: string): boolean {
  const input = value.trim();
  if (input === '' || /[\x00-\x1f\x7f]/.test(input)) return false;
  const angle = NAME_ADDR.exec(input);
  const spec = angle ? angle[1]!.trim() : input;
  if (!plausibleAddrSpec(spec)) return false;
  const parsed = addressparser(input);
  return parsed.length === 1 && parsed[0]!.group === undefined && parsed[0]!.address === spec;
}
