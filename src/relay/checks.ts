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
  const parts = partHeaders(raw, section.end);
  if (parts === 'too_many') throw badMessage(`Malformed message: more than ${MAX_PARTS} MIME parts`);
  if (parts === 'too_large') throw badMessage(`Malformed message: a MIME part's header is over ${MAX_HEADER_SECTION_BYTES} bytes`);
  return section;
}

const CRLFCRLF = Buffer.from('\r\n\r\n');
const BOUNDARY_LINE = Buffer.from('\n--');
/** MIME parts a relayed message may hold (the API takes 50 attachments). */
export const MAX_PARTS = 10_000;

/**
 * Checks each MIME part's header (the lines after a `--boundary` line, up to the next empty line)
 * against the header section's bound: the worker's parser refuses a part header past 1 MiB, so a
 * message it could not read is refused here instead. Any line starting `--` is taken for a
 * boundary, which errs only towards refusing; all those before one empty line share one check,
 * and past MAX_PARTS checks the message is refused, so the scan stays a few thousand steps.
 */
function partHeaders(raw: Buffer, bodyStart: number): 'ok' | 'too_large' | 'too_many' {
  let checks = 0;
  for (let at = raw.indexOf(BOUNDARY_LINE, Math.max(0, bodyStart - 1)); at >= 0; at = raw.indexOf(BOUNDARY_LINE, at + 3)) {
    if (++checks > MAX_PARTS) return 'too_many';
    const lineEnd = raw.indexOf(0x0a, at + 1);
    if (lineEnd < 0) return 'ok';
    const blank = raw.indexOf(CRLFCRLF, lineEnd - 1);
    if ((blank < 0 ? raw.length : blank) - lineEnd > MAX_HEADER_SECTION_BYTES) return 'too_large';
    if (blank < 0) return 'ok';
    at = blank;
  }
  return 'ok';
}

/** The header section's bounds, those of the API's JSON body (§18.2). */
export const MAX_HEADER_SECTION_BYTES = 256 * 1024;
export const MAX_HEADER_FIELDS = 1000;

/**
 * Counts the header section's bytes and fields as the message streams in, and stops counting at
 * the empty line that ends it. Past either bound it sets `refused` (and ignores the rest): the
 * message is then read to its end and dropped, and no parser ever sees a header section of two
 * million fields.
 */
export function headerSectionBounds() {
  let bytes = 0;
  let fields = 0;
  let lineLength = 0; // bytes of the current line so far, CR and LF excluded
  let lastByte = 0; // the current line's last byte so far
  let lines = 0; // lines ended so far
  let lineStart = true;
  let done = false;
  const state = {
    refused: undefined as SmtpReply | undefined,
    chunk: (chunk: Buffer) => {
      if (done) return;
      for (let at = 0; at < chunk.length;) {
        if (lineStart) {
          const first = chunk[at]!;
          if (first !== 0x20 && first !== 0x09 && first !== 0x0d && first !== 0x0a && ++fields > MAX_HEADER_FIELDS) {
            done = true;
            state.refused = badMessage(`Header section refused: more than ${MAX_HEADER_FIELDS} header fields`);
            return;
          }
          lineStart = false;
        }
        const lf = chunk.indexOf(0x0a, at);
        const end = lf < 0 ? chunk.length : lf + 1;
        const stop = lf < 0 ? chunk.length : lf;
        if (stop > at) { lineLength += stop - at; lastByte = chunk[stop - 1]!; }
        // The same answer checkMessageBytes gives a long line, given before the line is whole.
        if (lineLength - (lf >= 0 && lastByte === 0x0d ? 1 : 0) > MAX_LINE + (lf < 0 ? 1 : 0)) {
          done = true;
          state.refused = badMessage(`Malformed message: header line ${lines + 1} is longer than ${MAX_LINE} characters`);
          return;
        }
        bytes += end - at;
        if (bytes > MAX_HEADER_SECTION_BYTES) {
          done = true;
          state.refused = new SmtpReply(552, '5.3.4', `Header section too large: the limit is ${MAX_HEADER_SECTION_BYTES} bytes`);
          return;
        }
        if (lf < 0) return;
        // The line ends: an empty one (nothing, or only a CR, before the LF) ends the header section.
        if (lineLength - (lastByte === 0x0d ? 1 : 0) <= 0) { done = true; return; }
        lineLength = 0;
        lastByte = 0;
        lines++;
        lineStart = true;
        at = end;
      }
    },
  };
  return state;
}
