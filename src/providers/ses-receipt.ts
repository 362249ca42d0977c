import type { ReceiptRule } from '@aws-sdk/client-ses';
import type { Config } from '../platform/config.ts';
import type { ProviderConnection } from './connections.ts';
import { loadOnce } from '../platform/load-once.ts';
import { AWS_DEADLINES, awsRequestHandler } from './aws-http.ts';

/** The rule set Mailroom makes and activates, only when the region has none active. */
export const MAILROOM_RULE_SET = 'mailroom';

export type ReceiptRuleInput = { domain: string; bucket: string; prefix: string; topicArn: string };

/** An SES refusal, with the operation that was refused and the IAM action it needs. */
export class ReceiptRuleError extends Error {
  constructor(readonly code: string, readonly operation: string, message: string) {
    super(message);
  }
  /** Receipt rule operations are authorised by the IAM action of the same name. */
  get iamAction() { return `ses:${this.operation}`; }
}

export const ruleName = (domain: string) => `mailroom-${domain}`;

/** SES v1 is used for receipt rules alone, so the API loads its client on the first set-up call. */
const sdk = loadOnce(() => import('@aws-sdk/client-ses'));

async function client(config: Config, conn: ProviderConnection, region: string) {
  const { SESClient } = await sdk();
  return new SESClient({
    region,
    credentials: { accessKeyId: conn.accessKeyId, secretAccessKey: conn.secretAccessKey },
    ...(config.awsEndpointSes ? { endpoint: config.awsEndpointSes } : {}),
    maxAttempts: 2,
    requestHandler: awsRequestHandler(AWS_DEADLINES.ses),
  });
}

async function call<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const e = err as { name?: string; Code?: string; message?: string };
    throw new ReceiptRuleError(e.Code ?? e.name ?? 'UnknownError', operation, e.message ?? String(err));
  }
}

/**
 * Receipt rules are SES's v1 API. The rule goes into the region's active rule set; a set
 * `mailroom` is made and activated only when none is active, so a customer's own receiving
 * rules keep working. A second call updates the same rule. Answers the rule set's name.
 */
export async function putReceiptRule(config: Config, conn: ProviderConnection, region: string, input: ReceiptRuleInput): Promise<string> {
  const ses = await client(config, conn, region);
  const { CreateReceiptRuleCommand, CreateReceiptRuleSetCommand, DescribeActiveReceiptRuleSetCommand, SetActiveReceiptRuleSetCommand, UpdateReceiptRuleCommand } = await sdk();
  try {
    const active = await call('DescribeActiveReceiptRuleSet', () => ses.send(new DescribeActiveReceiptRuleSetCommand({})));
    let ruleSet = active.Metadata?.Name;
    if (!ruleSet) {
      ruleSet = MAILROOM_RULE_SET;
      await call('CreateReceiptRuleSet', () => ses.send(new CreateReceiptRuleSetCommand({ RuleSetName: MAILROOM_RULE_SET }))).catch((err: ReceiptRuleError) => {
        if (err.code !== 'AlreadyExists') throw err; // made by an earlier call that stopped before activating it
      });
      await call('SetActiveReceiptRuleSet', () => ses.send(new SetActiveReceiptRuleSetCommand({ RuleSetName: MAILROOM_RULE_SET })));
    }
    const rule: ReceiptRule = {
      Name: ruleName(input.domain),
      Enabled: true,
      ScanEnabled: true,
      TlsPolicy: 'Optional',
      Recipients: [input.domain],
      Actions: [{ S3Action: { BucketName: input.bucket, ObjectKeyPrefix: input.prefix, TopicArn: input.topicArn } }],
    };
    const exists = (active.Rules ?? []).some((r) => r.Name === rule.Name);
    if (exists) await call('UpdateReceiptRule', () => ses.send(new UpdateReceiptRuleCommand({ RuleSetName: ruleSet, Rule: rule })));
    else await call('CreateReceiptRule', () => ses.send(new CreateReceiptRuleCommand({ RuleSetName: ruleSet, Rule: rule })));
    return ruleSet;
  } finally {
    ses.destroy();
  }
}

/** Removes the domain's rule from the set it was put in, and nothing else; a rule already gone is fine. */
export async function deleteReceiptRule(config: Config, conn: ProviderConnection, region: string, ruleSet: string, domain: string) {
  const ses = await client(config, conn, region);
  const { DeleteReceiptRuleCommand } = await sdk();
  try {
    await call('DeleteReceiptRule', () => ses.send(new DeleteReceiptRuleCommand({ RuleSetName: ruleSet, RuleName: ruleName(domain) }))).catch((err: ReceiptRuleError) => {
      if (err.code !== 'RuleSetDoesNotExist') throw err;
    });
  } finally {
    ses.destroy();
  }
}
