import type { PendingQuery, Row } from 'postgres';
import type { Sql, TxSql } from './db.ts';
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
  // Sent back to back on one connection: pipelined, then one COMMIT.
  (statements) => sql.begin((tx) => Promise.all(statements.map((make) => make(tx)))) as Promise<Row[][]>,
  { maxBatch: 64 },
  (make) => make(sql),
));
