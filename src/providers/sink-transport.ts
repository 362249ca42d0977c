import nodemailer, { type Transporter } from 'nodemailer';
import type { Config } from '../platform/config.ts';
import { sinkAddress } from '../sink/address.ts';
import { internalEnvelopeId, internalSinkLogin } from '../sink/internal-auth.ts';

/**
 * One pool of authenticated connections per sink address (and secret), reused across sends:
 * the sink greets a new connection only after a short early-talker delay, so a connection per
 * message would cap the worker at a few dozen messages a second.
 */
const transporters = new Map<string, Transporter>();

function transporterFor(config: Config, host: string, port: number): Transporter {
  const login = internalSinkLogin(config.secretKey);
  const key = `${host}:${port}:${login.pass}`;
  let transporter = transporters.get(key);
  if (!transporter) {
    transporter = nodemailer.createTransport({
      pool: true,
      maxConnections: Math.max(2, config.workerConcurrency),
      maxMessages: Infinity,
      host,
      port,
      secure: false,
      ignoreTLS: true,
      auth: login,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    });
    transporters.set(key, transporter);
  }
  return transporter;
}

/** Closes the pooled connections (shutdown, tests); the next send opens new ones. */
export function closeSinkTransports() {
  for (const transporter of transporters.values()) transporter.close();
  transporters.clear();
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
  const info = await transporterFor(config, host, port).sendMail({
    envelope: { from: msg.from, to: msg.recipients },
    dsn: { id: internalEnvelopeId(msg.projectId, msg.emailId) },
    raw: msg.raw,
    // Never written: a raw message keeps its own header. Naming one spares nodemailer drawing
    // five random numbers per message for an id it would only report.
    messageId: `<${msg.emailId}@sink>`,
  });
  const caught = SINK_ID.exec(String(info.response ?? ''));
  return { messageId: caught?.[1] ?? String(info.messageId) };
}
