import type { Socket } from 'node:net';
import { attemptSource } from '../http/client-ip.ts';

/**
 * The relay's open connections, per client and in all, counted from the moment a socket is
 * accepted until it closes: a connection still in its TLS handshake (or that never starts one)
 * holds a slot like a session does. A client is its address, or for IPv6 its /64, which one host
 * or subscriber usually holds whole. Both listeners share one count.
 */
export class ClientSlots {
  private readonly perClient = new Map<string, number>();
  private open = 0;

  constructor(readonly max: number, readonly maxPerClient: number) {}

  /** The connections held now by `address`'s client. */
  held(address: string | undefined): number {
    return this.perClient.get(clientOf(address)) ?? 0;
  }

  get total(): number {
    return this.open;
  }

  /** Whether one more connection from `address` fits under both limits. */
  fits(address: string | undefined): boolean {
    return this.open < this.max && this.held(address) < this.maxPerClient;
  }

  /**
   * Counts `socket` against its client until it closes, or until the answered release is called
   * (once a TLS socket has taken it over, the plain socket under it may never report its close).
   */
  hold(socket: Socket): () => void {
    const client = clientOf(socket.remoteAddress);
    this.perClient.set(client, (this.perClient.get(client) ?? 0) + 1);
    this.open++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      const n = (this.perClient.get(client) ?? 1) - 1;
      if (n > 0) this.perClient.set(client, n);
      else this.perClient.delete(client);
      this.open--;
    };
    socket.once('close', release);
    return release;
  }
}

/** The unit a connection is counted by: an IPv4 address, or an IPv6 /64. */
export function clientOf(address: string | undefined): string {
  return attemptSource(address ?? 'unknown');
}
