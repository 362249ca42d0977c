import { Resolver } from 'node:dns/promises';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, ValidationError, errorResponses, requireId } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import type { Sql } from '../platform/db.ts';
import { recordAudit } from '../audit/record.ts';
import { getProviderConnection } from '../providers/connections.ts';
import { deleteReceiptRule, putReceiptRule, ReceiptRuleError, ruleName } from '../providers/ses-receipt.ts';

export const ReceivingSchema = z.object({
  status: z.enum(['pending', 'active']).openapi({ description: '`active` once the domain\'s MX record points at SES\'s inbound endpoint (checked by each set-up call).' }),
  bucket: z.string(),
  prefix: z.string(),
  rule_set: z.string(),
  rule: z.string(),
  mx: z.object({ type: z.literal('MX'), name: z.string(), value: z.string(), priority: z.literal(10) }),
}).openapi('DomainReceiving');
export type Receiving = z.infer<typeof ReceivingSchema>;

const Body = z.object({
  bucket: z.string().min(3).max(63).regex(/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/, 'an S3 bucket name: lower-case letters, digits, dots and hyphens'),
  prefix: z.string().max(1024).regex(/^[^\x00-\x1f\x7f]*$/, 'no control characters').optional(),
  topic_arn: z.string().max(256).regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$/, 'an SNS topic ARN such as arn:aws:sns:us-east-1:123456789012:ses-events'),
}).strict().openapi('EnableReceivingRequest');

const DomainParam = z.object({ domain_id: z.string().max(100) });

const enable = createRoute({
  method: 'post',
  path: '/v1/domains/{domain_id}/receiving',
  tags: ['domains'],
  summary: 'Receive mail at a domain',
  description:
    'Adds (or updates) the receipt rule `mailroom-<domain>` in the SES region\'s active receipt rule set (a set `mailroom` is made and ' +
    'activated only when none is active): the domain\'s mail is written to the bucket under the prefix and announced on the topic, ' +
    'which must deliver to the connection\'s events queue. Publish the `mx` record. An SES refusal answers 422 naming the AWS error ' +
    'and, for AccessDenied, the IAM action to grant. See docs/inbound.md.',
  security: SECURITY,
  request: { params: DomainParam, body: { required: true, content: { 'application/json': { schema: Body } } } },
  responses: {
    200: { description: 'The receiving set-up.', content: { 'application/json': { schema: z.object({ receiving: ReceivingSchema }).openapi('DomainReceivingResponse') } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

const disable = createRoute({
  method: 'delete',
  path: '/v1/domains/{domain_id}/receiving',
  tags: ['domains'],
  summary: 'Stop receiving mail at a domain',
  description: 'Removes the domain\'s receipt rule, and only it: the rule set, the bucket and its objects stay.',
  security: SECURITY,
  request: { params: DomainParam },
  responses: {
    200: { description: 'Receiving is off.', content: { 'application/json': { schema: z.object({ receiving: z.null() }).openapi('DomainReceivingOff') } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

/** Whether the domain's MX already points at SES's inbound endpoint; a failed lookup is "not yet". */
async function mxPointsAt(domain: string, host: string): Promise<boolean> {
  const resolver = new Resolver({ timeout: 2000, tries: 1 });
  try {
    return (await resolver.resolveMx(domain)).some((r) => r.exchange.toLowerCase().replace(/\.$/, '') === host);
  } catch {
    return false;
  }
}

function sesRefused(err: ReceiptRuleError): ValidationError {
  const msg = err.code === 'AccessDenied' || err.code === 'AccessDeniedException'
    ? `SES refused ${err.operation}: AccessDenied. Grant the connection's IAM user the action ${err.iamAction} (docs/inbound.md lists the policy).`
    : `SES refused ${err.operation}: ${err.code}: ${err.message}`;
  return new ValidationError([{ loc: ['body'], msg, type: 'ses_error' }]);
}

async function loadDomain(sql: Sql, projectId: string, domainId: string) {
  const [row] = await sql<[{ id: string; value: string; region: string; verificationStatus: string; receiving: Receiving | null }?]>`
    select id, value, region, verification_status, receiving from domains where id = ${domainId} and project_id = ${projectId}`;
  if (!row) throw new ApiError('not_found', 'Domain not found.');
  return row;
}

export function registerReceivingSetupRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(enable, async (c) => {
    const { sql, config } = c.var.deps;
    const projectId = c.var.projectId;
    const domain = await loadDomain(sql, projectId, requireId('domain', c.req.valid('param').domain_id, 'Domain not found.'));
    const body = c.req.valid('json');
    const conn = await getProviderConnection(sql, config, projectId);
    if (!conn) throw new ValidationError([{ loc: ['path', 'domain_id'], msg: 'The project is not connected to SES; receiving goes through the connection\'s SES account', type: 'not_connected' }]);
    if (domain.verificationStatus !== 'success') {
      throw new ValidationError([{ loc: ['path', 'domain_id'], msg: `The domain is ${domain.verificationStatus}; receiving needs a verified domain`, type: 'domain_not_verified' }]);
    }
    const prefix = body.prefix ?? '';
    let ruleSet: string;
    try {
      ruleSet = await putReceiptRule(config, conn, domain.region, { domain: domain.value, bucket: body.bucket, prefix, topicArn: body.topic_arn });
    } catch (err) {
      if (err instanceof ReceiptRuleError) throw sesRefused(err);
      throw err;
    }
    const host = `inbound-smtp.${domain.region}.amazonaws.com`;
    const receiving: Receiving = {
      status: (await mxPointsAt(domain.value, host)) ? 'active' : 'pending',
      bucket: body.bucket,
      prefix,
      rule_set: ruleSet,
      rule: ruleName(domain.value),
      mx: { type: 'MX', name: domain.value, value: host, priority: 10 },
    };
    await sql.begin(async (tx) => {
      await tx`update domains set receiving = ${tx.json(receiving)} where id = ${domain.id} and project_id = ${projectId}`;
      await recordAudit(tx, { action: 'domain.receiving_enabled', projectId, target: { type: 'domain', id: domain.id }, changes: { name: domain.value, bucket: body.bucket, prefix } });
    });
    return c.json({ receiving }, 200);
  });

  app.openapi(disable, async (c) => {
    const { sql, config } = c.var.deps;
    const projectId = c.var.projectId;
    const domain = await loadDomain(sql, projectId, requireId('domain', c.req.valid('param').domain_id, 'Domain not found.'));
    if (domain.receiving) {
      const conn = await getProviderConnection(sql, config, projectId);
      if (conn) {
        try {
          await deleteReceiptRule(config, conn, domain.region, domain.receiving.rule_set, domain.value);
        } catch (err) {
          if (err instanceof ReceiptRuleError) throw sesRefused(err);
          throw err;
        }
      }
      await sql.begin(async (tx) => {
        await tx`update domains set receiving = null where id = ${domain.id} and project_id = ${projectId}`;
        await recordAudit(tx, { action: 'domain.receiving_disabled', projectId, target: { type: 'domain', id: domain.id }, changes: { name: domain.value } });
      });
    }
    return c.json({ receiving: null }, 200);
  });
}
