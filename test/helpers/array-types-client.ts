// A process that queries through DATABASE_URL once, as the service's processes do, with the
// guard they install at boot. Prints `answered` or `failed <code>` for each try.
import { createSql, surviveArrayTypesQueryFailures } from '../../src/platform/db.ts';
import { createLogger } from '../../src/platform/log.ts';

surviveArrayTypesQueryFailures(createLogger('warn', 'array-types-client'));
const sql = createSql(process.env.DATABASE_URL!, { max: 1 });
for (let attempt = 0; attempt < 3; attempt++) {
  try {
    const [row] = await sql<[{ ok: number }]>`select 1 as ok`;
    process.stdout.write(`answered ${row.ok}\n`);
    break;
  } catch (err) {
    process.stdout.write(`failed ${(err as { code?: string }).code ?? (err as Error).message}\n`);
  }
}
// Long enough for a rejection nobody handled to surface before the process ends.
await new Promise((r) => setTimeout(r, 200));
await sql.end({ timeout: 1 });
