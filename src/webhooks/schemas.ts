import { z } from '@hono/zod-openapi';

export const WebhookEndpointResponse = z
  .object({
    id: z.string(),
    url: z.string(),
    status: z.enum(['active', 'disabled_by_user', 'disabled_after_failures']),
    consecutive_failures: z.number().int().default(0),
    event_types: z.array(z.string()).nullable().openapi({
      description: 'The event types delivered to this endpoint; null: every type. Set with the CLI (`--events`) or the dashboard.',
      example: ['email.opened', 'email.clicked'],
    }),
    created_at: z.string().datetime(),
  })
  .openapi('WebhookEndpointResponse');

export const WebhookEndpointList = z.object({ data: z.array(WebhookEndpointResponse) }).openapi('WebhookEndpointList');

export const WebhookDeliveryResponse = z
  .object({
    id: z.string(),
    event_id: z.string(),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempt_count: z.number().int(),
    created_at: z.string().datetime(),
    last_attempt_at: z.string().datetime().nullable().optional(),
    next_attempt_at: z.string().datetime().nullable().optional(),
    response_status: z.number().int().nullable().optional(),
    error: z.string().nullable().optional(),
  })
  .openapi('WebhookDeliveryResponse');

export const WebhookDeliveryList = z.object({ data: z.array(WebhookDeliveryResponse) }).openapi('WebhookDeliveryList');

export type EndpointRow = {
  id: string;
  projectId: string;
  url: string;
  status: 'active' | 'disabled_by_user' | 'disabled_after_failures';
  consecutiveFailures: number;
  /** Null: every type. */
  eventTypes: string[] | null;
  createdAt: Date;
};

export type DeliveryRow = {
  id: string;
  eventId: string;
  status: 'pending' | 'delivered' | 'failed';
  attemptCount: number;
  createdAt: Date;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  responseStatus: number | null;
  error: string | null;
};

/** The signing secret is deliberately absent: it is read in the dashboard only. */
export function toEndpointResponse(row: EndpointRow): z.infer<typeof WebhookEndpointResponse> {
  return {
    id: row.id,
    url: row.url,
    status: row.status,
    consecutive_failures: row.consecutiveFailures,
    event_types: row.eventTypes,
    created_at: row.createdAt.toISOString(),
  };
}

export function toDeliveryResponse(row: DeliveryRow): z.infer<typeof WebhookDeliveryResponse> {
  return {
    id: row.id,
    event_id: row.eventId,
    status: row.status,
    attempt_count: row.attemptCount,
    created_at: row.createdAt.toISOString(),
    last_attempt_at: row.lastAttemptAt?.toISOString() ?? null,
    next_attempt_at: row.status === 'pending' ? (row.nextAttemptAt?.toISOString() ?? null) : null,
    response_status: row.responseStatus,
    error: row.error,
  };
}
