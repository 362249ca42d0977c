// A process with the guard the service's processes install at boot. REJECT=<message> leaves a
// rejection of that message unhandled; otherwise it queries DATABASE_URL once. Prints `answered`
// or `failed <code>` for each try of the query, and `carried on` if it lives to its end.
import { createSql } from '../../src/platform/db.ts';
import { surviveKnownLibraryRejections } from '../../src/platform/library-rejections.ts';
import { createLogger } from '../../src/platform/log.ts';

surviveKnownLibraryRejections(createLogger('warn', 'rejections-client'));
if (process.env.REJECT) {
  void Promise.reject(new Error(process.env.REJECT));
} else {
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
  await sql.end({ timeout: 1 });
}
// Long enough for a rejection nobody handled to surface before the process ends.
await new Promise((r) => setTimeout(r, 200));
process.stdout.write('carried on\n');
