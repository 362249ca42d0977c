import { boot, configOrExit } from './platform/runtime.ts';
import { devSecretKey, EmbeddedDatabaseError, startDevDatabase } from './platform/embedded-db.ts';
import { migrateDatabase } from './platform/migrate.ts';
import { devRelayCertificate } from './relay/dev-cert.ts';

const started = Date.now();
const secretKey = await devSecretKey();
// The SMTP relay listens on 2587 with a certificate made once under .data/, unless told otherwise.
const relayDefaults = { relaySmtpPort: 2587, relayTls: await devRelayCertificate() };
// Validate the environment first so a typo fails before the embedded database spins up.
const preliminary = configOrExit({ dev: true, databaseUrl: 'postgres://unused', secretKey, ...relayDefaults });
const embedded = preliminary.databaseUrl === 'postgres://unused'
  ? await startDevDatabase().catch((err: unknown) => {
    if (!(err instanceof EmbeddedDatabaseError)) throw err;
    process.stderr.write(`mailroom: ${err.message}\n`);
    process.exit(1);
  })
  : undefined;
const config = configOrExit({ dev: true, databaseUrl: embedded?.url, secretKey, ...relayDefaults });
const { applied } = await migrateDatabase(config.databaseUrl);

// The embedded cluster must outlive the pools, so it is the last shutdown step.
const running = await boot('all', config, embedded ? [['embedded-postgres', embedded.stop]] : []);

const lines = [
  '',
  `  Mailroom is running (development mode, ready in ${((Date.now() - started) / 1000).toFixed(1)} s)`,
  `  Dashboard   ${running.url}/dashboard`,
  `  API         ${running.url}/v1   docs: ${running.url}/docs`,
  `  SMTP sink   smtp://${config.sinkSmtpHost}:${config.sinkSmtpPort} (AUTH with any username and an API key as password)`,
  ...(running.relay ?? []).map((l) => `  SMTP relay  smtp://${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port} (${l.kind === 'starttls' ? 'STARTTLS, self-signed certificate in .data/relay-tls' : 'implicit TLS'}; username mailroom, password an API key)`),
  `  Database    ${embedded ? `embedded PostgreSQL in .data/pg` : 'DATABASE_URL'}${applied ? ` (${applied} migrations applied)` : ''}`,
  `  Redis       ${config.redisUrl ? 'REDIS_URL' : 'none; in-process rate limiter'}`,
  '',
  '  Create a key: npm run --silent cli -- project create --name demo',
  '                npm run --silent cli -- key create --project <proj_id> --name dev',
  '',
];
process.stderr.write(lines.join('\n') + '\n');
