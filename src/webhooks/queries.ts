import type { Sql } from '../platform/db.ts';
import type { DeliveryRow, EndpointRow } from './schemas.ts';

export async function listEndpoints(sql: Sql, projectId: string) {
  return sql<EndpointRow[]>`
    select id, project_id, url, status, consecutive_failures, created_at
    from webhook_endpoints where project_id = ${projectId} order by id`;
}

export async function getEndpoint(sql: Sql, projectId: string, endpointId: string) {
  const [row] = await sql<[EndpointRow?]>`
    select id, project_id, url, status, consecutive_failures, created_at
    from webhook_endpoints where id = ${endpointId} and project_id = ${projectId}`;
  return row;
}

export const RECENT_DELIVERIES = 100;

export async function listRecentDeliveries(sql: Sql, projectId: string, endpointId: string) {
  return sql<DeliveryRow[]>`
    select id, event_id, status, attempt_count, created_at, last_attempt_at, next_attempt_at, response_status, error
    from webhook_deliveries
    where project_id = ${projectId} and endpoint_id = ${endpointId}
    order by id desc
    limit ${RECENT_DELIVERIES}`;
}
