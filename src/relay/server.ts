import { readFile } from 'node:fs/promises';
import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { chargeFailedAuth } from '../http/auth.ts';
import { isKeyActive, keyUseRecorder, verifyApiKey } from '../keys/authenticate.ts';
import { hashApiKey } from '../keys/service.ts';
import { ConfigError } from '../platform/config.ts';
import { recordSmtpSubmission } from '../platform/metrics.ts';
import { isMailbox } from '../emails/mailbox.ts';
import { MAX_RECIPIENTS } from '../emails/validate.ts';
import { recordRelayListeners, type RelayListener } from './address.ts';
import { SmtpReply } from './reply.ts';
import { holdWritesForTurn } from '../sink/reply-batching.ts';
import { submitMessage, type RelayDeps, type RelayUser } from './service.ts';
import { ClientSlots } from './client-slots.ts';

export type RelayServer = { listeners: RelayListener[]; close(): Promise<void> };

/** A reply text that already carries its enhanced status code, which is then sent as it is. */
const ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;
/** The enhanced codes §13 fixes for replies smtp-server writes itself. */
const LIBRARY_REPLIES: Record<number, string> = { 530: '5.7.0', 538: '5.7.11', 552: '5.3.4', 452: '4.5.3' };

type Parser = { write(chunk: unknown, ...rest: unknown[]): boolean };
type Connection = {
  secure: boolean;
  _parser: Parser | false;
  _createParser(): Parser;
  close(): void;
  /** Runs once whichever socket of the session closes. */
  _onClose(): void;
  /** The socket replies go to: the TLS one after STARTTLS. */
  _socket: Socket;
  send(code: number, data?: string | string[], context?: string | false): void;
  handler_AUTH(command: Buffer, callback: () => void): void;
};

declare module 'smtp-server' {
  interface SMTPServer {
    /** Takes an accepted socket and starts reading it (called by the server for each one). */
    connect(socket: Socket, socketOptions: unknown): void;
    /**
     * Guards a socket from accept until connect() (the implicit TLS handshake, a PROXY header):
     * answers the guard's release, or false when the socket was refused and destroyed.
     */
    _acceptSocket(socket: Socket, handshake: boolean): (() => void) | false;
  }
}

// The pre-TLS count below hooks smtp-server's accept guard; a version without it must not start
// silently uncounted.
if (typeof (SMTPServer.prototype as { _acceptSocket?: unknown })._acceptSocket !== 'function') {
  throw new Error('smtp-server has no _acceptSocket: the relay cannot count connections before TLS');
}

/**
 * smtp-server with the relay's replies: each keeps the enhanced code it was given (smtp-server
 * would derive one from the reply code), and AUTH before TLS is refused with 538 5.7.11 where
 * plaintext AUTH is not allowed, whether or not this listener offers STARTTLS.
 */
class RelaySmtpServer extends SMTPServer {
  constructor(options: SMTPServerOptions, private readonly requireTls: boolean, private readonly lineTimeoutMs: number, private readonly slots: ClientSlots) {
    super(options);
  }

  /**
   * Every socket is counted from accept, before any TLS: on the implicit-TLS port a connection
   * that never finishes (or starts) its handshake holds a slot, so it counts toward both limits.
   * There nothing can be said before the handshake, so one past a limit is closed at once; a
   * plain connection goes on to its greeting, where onConnect answers 421. smtp-server closes a
   * handshake not done within the idle timeout.
   */
  override _acceptSocket(socket: Socket, handshake: boolean) {
    if (handshake && !this.slots.fits(socket.remoteAddress)) {
      socket.on('error', () => {});
      socket.destroy();
      return false;
    }
    const slot = this.slots.hold(socket);
    const release = super._acceptSocket(socket, handshake);
    if (!release) {
      slot();
      return false;
    }
    // smtp-server calls the release right before it hands the socket (or the TLS socket over it)
    // to connect(), which takes the slot on to the session.
    return () => {
      release();
      this.#handover = slot;
    };
  }

  /** The slot of the socket being handed to connect(). */
  #handover: (() => void) | undefined;

