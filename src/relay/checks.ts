import { isAscii } from 'node:buffer';
import { readHeaderSection, type HeaderSection } from '../emails/submitted.ts';
import { SmtpReply, badMessage } from './reply.ts';

/** RFC 5322 §2.1.1: a line is at most 998 characters, CRLF excluded. */
const MAX_LINE = 998;

/** Where a CR or LF stands outside a CRLF pair, or -1. */
function bareLineBreak(raw: Buffer): number {
  for (let at = raw.indexOf(0x0a); at >= 0; at = raw.indexOf(0x0a, at + 1)) {
    if (at === 0 || raw[at - 1] !== 0x0d) return at;
  }
  for (let at = raw.indexOf(0x0d); at >= 0; at = raw.indexOf(0x0d, at + 1)) {
    if (raw[at + 1] !== 0x0a) return at;
  }
  return -1;
}

/** The 1-based number of the first header line longer than MAX_LINE, or 0. */
function overlongHeaderLine(raw: Buffer, end: number): number {
  let line = 1;
  for (let at = 0; at < end; line++) {
    const lf = raw.indexOf(0x0a, at);
    const stop = lf < 0 || lf > end ? end : lf - 1;
    if (stop - at > MAX_LINE) return line;
    if (lf < 0 || lf >= end) return 0;
    at = lf + 1;
  }
  return 0;
}

/**
 * The byte-level rules a submitted message must meet before anything reads it: no NUL, CRLF line
 * ends only (a bare CR or LF is how SMTP smuggling hides a second message), 8-bit bytes only
 * when the client declared them (BODY=8BITMIME or SMTPUTF8), and a header section of fields no
 * longer than RFC 5322 allows. Answers the header section, or throws the reply that refuses it.
 */
export function checkMessageBytes(raw: Buffer, declared: { eightBit: boolean }): HeaderSection {
  if (raw.includes(0)) throw badMessage('Message refused: it contains a NUL byte');
  if (bareLineBreak(raw) >= 0) throw badMessage('Message refused: it contains a bare CR or LF; every line must end in CRLF');
  if (!declared.eightBit && !isAscii(raw)) {
    throw new SmtpReply(550, '5.6.3', 'Message refused: 8-bit data needs BODY=8BITMIME (or SMTPUTF8) on MAIL FROM');
  }
  const section = readHeaderSection(raw);
  if ('badLine' in section) throw badMessage(`Malformed message: header line ${section.badLine} is neither a "Name: value" field nor a folded continuation`);
  const long = overlongHeaderLine(raw, section.end);
  if (long) throw badMessage(`Malformed message: header line ${long} is longer than ${MAX_LINE} characters`);
  if (section.fields.length === 0) throw badMessage('Malformed message: it has no header fields');
  return section;
}
