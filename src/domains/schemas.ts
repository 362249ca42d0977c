import { z } from '@hono/zod-openapi';
import { dnsRecordsFor } from './dns-records.ts';

export const DOMAIN_STATUSES = ['pending', 'success', 'failed', 'temporary_failure', 'not_started'] as const;
export type DomainStatus = (typeof DOMAIN_STATUSES)[number];

export const DnsRecordResponse = z
  .object({
    record_type: z.string().openapi({ example: 'CNAME' }),
    name: z.string().openapi({ description: 'Fully qualified. Some DNS hosts want only the part before the domain.' }),
    value: z.string(),
  })
  .openapi('DnsRecordResponse');

export const DomainResponse = z
  .object({
    id: z.string(),
    value: z.string(),
    region: z.string(),
    verification_status: z.enum(DOMAIN_STATUSES).openapi({
      description: 'Sending from the domain is possible only at `success`. `pending` until SES finds the DKIM records (usually minutes, at most 72 hours); `failed` when it gave up; `temporary_failure` when a DNS problem interrupted a verified domain; `not_started` when SES has not begun (or no longer has the identity).',
    }),
    dkim_status: z.enum(DOMAIN_STATUSES).nullable().optional().openapi({ description: 'Easy DKIM status, same vocabulary.' }),
    mail_from_status: z.enum(DOMAIN_STATUSES).nullable().optional().openapi({ description: 'Custom MAIL FROM status; null when none is set.' }),
    dns_records: z.array(DnsRecordResponse).optional(),
    last_checked_at: z.string().datetime().nullable().optional().openapi({ description: 'When SES was last asked. The worker re-checks on a schedule.' }),
    open_tracking: z.boolean().openapi({ description: 'Adds a 1×1 pixel to the HTML of mail from this domain, recording `email.opened`. Off by default; a send may override it with `track_opens`.' }),
    click_tracking: z.boolean().openapi({ description: 'Rewrites the http(s) links of the HTML of mail from this domain through Mailroom, recording `email.clicked`. Off by default; a send may override it with `track_clicks`.' }),
    tracking_domain: z.string().nullable().openapi({ description: 'The host name tracked links and the pixel use (a CNAME to Mailroom, served over HTTPS by your proxy); null: PUBLIC_BASE_URL.' }),
    receiving: z.object({
      status: z.enum(['pending', 'active']),
      bucket: z.string(),
      prefix: z.string(),
      rule_set: z.string(),
      rule: z.string(),
      mx: z.object({ type: z.literal('MX'), name: z.string(), value: z.string(), priority: z.literal(10) }),
    }).nullable().openapi({ description: 'Inbound mail (POST /v1/domains/{id}/receiving); null when off.' }),
    created_at: z.string().datetime(),
  })
  .openapi('DomainResponse');

export const UpdateDomainRequest = z
  .object({
    open_tracking: z.boolean().optional(),
    click_tracking: z.boolean().optional(),
    tracking_domain: z.string().max(253).nullable().optional().openapi({
      description: 'A host name such as `track.example.com`, pointed at Mailroom with a CNAME; null removes it. ' +
        'Switching tracking on needs it or PUBLIC_BASE_URL, else 422 `tracking_unavailable`.',
      example: 'track.example.com',
    }),
  })
  .strict()
  .openapi('UpdateDomainRequest');

export const DomainList = z.object({ data: z.array(DomainResponse) }).openapi('DomainList');

export type DomainRow = {
  id: string;
  projectId: string;
  value: string;
  region: string;
  verificationStatus: DomainStatus;
  dkimStatus: DomainStatus | null;
  mailFromStatus: DomainStatus | null;
  mailFromDomain: string | null;
  dkimTokens: string[];
  lastCheckedAt: Date | null;
  openTracking: boolean;
  clickTracking: boolean;
  trackingDomain: string | null;
  receiving: z.infer<typeof DomainResponse>['receiving'];
  createdAt: Date;
};

export function toDomainResponse(row: DomainRow): z.infer<typeof DomainResponse> {
  return {
    id: row.id,
    value: row.value,
    region: row.region,
    verification_status: row.verificationStatus,
    dkim_status: row.dkimStatus,
    mail_from_status: row.mailFromStatus,
    dns_records: dnsRecordsFor(row),
    last_checked_at: row.lastCheckedAt ? row.lastCheckedAt.toISOString() : null,
    open_tracking: row.openTracking,
    click_tracking: row.clickTracking,
    tracking_domain: row.trackingDomain,
    receiving: row.receiving ?? null,
    created_at: row.createdAt.toISOString(),
  };
}