  /**
   * A command line or a DATA section must be finished within lineTimeoutMs of its first byte.
   * smtp-server's own timeout restarts at every byte, so a client trickling one byte a second
   * would hold its connection for ever. Each reply ends what the client sent before it, so the
   * clock starts at the first byte after a reply and stops at the next reply.
   */
  /** Chunks received so far by each connection, by its id (the session's id). */
  readonly chunksReceived = new Map<string, number>();

  #deadline(connection: Connection): { started(): void; replied(): void } {
    let timer: NodeJS.Timeout | undefined;
    const id = (connection as unknown as { id: string }).id;
    const clock = {
      started: () => {
        this.chunksReceived.set(id, (this.chunksReceived.get(id) ?? 0) + 1);
        timer ??= setTimeout(() => {
          connection.send(421, `4.4.2 Timeout: a command or message must be sent within ${this.lineTimeoutMs / 1000} s of its first byte; closing`, false);
          connection.close();
        }, this.lineTimeoutMs);
      },
      replied: () => {
        clearTimeout(timer);
        timer = undefined;
      },
    };
    const watch = (parser: Parser) => {
      const write = parser.write.bind(parser);
      parser.write = (chunk, ...rest) => {
        clock.started();
        return write(chunk, ...rest);
      };
      return parser;
    };
    // The parser is replaced at STARTTLS; the new one is watched too.
    if (connection._parser) watch(connection._parser);
    const create = connection._createParser.bind(connection);
    connection._createParser = () => watch(create());
    connection._socket.once('close', () => {
      clock.replied();
      this.chunksReceived.delete(id);
    });
    return clock;
  }

  override connect(socket: Socket, socketOptions: unknown) {
    const slot = this.#handover;
    this.#handover = undefined;
    super.connect(socket, socketOptions);
    const connection = [...this.connections].at(-1) as unknown as Connection;
    // The session's end frees its slot, whichever socket (plain, TLS, after STARTTLS) closed.
    if (slot) {
      const onClose = connection._onClose.bind(connection);
      connection._onClose = () => {
        slot();
        onClose();
      };
    }
    const write = connection.send.bind(connection);
    // Every reply of one turn leaves in one write: those to a pipelined packet's commands, and
    // the 250 for a message together with the replies to the next message's MAIL, RCPT and DATA
    // that a pipelining client sent right behind its content (RFC 2920 §3.1).
    const deadline = this.#deadline(connection);
    const send: Connection['send'] = (code, data, context) => {
      deadline.replied();
      holdWritesForTurn(connection._socket);
      write(code, data, context);
    };
    connection.send = (code, data, context) => {
      if (typeof data === 'string' && ENHANCED.test(data)) return send(code, data, false);
      const fixed = LIBRARY_REPLIES[code];
      if (fixed && typeof data === 'string' && context !== false) return send(code, `${fixed} ${data}`, false);
      return send(code, data, context);
    };
    const auth = connection.handler_AUTH.bind(connection);
    connection.handler_AUTH = (command, callback) => {
      if (this.requireTls && !connection.secure) {
        connection.send(538, '5.7.11 Encryption required: use STARTTLS (or the implicit TLS port) before AUTH');
        return callback();
      }
      auth(command, callback);
    };
  }
}

const asCallbackError = (reply: SmtpReply) => Object.assign(new Error(reply.message), { responseCode: reply.responseCode });

/**
 * The SMTP submission relay (§13) in the API process: AUTH with an API key, then each message
 * becomes an email of the key's project through the same accept path as `POST /v1/emails`.
 */
