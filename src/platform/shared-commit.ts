import type { PendingQuery, Row } from 'postgres';
import { endsConnection, withReservedConnection, type Sql, type TxSql } from './db.ts';
import { GroupCommit, groupCommitPerPool } from './group-commit.ts';

/** A statement built on whichever connection runs it: a shared transaction, or its own. */
export type Statement<T extends Row> = (sql: Sql | TxSql) => PendingQuery<T[]>;

/**
 * Runs one self-contained statement in a transaction shared with the statements other jobs of
 * this process submit at the same moment, so they pay for one commit (one WAL flush) together.
 * Each statement must stand on its own, as if it were alone: a conditional UPDATE … RETURNING
 * that a second run leaves unchanged. If the shared transaction fails, each statement runs again
 * in its own, so one failure never fails the others. Resolves with the statement's rows, only
 * after they are committed.
 */
export function commitShared<T extends Row>(sql: Sql, statement: Statement<T>): Promise<T[]> {
  return committerFor(sql).run(statement as unknown as Statement<Row>) as Promise<T[]>;
}

const committerFor = groupCommitPerPool((sql) => new GroupCommit<Statement<Row>, Row[]>(
  (statements) => (statements.length === 1 ? Promise.all([statements[0]!(sql)]) : pipelinedTransaction(sql, statements)),
  { maxBatch: 64 },
  (make) => runAlone(sql, make),
));

/**
 * One statement in its own transaction, after its shared one failed. A statement stands on its
 * own, so one that failed because its connection ended runs once more: after a connection ends
 * with a FATAL error, postgres.js 3.4.9 can hand that error to the first query it sends once
 * reconnected, which never ran.
 */
async function runAlone(sql: Sql, make: Statement<Row>): Promise<Row[]> {
  try {
    return await make(sql);
  } catch (err) {
    if (!endsConnection(err)) throw err;
    return make(sql);
  }
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };
const settle = <T>(query: PromiseLike<T>): Promise<Settled<T>> =>
  Promise.resolve(query).then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));

/**
 * BEGIN, the statements and COMMIT written back to back on one connection, so the transaction
 * costs one round trip (sql.begin waits for its BEGIN, then for its COMMIT). When a statement
 * fails, PostgreSQL aborts the transaction and answers the COMMIT with a rollback: this throws
 * the first error, and the statements run again one by one.
 */
async function pipelinedTransaction(sql: Sql, statements: Statement<Row>[]): Promise<Row[][]> {
  return withReservedConnection(sql, async (connection, met) => {
    // A query is written when first awaited: settle() awaits each in the order they must run.
    const begun = settle(connection.unsafe('begin'));
    const ran = statements.map((make) => settle(make(connection)));
    const committed = settle(connection.unsafe('commit'));
    const results = await Promise.all(ran);
    const failures = [await begun, ...results, await committed].filter((o): o is { ok: false; error: unknown } => !o.ok);
    failures.forEach((o) => met(o.error));
    if (failures.length) throw failures[0]!.error;
    return results.map((o) => (o as { value: Row[] }).value);
  });
}
