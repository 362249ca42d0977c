import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import { ConfigError, type Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { keyUseRecorder, looksLikeApiKey, verifyApiKey } from '../keys/authenticate.ts';
import { recordSinkAddress, type SinkAddress } from './address.ts';
import { isInternalSinkLogin, parseInternalEnvelopeId } from './internal-auth.ts';
import { parseSinkMessage } from './parse.ts';
import { isMimeRefusal } from '../platform/mime-pool.ts';
import { insertSinkMessage } from './store.ts';
import { recordSinkMessage } from '../platform/metrics.ts';
import { readDataStream } from './data-stream.ts';
import { batchRepliesPerPacket } from './reply-batching.ts';

export type SinkDeps = { config: Config; sql: Sql; log: Logger };
export type SinkServer = SinkAddress & { close(): Promise<void> };
type SinkUser = { kind: 'key'; projectId: string } | { kind: 'internal' };

const smtpError = (responseCode: number, message: string) => Object.assign(new Error(message), { responseCode });

/** An API key logs in as its project (any username); the worker logs in with its internal login. */
async function authenticate(deps: SinkDeps, recordUse: ReturnType<typeof keyUseRecorder>, user: string, pass: string): Promise<SinkUser | undefined> {
  if (!looksLikeApiKey(pass)) return isInternalSinkLogin(deps.config.secretKey, user, pass) ? { kind: 'internal' } : undefined;
  const key = await verifyApiKey(deps.sql, pass);
  if (!key) return undefined;
  // A key used only over SMTP shows as used, the same as over HTTP.
  await recordUse(key);
  return { kind: 'key', projectId: key.projectId };
}

/** A key's messages belong to its project; an internal session names project and email per message. */
function ownerOf(session: SMTPServerSession): { projectId: string; emailId: string | null } | undefined {
  const user = session.user as SinkUser;
  if (user.kind === 'key') return { projectId: user.projectId, emailId: null };
  return parseInternalEnvelopeId(session.envelope.dsn?.envid);
}

async function catchMessage(deps: SinkDeps, stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
  const raw = await readDataStream(stream, deps.config.emailMaxMessageBytes);
  if (!raw) throw smtpError(552, 'Error: message exceeds fixed maximum message size');
  const owner = ownerOf(session)!;
  const envelope = {
    from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
    recipients: session.envelope.rcptTo.map((r) => r.address),
  };
  const parsed = await parseSinkMessage(raw, envelope).catch((err: unknown) => {
    // Over a parse budget or unreadable (§22.1): refused for good, not "try again later".
    if (isMimeRefusal(err)) throw smtpError(554, `5.6.0 Message not stored: ${err.message}`);
    throw err;
  });
  const keep = { messages: deps.config.sinkMaxMessages, bytes: deps.config.sinkMaxBytes };
  const id = await insertSinkMessage(deps.sql, { ...parsed, ...owner, raw }, keep, (err) => deps.log.error({ err, projectId: owner.projectId }, 'sink stored a message but could not prune; the next message prunes again'));
  recordSinkMessage();
  deps.log.debug({ id, ...owner, bytes: raw.length }, 'sink caught a message');
  return id;
}

declare module 'smtp-server' {
  interface SMTPServer {
    /** Takes an accepted socket and starts reading it (called by the server for each one). */
    connect(socket: Socket, socketOptions: unknown): void;
  }
}

/** The sink's replies to a pipelined packet leave in one write (see batchRepliesPerPacket). */
class SinkSmtpServer extends SMTPServer {
  override connect(socket: Socket, socketOptions: unknown) {
    super.connect(socket, socketOptions);
    batchRepliesPerPacket(socket);
  }
}

/**
 * The built-in SMTP sink. AUTH (PLAIN or LOGIN, no TLS: it is meant for loopback and private
 * networks) is required, so every message belongs to a project; the 250 reply names the stored
 * message (`queued as msg_…`) so the sender can record it.
 */
/** Connections the sink serves at once; more are turned away with 421. */
const MAX_CLIENTS = 100;

export async function startSinkServer(deps: SinkDeps): Promise<SinkServer> {
  const { config, log } = deps;
  const recordUse = keyUseRecorder(deps.sql);
  const server = new SinkSmtpServer({
    banner: 'Mailroom sink',
    authMethods: ['PLAIN', 'LOGIN'],
    allowInsecureAuth: true,
    // No certificate to offer; clients that try STARTTLS opportunistically would fail on it.
    disabledCommands: ['STARTTLS'],
    size: config.emailMaxMessageBytes,
    rejectOversized: true,
    maxClients: MAX_CLIENTS,
    hideDSN: false, // ENVID carries the email of an internal delivery
    disableReverseLookup: true,
    logger: false,
    closeTimeout: 3_000,
    onAuth(auth, _session, callback) {
      authenticate(deps, recordUse, auth.username ?? '', auth.password ?? '').then(
        (user) => (user ? callback(null, { user }) : callback(smtpError(535, 'Error: Authentication credentials invalid'))),
        (err: Error) => {
          log.error({ err }, 'sink authentication failed unexpectedly');
          callback(smtpError(454, 'Temporary authentication failure'));
        },
      );
    },
    onMailFrom(_address, session, callback) {
      callback(ownerOf(session) ? null : smtpError(550, 'Error: internal delivery without a valid ENVID'));
    },
    // Every recipient is caught. Answered at once (smtp-server's default waits a turn), so the
    // reply to RCPT leaves with those to MAIL and DATA.
    onRcptTo(_address, _session, callback) {
      callback();
    },
    onData(stream, session, callback) {
      catchMessage(deps, stream, session).then(
        (id) => callback(null, `OK: queued as ${id}`),
        (err: Error & { responseCode?: number }) => {
          if (err.responseCode === 552 || err.responseCode === 554) return callback(err);
          log.error({ err }, 'sink could not store a message');
          stream.resume(); // the reply waits for the end of DATA
          callback(smtpError(451, 'Error: message not stored, try again later'));
        },
      );
    },
  });
  server.on('error', (err) => log.debug({ err: err.message }, 'sink connection error'));

  try {
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.listen(config.sinkSmtpPort, config.sinkSmtpHost, () => {
        server.server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    // Whatever holds the port is not ours to talk to: mail handed to it could go anywhere.
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new ConfigError(`SINK_SMTP_PORT: ${config.sinkSmtpHost}:${config.sinkSmtpPort} is already in use; stop what listens there or choose another port (each worker on one host needs its own)`);
    }
    throw err;
  }
  const { address, port } = server.server.address() as AddressInfo;
  recordSinkAddress({ host: address, port });
  log.info({ host: address, port }, 'smtp sink listening');

  return {
    host: address,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        recordSinkAddress(undefined);
        server.close(() => resolve());
      }),
  };
}
