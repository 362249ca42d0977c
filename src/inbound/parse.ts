import type { Readable } from 'node:stream';
import { MimeBudgetExceeded, readReceived, stripReply, type ReceivedReading } from '../platform/mime-pool.ts';

export { messageIds } from '../platform/mime-fields.ts';

export type ReceivedAttachment = ReceivedReading['attachments'][number] & {
  id: string;
  /** Position among the message's attachments, as mailparser yields them: how a download finds it again. */
  index: number;
};

export type ParsedReceived = Omit<ReceivedReading, 'attachments'> & {
  strippedText: string | null;
  attachments: ReceivedAttachment[];
  size: number;
};

/**
 * The reply without its quoted history and signature. The reply parser is quadratic on some
 * texts; one over its budget has no stripped text, and the message is still stored.
 */
async function stripped(text: string | null): Promise<string | null> {
  if (!text) return null;
  try {
    return await stripReply(text);
  } catch (err) {
    if (err instanceof MimeBudgetExceeded) return null;
    throw err;
  }
}

/**
 * Parses a message as it streams in, in the MIME pool (src/platform/mime-pool.ts): attachments
 * are counted and dropped as they pass, never held (a download parses the message again and
 * keeps only the one asked for, download.ts). Throws MimeBudgetExceeded or MimeUnreadable when
 * the message itself is at fault, the source's own error when the bytes could not be had.
 */
export async function parseReceived(source: Readable, newAttachmentId: () => string, maxBytes = Infinity): Promise<ParsedReceived> {
  const { reading, size } = await readReceived(source, maxBytes);
  return {
    ...reading,
    strippedText: reading.strippedText !== undefined ? reading.strippedText : await stripped(reading.text),
    attachments: reading.attachments.map((a) => ({ ...a, id: newAttachmentId() })),
    size,
  };
}
