import type { Sql } from '../platform/db.ts';
import type { DomainRow } from './schemas.ts';

export async function listDomains(sql: Sql, projectId: string) {
  return sql<DomainRow[]>`
    select id, project_id, value, region, verification_status, dkim_status, mail_from_status,
           mail_from_domain, dkim_tokens, last_checked_at, created_at
    from domains where project_id = ${projectId} order by id`;
}
