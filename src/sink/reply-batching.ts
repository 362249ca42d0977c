import type { Socket } from 'node:net';

/**
 * smtp-server writes each reply on its own. A pipelining client sends MAIL, RCPT and DATA in one
 * packet; holding the replies to a packet's commands until they have all run sends them in one
 * write (over TLS, one record), the way Postfix's smtpd flushes only once the client's input is
 * used up. On loopback a write also runs the receiver's side of TCP, so each one saved counts.
 *
 * Call it once smtp-server reads the socket (after its pipe), so this listener never changes how
 * the socket is read.
 */
export function batchRepliesPerPacket(socket: Socket) {
  socket.prependListener('data', () => holdWritesForTurn(socket));
}

/** Holds what is written to `socket` for the rest of this turn of the event loop, then sends it in one write. */
export function holdWritesForTurn(socket: Socket) {
  if (socket.writableCorked || socket.destroyed) return;
  socket.cork();
  setImmediate(() => socket.uncork());
}
