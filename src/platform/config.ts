import { z } from 'zod';
import ipaddr from 'ipaddr.js';

/** The value shipped in .env.example; refused at boot so nobody runs production on it. */
export const EXAMPLE_SECRET_KEY = 'change-me-to-a-long-random-string-of-at-least-32-chars';

const YES = ['yes', 'true', '1', 'on'];
const NO = ['', 'no', 'false', '0', 'off'];

const intIn = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, `a whole number from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `a whole number from ${min} to ${max}`);

const cidrList = z
  .string()
  .transform((s) => s.split(',').map((p) => p.trim()).filter(Boolean))
  .refine(
    (list) => list.every((c) => { try { ipaddr.parseCIDR(c); return true; } catch { return false; } }),
    'comma-separated CIDR ranges such as 10.0.0.0/8,fd00::/8',
  );

const yesNo = z
  .string()
  .transform((s) => s.trim().toLowerCase())
  .refine((s) => YES.includes(s) || NO.includes(s), 'yes/true/1/on or empty/no/false/0/off')
  .transform((s) => YES.includes(s));

const httpUrl = z.string().trim().refine((s) => {
  try { const u = new URL(s); return u.protocol === 'http:' || u.protocol === 'https:'; } catch { return false; }
}, 'an http(s) URL');

const schema = z.object({
  DATABASE_URL: z.string().trim().regex(/^postgres(ql)?:\/\//, 'a postgres:// URL').optional(),
  REDIS_URL: z.string().trim().regex(/^rediss?:\/\//, 'a redis:// URL').optional(),
  PORT: intIn(0, 65535).optional(),
  HOST: z.string().trim().min(1, 'a host name or address').optional(),
  NODE_ENV: z.string().optional(),
  SECRET_KEY: z
    .string()
    .min(32, 'at least 32 characters')
    .refine((s) => s !== EXAMPLE_SECRET_KEY, 'a secret of your own, not the .env.example value')
    .optional(),
  TRUST_PROXY: z
    .string()
    .trim()
    .transform((s): true | false | string[] =>
      s === 'true' ? true : s === '' || s === 'false' ? false : s.split(',').map((p) => p.trim()).filter(Boolean))
    .refine(
      (v) => typeof v === 'boolean' || v.every((c) => { try { ipaddr.parseCIDR(c); return true; } catch { return false; } }),
      '`true`, or comma-separated CIDR ranges of trusted proxies',
    )
    .default(false),
  API_RATE_LIMIT_PER_MINUTE: intIn(1, 1_000_000).default(600),
  EMAIL_MAX_MESSAGE_BYTES: intIn(1024, 100 * 1024 * 1024).default(10 * 1024 * 1024),
  EVENT_INGESTION: z.enum(['queue', 'https'], { error: '`queue` or `https`' }).default('queue'),
  MIGRATE_ON_START: z
    .string()
    .transform((s) => s.trim().toLowerCase())
    .refine((s) => YES.includes(s) || NO.includes(s), 'yes/true/1/on or empty/no/false/0/off')
    .transform((s) => YES.includes(s))
    .default(false),
  WEBHOOK_ALLOWED_CIDRS: cidrList.default([]),
  WEBHOOK_RETRY_BASE_MS: intIn(1, 600_000).default(5000),
  EMAIL_RETRY_BASE_MS: intIn(1, 3_600_000).default(30_000),
  SINK_SMTP_HOST: z.string().trim().min(1).default('127.0.0.1'),
  SINK_SMTP_PORT: intIn(0, 65535).default(1025),
  SINK_MAX_MESSAGES: intIn(1, 10_000_000).default(5000),
  SINK_MAX_BYTES: intIn(1024 * 1024, Number.MAX_SAFE_INTEGER).default(256 * 1024 * 1024),
  WORKER_CONCURRENCY: intIn(1, 1000).default(8),
  // A contact import's CSV (§23.2), streamed into the database, never held whole.
  CONTACT_IMPORT_MAX_BYTES: intIn(1024, Number.MAX_SAFE_INTEGER).default(512 * 1024 * 1024),
  // Above the 30 days scheduled_at may reach ahead, so no email is removed before its time came;
  // bodies may go sooner, since the purge skips unsent mail (§18.5).
  RETENTION_DAYS: intIn(31, 36_500).default(90),
  BODY_RETENTION_DAYS: intIn(1, 36_500).default(30),
  // The audit log is kept on its own clock: who changed what outlives the mail it concerned.
  AUDIT_RETENTION_DAYS: intIn(1, 36_500).default(400),
  // Single sign-on for the dashboard (OpenID Connect); all three or none.
  // Exactly as the provider's discovery document spells it (the ID token's iss must match).
  OIDC_ISSUER: httpUrl.optional(),
  OIDC_CLIENT_ID: z.string().trim().min(1).max(500).optional(),
  OIDC_CLIENT_SECRET: z.string().trim().min(1).max(2000).optional(),
  OIDC_ALLOWED_DOMAINS: z
    .string()
    .transform((s) => s.split(',').map((d) => d.trim().toLowerCase().replace(/^@/, '')).filter(Boolean))
    .refine((list) => list.every((d) => /^[a-z0-9.-]+\.[a-z0-9-]+$/.test(d)), 'comma-separated domain names such as example.com,example.org')
    .default([]),
  // Webhook flushes and retries run apart from sends, so slow endpoints never hold a send's slot.
  WEBHOOK_CONCURRENCY: intIn(1, 1000).default(4),
  METRICS_PORT: intIn(0, 65535).default(9464),
  METRICS_TOKEN: z.string().trim().min(16, 'at least 16 characters').optional(),
  // A pool silent this long is presumed dead and its locked jobs are released; tests shorten it.
  WORKER_DEAD_AFTER_SECONDS: intIn(3, 86_400).default(30),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    error: 'one of fatal, error, warn, info, debug, trace, silent',
  }).default('info'),
  PUBLIC_BASE_URL: httpUrl.transform((s) => s.replace(/\/+$/, '')).optional(),
  AWS_ENDPOINT_URL_SESV2: httpUrl.optional(),
  AWS_ENDPOINT_URL_SQS: httpUrl.optional(),
  AWS_ENDPOINT_URL_SES: httpUrl.optional(),
  AWS_ENDPOINT_URL_S3: httpUrl.optional(),
  INBOUND_MAX_MESSAGE_BYTES: intIn(1024, 1024 * 1024 * 1024).default(40 * 1024 * 1024),
  RELAY_SMTP_PORT: intIn(0, 65535).optional(),
  RELAY_SMTP_HOST: z.string().trim().min(1, 'a host name or address').optional(),
  RELAY_SMTPS_PORT: intIn(0, 65535).optional(),
  RELAY_TLS_CERT: z.string().trim().min(1, 'the path of a PEM certificate file').optional(),
  RELAY_TLS_KEY: z.string().trim().min(1, 'the path of a PEM private key file').optional(),
  RELAY_ALLOW_PLAINTEXT_AUTH: yesNo.default(false),
  RELAY_MAX_CONNECTIONS: intIn(1, 100_000).default(100),
  RELAY_MAX_CONNECTIONS_PER_CLIENT: intIn(1, 100_000).default(10),
  // Compiled templates are kept up to this many MiB (and their text, in the API, as many again).
  TEMPLATE_CACHE_MB: intIn(1, 4096).default(64),
  // Idle connections are closed after this; tests shorten it.
  RELAY_IDLE_TIMEOUT_SECONDS: intIn(1, 3600).default(60),
});

/** A setting that stops the boot; its message is the one line the operator sees. */
export class ConfigError extends Error {}

export type ConfigDefaults = { databaseUrl?: string; secretKey?: string; redisUrl?: string } & {
  /** `npm run dev` supplies these itself, so their absence is not an error there. */
  dev?: boolean;
  /** The CLI talks only to PostgreSQL. */
  requireRedis?: boolean;
  /** `npm run dev` turns the SMTP relay on at this port when RELAY_SMTP_PORT is unset... */
  relaySmtpPort?: number;
  /** ...with its own self-signed certificate when RELAY_TLS_CERT and RELAY_TLS_KEY are unset. */
  relayTls?: { certFile: string; keyFile: string };
};

/** The CLI works on the `npm run dev` database and secret when no DATABASE_URL is given. */
export function usesDevDatabase(env: NodeJS.ProcessEnv = process.env): boolean {
  return !env.DATABASE_URL;
}

/**
 * The only reader of the environment. Empty strings count as unset so `FOO=` in an env file
 * falls back to the default rather than failing.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, defaults: ConfigDefaults = {}) {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && (value !== '' || key === 'MIGRATE_ON_START')) raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0]);
    const why = name === 'RETENTION_DAYS' ? ', more than the 30 days scheduled_at may reach ahead' : '';
    throw new ConfigError(`${name}: expected ${issue.message}${why}`);
  }
  const e = parsed.data;
  if (e.EVENT_INGESTION === 'https' && !e.PUBLIC_BASE_URL) {
    throw new ConfigError('PUBLIC_BASE_URL: required when EVENT_INGESTION=https (the public https URL SNS pushes to)');
  }
  const development = e.NODE_ENV === 'development' || defaults.dev === true;
  const databaseUrl = e.DATABASE_URL ?? defaults.databaseUrl;
  if (!databaseUrl) throw new ConfigError('DATABASE_URL: required (a postgres:// URL); only `npm run dev` runs without it');
  const redisUrl = e.REDIS_URL ?? defaults.redisUrl;
  if (!redisUrl && !defaults.dev && defaults.requireRedis !== false) throw new ConfigError('REDIS_URL: required (a redis:// URL); only `npm run dev` runs without it');
  const secretKey = e.SECRET_KEY ?? defaults.secretKey;
  if (!secretKey) throw new ConfigError('SECRET_KEY: required (at least 32 characters; the same value in every process)');
  if ((e.RELAY_TLS_CERT === undefined) !== (e.RELAY_TLS_KEY === undefined)) {
    throw new ConfigError(`${e.RELAY_TLS_CERT === undefined ? 'RELAY_TLS_CERT' : 'RELAY_TLS_KEY'}: required with ${e.RELAY_TLS_CERT === undefined ? 'RELAY_TLS_KEY' : 'RELAY_TLS_CERT'} (PEM file paths, both or neither)`);
  }
  const relaySmtpPort = e.RELAY_SMTP_PORT ?? defaults.relaySmtpPort;
  const relayTls = e.RELAY_TLS_CERT && e.RELAY_TLS_KEY ? { certFile: e.RELAY_TLS_CERT, keyFile: e.RELAY_TLS_KEY } : defaults.relayTls;
  if (e.RELAY_SMTPS_PORT !== undefined && !relayTls) {
    throw new ConfigError('RELAY_SMTPS_PORT: implicit TLS needs RELAY_TLS_CERT and RELAY_TLS_KEY');
  }
  const host = e.HOST ?? (development ? '127.0.0.1' : '0.0.0.0');
  const oidcSet = [e.OIDC_ISSUER, e.OIDC_CLIENT_ID, e.OIDC_CLIENT_SECRET].filter((v) => v !== undefined).length;
  if (oidcSet !== 0 && oidcSet !== 3) {
    throw new ConfigError(`${e.OIDC_ISSUER === undefined ? 'OIDC_ISSUER' : e.OIDC_CLIENT_ID === undefined ? 'OIDC_CLIENT_ID' : 'OIDC_CLIENT_SECRET'}: required with the other OIDC_ settings (single sign-on needs the issuer, client id and client secret)`);
  }
  return {
    databaseUrl,
    redisUrl,
    port: e.PORT ?? 3000,
    host,
    development,
    secretKey,
    trustProxy: e.TRUST_PROXY,
    apiRateLimitPerMinute: e.API_RATE_LIMIT_PER_MINUTE,
    emailMaxMessageBytes: e.EMAIL_MAX_MESSAGE_BYTES,
    eventIngestion: e.EVENT_INGESTION,
    migrateOnStart: e.MIGRATE_ON_START,
    webhookAllowedCidrs: e.WEBHOOK_ALLOWED_CIDRS,
    webhookRetryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
    emailRetryBaseMs: e.EMAIL_RETRY_BASE_MS,
    sinkSmtpHost: e.SINK_SMTP_HOST,
    sinkSmtpPort: e.SINK_SMTP_PORT,
    sinkMaxMessages: e.SINK_MAX_MESSAGES,
    sinkMaxBytes: e.SINK_MAX_BYTES,
    workerConcurrency: e.WORKER_CONCURRENCY,
    contactImportMaxBytes: e.CONTACT_IMPORT_MAX_BYTES,
    retentionDays: e.RETENTION_DAYS,
    bodyRetentionDays: e.BODY_RETENTION_DAYS,
    auditRetentionDays: e.AUDIT_RETENTION_DAYS,
    /** Dashboard single sign-on (§21.3); undefined when not configured. */
    oidc: e.OIDC_ISSUER && e.OIDC_CLIENT_ID && e.OIDC_CLIENT_SECRET
      ? { issuer: e.OIDC_ISSUER, clientId: e.OIDC_CLIENT_ID, clientSecret: e.OIDC_CLIENT_SECRET, allowedDomains: e.OIDC_ALLOWED_DOMAINS }
      : undefined,
    webhookConcurrency: e.WEBHOOK_CONCURRENCY,
    metricsPort: e.METRICS_PORT,
    metricsToken: e.METRICS_TOKEN,
    workerDeadAfterSeconds: e.WORKER_DEAD_AFTER_SECONDS,
    logLevel: e.LOG_LEVEL,
    publicBaseUrl: e.PUBLIC_BASE_URL,
    awsEndpointSesv2: e.AWS_ENDPOINT_URL_SESV2,
    awsEndpointSqs: e.AWS_ENDPOINT_URL_SQS,
    awsEndpointSes: e.AWS_ENDPOINT_URL_SES,
    awsEndpointS3: e.AWS_ENDPOINT_URL_S3,
    inboundMaxMessageBytes: e.INBOUND_MAX_MESSAGE_BYTES,
    templateCacheMb: e.TEMPLATE_CACHE_MB,
    /** The SMTP submission relay (§13); off when no port is set. */
    relay: relaySmtpPort === undefined ? undefined : {
      host: e.RELAY_SMTP_HOST ?? host,
      port: relaySmtpPort,
      smtpsPort: e.RELAY_SMTPS_PORT,
      tls: relayTls,
      allowPlaintextAuth: e.RELAY_ALLOW_PLAINTEXT_AUTH,
      maxConnections: e.RELAY_MAX_CONNECTIONS,
      maxConnectionsPerClient: e.RELAY_MAX_CONNECTIONS_PER_CLIENT,
      idleTimeoutMs: e.RELAY_IDLE_TIMEOUT_SECONDS * 1000,
    },
  };
}

/** The settings as the code reads them; each type flows from its line in the schema above. */
export type Config = ReturnType<typeof loadConfig>;