export async function startRelay(deps: RelayDeps): Promise<RelayServer> {
  const { config, log, sql, limiter } = deps;
  const relay = config.relay!;
  const tls = relay.tls
    ? await Promise.all([readFile(relay.tls.certFile), readFile(relay.tls.keyFile)]).then(([cert, key]) => ({ cert, key })).catch((err: NodeJS.ErrnoException) => {
      throw new ConfigError(`RELAY_TLS_CERT/RELAY_TLS_KEY: cannot read ${err.path ?? 'the files'} (${err.code ?? err.message})`);
    })
    : undefined;
  const requireTls = !config.development && !relay.allowPlaintextAuth;
  if (!tls && requireTls) {
    log.warn('relay has no RELAY_TLS_CERT/RELAY_TLS_KEY and RELAY_ALLOW_PLAINTEXT_AUTH is off: every AUTH is refused with 538');
  }
  const recordUse = keyUseRecorder(sql);
  const keyChecks = new Map<string, { chunks: number; active: Promise<boolean> }>();
  const checkKey = (user: RelayUser) => {
    const active = isKeyActive(sql, user.keyHash);
    active.catch(() => {}); // awaited by the MAIL FROM that uses it, if any
    return active;
  };
  const chunksOf = (sessionId: string) => servers.reduce((n, { server }) => n + (server.chunksReceived.get(sessionId) ?? 0), 0);

  const options: SMTPServerOptions = {
    banner: 'Mailroom SMTP relay',
    authMethods: ['PLAIN', 'LOGIN'],
    // Checked per connection instead (RelaySmtpServer), with §13's reply.
    allowInsecureAuth: true,
    authRequiredMessage: 'Authentication required: AUTH with an API key as the password',
    ...(tls ? { key: tls.key, cert: tls.cert } : { disabledCommands: ['STARTTLS'] }),
    size: config.emailMaxMessageBytes,
    rejectOversized: true,
    maxClients: relay.maxConnections,
    maxRecipients: MAX_RECIPIENTS,
    socketTimeout: relay.idleTimeoutMs,
    disableReverseLookup: true,
    hideDSN: true,
    // Advertised, so clients can show the reason (every reply here carries its enhanced code).
    hideENHANCEDSTATUSCODES: false,
    logger: false,
    closeTimeout: 3_000,
    onAuth(auth, session, callback) {
      const refuse = async () => {
        recordSmtpSubmission('auth_failed');
        const decision = await chargeFailedAuth(limiter, session.remoteAddress);
        return decision.allowed
          ? new SmtpReply(535, '5.7.8', 'Authentication credentials invalid: the password must be an active API key')
          : new SmtpReply(421, '4.7.0', `Too many failed authentications from this address; try again in ${decision.resetSeconds} seconds`);
      };
      (async () => {
        const key = await verifyApiKey(sql, auth.password ?? undefined);
        if (!key) return callback(asCallbackError(await refuse()));
        await recordUse(key);
        const user: RelayUser = { projectId: key.projectId, keyId: key.id, keyHash: hashApiKey(auth.password!) };
        callback(null, { user: user as unknown as string });
      })().catch((err: unknown) => {
        log.error({ err }, 'relay authentication failed unexpectedly');
        callback(asCallbackError(new SmtpReply(454, '4.7.0', 'Temporary authentication failure; try again')));
      });
    },
    // One client holds at most RELAY_MAX_CONNECTIONS_PER_CLIENT of the slots, and the relay
    // RELAY_MAX_CONNECTIONS, counting connections of both listeners from accept (ClientSlots),
    // TLS handshakes included. This connection is counted already.
    onConnect(session, callback) {
      if (slots.held(session.remoteAddress) > relay.maxConnectionsPerClient) {
        return callback(asCallbackError(new SmtpReply(421, '4.7.0', `Too many connections from your address (at most ${relay.maxConnectionsPerClient}); try again later`)));
      }
      if (slots.total > relay.maxConnections) {
        return callback(asCallbackError(new SmtpReply(421, '4.7.0', 'Too many connected clients; try again in a moment')));
      }
      callback();
    },
    // The key is checked again at each message, so a key revoked while a session is open stops
    // that session at its next MAIL FROM. The lookup is the grouped one of authentication.
    onMailFrom(_address, session, callback) {
      const user = session.user as unknown as RelayUser;
      // A check started once this command's bytes had arrived (no chunk since) answers for it, so
      // a pipelining client's next MAIL FROM, sent behind a message's content, is answered in
      // the same turn as that message's 250. Otherwise the key is read now.
      const prefetched = keyChecks.get(session.id);
      keyChecks.delete(session.id);
      const fresh = prefetched && prefetched.chunks === chunksOf(session.id) ? prefetched.active : checkKey(user);
      fresh.then((active) => {
        if (active) return callback();
        // Nothing more is accepted on this session: it must authenticate again.
        session.user = undefined;
        callback(asCallbackError(new SmtpReply(535, '5.7.8', 'Authentication credentials invalid: the API key was revoked')));
      }, (err: unknown) => {
        log.error({ err }, 'relay could not check a key');
        callback(asCallbackError(new SmtpReply(454, '4.7.0', 'Temporary authentication failure; try again')));
      });
    },
    onRcptTo(address, _session, callback) {
      if (!isMailbox(address.address)) return callback(asCallbackError(new SmtpReply(553, '5.1.3', `Invalid recipient address: ${address.address.slice(0, 100)}`)));
      callback();
    },
    onClose(session) {
      keyChecks.delete(session.id);
    },
    onData(stream, session, callback) {
      // The next MAIL FROM's key check starts as this message's content ends (see onMailFrom).
      stream.once('end', () => {
        keyChecks.set(session.id, { chunks: chunksOf(session.id), active: checkKey(session.user as unknown as RelayUser) });
      });
      submitMessage(deps, stream, session).then(
        (id) => {
          recordSmtpSubmission('accepted');
          callback(null, `2.0.0 OK queued as ${id}`);
        },
        (err: unknown) => {
          recordSmtpSubmission('rejected');
          // smtp-server sends the reply once the message has been read to its end.
          stream.resume();
          if (err instanceof SmtpReply) return callback(asCallbackError(err));
          log.error({ err, projectId: (session.user as unknown as RelayUser).projectId }, 'relay could not accept a message');
          callback(asCallbackError(new SmtpReply(451, '4.3.0', 'Message not accepted: a temporary error; try again later')));
        },
      );
    },
  };

  const slots = new ClientSlots(relay.maxConnections, relay.maxConnectionsPerClient);
  const servers: Array<{ server: RelaySmtpServer; kind: RelayListener['kind']; port: number }> = [
    { server: new RelaySmtpServer(options, requireTls, relay.idleTimeoutMs, slots), kind: 'starttls', port: relay.port },
  ];
  if (relay.smtpsPort !== undefined && tls) {
    const implicit = new RelaySmtpServer({ ...options, secure: true }, requireTls, relay.idleTimeoutMs, slots);
    // One set of connections for both listeners: smtp-server counts `maxClients` against it, so
    // RELAY_MAX_CONNECTIONS bounds the relay as a whole, not each port.
    implicit.connections = servers[0]!.server.connections;
    servers.push({ server: implicit, kind: 'implicit-tls', port: relay.smtpsPort });
  }
  const listeners: RelayListener[] = [];
  const close = () => Promise.all(servers.map(({ server }) => new Promise<void>((resolve) => server.close(() => resolve())))).then(() => {});
  try {
    for (const { server, kind, port } of servers) {
      server.on('error', (err) => log.debug({ err: err.message }, 'relay connection error'));
      await new Promise<void>((resolve, reject) => {
        server.server.once('error', reject);
        server.listen(port, relay.host, () => {
          server.server.off('error', reject);
          resolve();
        });
      });
      const address = server.server.address() as AddressInfo;
      listeners.push({ kind, host: address.address, port: address.port });
    }
  } catch (err) {
    await close().catch(() => {});
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE' || e.code === 'EACCES') {
      const name = listeners.length === 0 ? 'RELAY_SMTP_PORT' : 'RELAY_SMTPS_PORT';
      throw new ConfigError(`${name}: ${relay.host}:${servers[listeners.length]!.port} cannot be used (${e.code}); choose another port`);
    }
    throw err;
  }
  recordRelayListeners(listeners);
  log.info({ listeners, tls: tls ? 'starttls' : 'none' }, 'smtp relay listening');
  return {
    listeners,
    close: async () => {
      recordRelayListeners(undefined);
      await close();
    },
  };
}
