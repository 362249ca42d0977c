import type { SMTPServerDataStream } from 'smtp-server';

/**
 * A DATA stream read whole, up to `limit` bytes. Past it the rest is read and dropped (the client
 * is still sending), and the answer is undefined: nothing of an oversized message is kept. The
 * sink and the relay both read messages this way.
 */
export function readDataStream(stream: SMTPServerDataStream, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else chunks.length = 0;
    });
    stream.once('error', reject);
    stream.once('end', () => resolve(stream.sizeExceeded || size > limit ? undefined : Buffer.concat(chunks, size)));
  });
}
