import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Config } from '../platform/config.ts';
import { sinkAddress } from '../sink/address.ts';
import { internalEnvelopeId, internalSinkLogin } from '../sink/internal-auth.ts';

type Login = { user: string; pass: string };
type Sent = { response?: string };

const CONNECTION_OPTIONS = { secure: false, ignoreTLS: true, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 };

/** Connections that failed or ended, marked as it happens (an idle one's socket timeout, the sink going away). */
const ended = new WeakSet<SMTPConnection>();

/** Opens a connection and logs in; rejects with nodemailer's error (ECONNECTION, ETIMEDOUT, EAUTH…). */
function openConnection(host: string, port: number, login: Login): Promise<SMTPConnection> {
  const connection = new SMTPConnection({ ...CONNECTION_OPTIONS, host, port });
  connection.on('end', () => ended.add(connection));
  return new Promise((resolve, reject) => {
    let settled = false;
    const failed = (err: Error) => {
      if (settled) return;
      settled = true;
      connection.close();
      reject(err);
    };
    // Until logged in, a failure is emitted as an event (connect's callback only hears of success);
    // after that it also reaches the callback of the call in progress, and an idle one's only marks it.
    connection.on('error', (err: Error) => {
      ended.add(connection);
      failed(err);
    });
    connection.connect((err?: Error) => {
      if (err) return failed(err);
      // A copy: login() writes to the object it is given.
      connection.login({ user: login.user, pass: login.pass }, (loginErr?: Error | null) => {
        if (loginErr) return failed(loginErr);
        settled = true;
        resolve(connection);
      });
    });
  });
}

/**
 * Authenticated connections to one sink address, reused across sends. The sink greets a new
 * connection only after a short early-talker delay, so a connection per message would cap the
 * worker at a few dozen messages a second. nodemailer's SMTPConnection is used directly rather
 * than through its pooled transport: the message is already composed, and the transport would
 * wrap it in a second MIME tree and stream it through a pipeline, a third of the worker's cost
 * of handing a message to the sink.
 */
class SinkConnections {
  private readonly idle: SMTPConnection[] = [];
  private readonly waiting: ((connection: SMTPConnection | undefined) => void)[] = [];
  private open = 0;
  private closed = false;

  constructor(private readonly host: string, private readonly port: number, private readonly login: Login, private readonly max: number) {}

  async send(envelope: SMTPConnection.Envelope, raw: Buffer): Promise<Sent> {
    const connection = await this.acquire();
    let sent: Sent;
    try {
      sent = await new Promise<Sent>((resolve, reject) => {
        connection.send(envelope, raw, (err, info) => (err ? reject(err) : resolve(info as Sent)));
      });
    } catch (err) {
      // A refusal leaves the session usable once reset; anything else ends the connection.
      const { code, responseCode } = err as { code?: string; responseCode?: number };
      if ((code === 'EENVELOPE' || code === 'EMESSAGE') && responseCode !== 421) this.resetThenRelease(connection);
      else this.release(connection, false);
      throw err;
    }
    this.release(connection, true);
    return sent;
  }

  /**
   * RSET in the background, the send's error already answered. The connection comes back once
   * reset, or is let go if it ends first (a reset the server never answers ends in the socket
   * timeout), so it is counted out exactly once either way.
   */
  private resetThenRelease(connection: SMTPConnection) {
    let released = false;
    const releaseOnce = (keep: boolean) => {
      if (released) return;
      released = true;
      connection.removeListener('end', onEnd);
      this.release(connection, keep);
    };
    const onEnd = () => releaseOnce(false);
    connection.once('end', onEnd);
    connection.reset((resetErr) => releaseOnce(!resetErr));
  }

  close() {
    this.closed = true;
    for (const connection of this.idle.splice(0)) connection.close();
    for (const wake of this.waiting.splice(0)) wake(undefined);
  }

  /** An idle live connection, a new one while under the limit, or the next one released. */
  private async acquire(): Promise<SMTPConnection> {
    for (;;) {
      if (this.closed) throw Object.assign(new Error('the sink transport is closed'), { code: 'ECONNECTION' });
      const idle = this.idle.pop();
      // One that ended while it sat idle (its idle timeout, the sink gone) is dropped here.
      if (idle) {
        if (!ended.has(idle)) return idle;
        idle.close();
        this.open--;
        continue;
      }
      if (this.open < this.max) {
        this.open++;
        try {
          return await openConnection(this.host, this.port, this.login);
        } catch (err) {
          this.open--;
          this.waiting.shift()?.(undefined);
          throw err;
        }
      }
      const handed = await new Promise<SMTPConnection | undefined>((resolve) => this.waiting.push(resolve));
      if (handed) return handed;
    }
  }

  private release(connection: SMTPConnection, keep: boolean) {
    if (!keep || this.closed || ended.has(connection)) {
      connection.close();
      this.open--;
      // A waiter may open the connection this one leaves room for.
      this.waiting.shift()?.(undefined);
      return;
    }
    const waiter = this.waiting.shift();
    if (waiter) waiter(connection);
    else this.idle.push(connection);
  }
}

/** One set of connections per sink address and secret. */
const pools = new Map<string, SinkConnections>();

function connectionsFor(config: Config, host: string, port: number): SinkConnections {
  const login = internalSinkLogin(config.secretKey);
  const key = `${host}:${port}:${login.pass}`;
  let pool = pools.get(key);
  if (!pool) {
    pool = new SinkConnections(host, port, login, Math.max(2, config.workerConcurrency));
    pools.set(key, pool);
  }
  return pool;
}

/** Closes the pooled connections (shutdown, tests); the next send opens new ones. */
export function closeSinkTransports() {
  for (const pool of pools.values()) pool.close();
  pools.clear();
}

const SINK_ID = /\b(msg_[0-9A-HJKMNP-TV-Z]{26})\b/;

/**
 * Hands a composed message to the sink in a real SMTP transaction, so the sink catches the
 * bytes a provider would get; the envelope id names the project and email it belongs to.
 * Returns the sink's message id (`msg_…`, from the 250 reply). Throws nodemailer's error on
 * failure: `code` ECONNECTION, ETIMEDOUT or ESOCKET for network trouble, EAUTH, EENVELOPE or
 * EMESSAGE with the SMTP `responseCode` for refusals (4xx ones are temporary).
 */
export async function sendToSink(
  config: Config,
  msg: { projectId: string; emailId: string; from: string; recipients: string[]; raw: Buffer },
): Promise<{ messageId: string }> {
  const { host, port } = sinkAddress(config);
  const sent = await connectionsFor(config, host, port).send({
    from: msg.from,
    to: msg.recipients,
    dsn: { envid: internalEnvelopeId(msg.projectId, msg.emailId) },
  } as SMTPConnection.Envelope, msg.raw);
  const caught = SINK_ID.exec(String(sent.response ?? ''));
  return { messageId: caught?.[1] ?? `<${msg.emailId}@sink>` };
}
