import { ConfigError, loadConfig, usesDevDatabase } from './platform/config.ts';
import { createSql, type Sql } from './platform/db.ts';
import { devSecretKey, startDevDatabase } from './platform/embedded-db.ts';
import { ServiceError } from './platform/errors.ts';
import { JsonLines, resolveCommand } from './commands.ts';
import { actingAs, cliActor } from './audit/actor.ts';

/** One JSON object on stdout; on error one line on stderr and exit 1. */
async function main() {
  const { command, values, positionals } = resolveCommand(process.argv.slice(2));
  // Without DATABASE_URL, work on the `npm run dev` database and secret under .data/.
  const useDev = usesDevDatabase();
  const dev = useDev ? await startDevDatabase() : undefined;
  const config = loadConfig(undefined, {
    requireRedis: false,
    dev: useDev,
    databaseUrl: dev?.url,
    secretKey: useDev ? await devSecretKey() : undefined,
  });
  let sql: Sql | undefined;
  try {
    // Changes a command makes are recorded as the CLI's (src/audit).
    const result = await actingAs(cliActor(), () => command.run({ config, sql: () => (sql ??= createSql(config.databaseUrl, { max: 2, appName: 'mailroom-cli' })) }, values, positionals));
    process.stdout.write(result instanceof JsonLines ? result.lines.map((l) => `${JSON.stringify(l)}\n`).join('') : `${JSON.stringify(result)}\n`);
  } finally {
    await sql?.end({ timeout: 2 });
    await dev?.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    const known = err instanceof ServiceError || err instanceof ConfigError;
    const message = known ? err.message : (err as { code?: string }).code === 'ECONNREFUSED' ? 'cannot reach the database (DATABASE_URL)' : `${(err as Error).message ?? err}`;
    process.stderr.write(`mailroom: ${message.split('\n')[0]}\n`);
    process.exit(1);
  },
);
