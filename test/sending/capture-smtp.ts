import type { AddressInfo } from 'node:net';
import { after } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { closeSinkTransports } from '../../src/providers/sink-transport.ts';

/** `envid` is the DSN envelope id on MAIL FROM, which names the project and email. */
export type Captured = { user: string; envid: string; from: string; recipients: string[]; raw: string };

/**
 * A bare SMTP listener standing where the sink would, for tests that look at the SMTP
 * transaction itself (the envelope), which the sink does not keep.
 */
export async function startCaptureSmtp() {
  const messages: Captured[] = [];
  const server = new SMTPServer({
    authMethods: ['PLAIN', 'LOGIN'],
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    hideDSN: false, // the sink transport names each message's email in the DSN ENVID
    disableReverseLookup: true,
    closeTimeout: 500,
    logger: false,
    onAuth(auth, _session, callback) {
      callback(null, { user: auth.username });
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        messages.push({
          user: String(session.user),
          envid: String((session.envelope as { dsn?: { envid?: string | null } }).dsn?.envid ?? ''),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          recipients: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback(null, `OK: queued as msg_${'0'.repeat(20)}${String(messages.length).padStart(6, '0')}`);
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  after(() => {
    closeSinkTransports();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port, messages };
}
