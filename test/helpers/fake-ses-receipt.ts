import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after } from 'node:test';

/**
 * A small SES v1 speaking the query protocol of @aws-sdk/client-ses for receipt rules: POST /
 * with a form body `Action=…&Version=2010-12-01&…`, XML answers. It keeps rule sets (one
 * active), and implements DescribeActiveReceiptRuleSet, CreateReceiptRuleSet,
 * SetActiveReceiptRuleSet, CreateReceiptRule, UpdateReceiptRule, DeleteReceiptRule and
 * DescribeReceiptRuleSet. `deny(action)` answers that action AccessDenied as IAM would.
 * Listens on 127.0.0.1, port 0; closed after the file.
 */
export type FakeRule = {
  Name: string;
  Enabled: boolean;
  ScanEnabled: boolean;
  TlsPolicy: string;
  Recipients: string[];
  Actions: { S3Action?: { BucketName: string; ObjectKeyPrefix?: string; TopicArn?: string } }[];
};

const xmlEscape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function ruleXml(r: FakeRule) {
  const actions = r.Actions.map((a) => a.S3Action
    ? `<member><S3Action><BucketName>${xmlEscape(a.S3Action.BucketName)}</BucketName>${a.S3Action.ObjectKeyPrefix !== undefined ? `<ObjectKeyPrefix>${xmlEscape(a.S3Action.ObjectKeyPrefix)}</ObjectKeyPrefix>` : ''}${a.S3Action.TopicArn ? `<TopicArn>${xmlEscape(a.S3Action.TopicArn)}</TopicArn>` : ''}</S3Action></member>`
    : '<member/>').join('');
  return `<member><Name>${xmlEscape(r.Name)}</Name><Enabled>${r.Enabled}</Enabled><ScanEnabled>${r.ScanEnabled}</ScanEnabled><TlsPolicy>${r.TlsPolicy}</TlsPolicy>` +
    `<Recipients>${r.Recipients.map((x) => `<member>${xmlEscape(x)}</member>`).join('')}</Recipients><Actions>${actions}</Actions></member>`;
}

/** `Rule.Recipients.member.1=…` and friends back into a rule. */
function ruleFrom(p: URLSearchParams): FakeRule {
  const list = (prefix: string) => [...p.keys()].filter((k) => k.startsWith(prefix) && /\.member\.\d+$/.test(k)).sort().map((k) => p.get(k)!);
  const actions: FakeRule['Actions'] = [];
  for (let i = 1; p.has(`Rule.Actions.member.${i}.S3Action.BucketName`) || [...p.keys()].some((k) => k.startsWith(`Rule.Actions.member.${i}.`)); i++) {
    const at = `Rule.Actions.member.${i}.S3Action.`;
    actions.push(p.has(`${at}BucketName`)
      ? { S3Action: { BucketName: p.get(`${at}BucketName`)!, ObjectKeyPrefix: p.get(`${at}ObjectKeyPrefix`) ?? undefined, TopicArn: p.get(`${at}TopicArn`) ?? undefined } }
      : {});
  }
  return {
    Name: p.get('Rule.Name') ?? '',
    Enabled: p.get('Rule.Enabled') === 'true',
    ScanEnabled: p.get('Rule.ScanEnabled') === 'true',
    TlsPolicy: p.get('Rule.TlsPolicy') ?? 'Optional',
    Recipients: list('Rule.Recipients.member.'),
    Actions: actions,
  };
}

export type FakeSesReceipt = Awaited<ReturnType<typeof startFakeSesReceipt>>;

export async function startFakeSesReceipt() {
  const sets = new Map<string, FakeRule[]>();
  let active: string | undefined;
  const denied = new Set<string>();
  const calls: { action: string; params: Record<string, string> }[] = [];

  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const p = new URLSearchParams(body);
      const action = p.get('Action') ?? '';
      calls.push({ action, params: Object.fromEntries(p) });
      const ok = (result: string) => {
        res.writeHead(200, { 'content-type': 'text/xml' });
        res.end(`<${action}Response xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><${action}Result>${result}</${action}Result><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata></${action}Response>`);
      };
      const fail = (status: number, code: string, message: string) => {
        res.writeHead(status, { 'content-type': 'text/xml' });
        res.end(`<ErrorResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><Error><Type>Sender</Type><Code>${code}</Code><Message>${xmlEscape(message)}</Message></Error><RequestId>fake</RequestId></ErrorResponse>`);
      };
      if (!req.headers.authorization?.startsWith('AWS4-HMAC-SHA256 ')) return fail(403, 'MissingAuthenticationToken', 'Request is missing Authentication Token');
      if (denied.has(action)) return fail(403, 'AccessDenied', `User: arn:aws:iam::123456789012:user/mailroom is not authorized to perform: ses:${action}`);
      const setName = p.get('RuleSetName') ?? '';
      switch (action) {
        case 'DescribeActiveReceiptRuleSet': {
          if (!active) return ok('');
          return ok(`<Metadata><Name>${xmlEscape(active)}</Name><CreatedTimestamp>2025-01-01T00:00:00Z</CreatedTimestamp></Metadata><Rules>${sets.get(active)!.map(ruleXml).join('')}</Rules>`);
        }
        case 'DescribeReceiptRuleSet': {
          const rules = sets.get(setName);
          if (!rules) return fail(400, 'RuleSetDoesNotExist', `Rule set does not exist: ${setName}`);
          return ok(`<Metadata><Name>${xmlEscape(setName)}</Name></Metadata><Rules>${rules.map(ruleXml).join('')}</Rules>`);
        }
        case 'CreateReceiptRuleSet': {
          if (sets.has(setName)) return fail(400, 'AlreadyExists', `Rule set already exists: ${setName}`);
          sets.set(setName, []);
          return ok('');
        }
        case 'SetActiveReceiptRuleSet': {
          if (setName && !sets.has(setName)) return fail(400, 'RuleSetDoesNotExist', `Rule set does not exist: ${setName}`);
          active = setName || undefined;
          return ok('');
        }
        case 'CreateReceiptRule':
        case 'UpdateReceiptRule': {
          const rules = sets.get(setName);
          if (!rules) return fail(400, 'RuleSetDoesNotExist', `Rule set does not exist: ${setName}`);
          const rule = ruleFrom(p);
          const at = rules.findIndex((r) => r.Name === rule.Name);
          if (action === 'CreateReceiptRule' && at >= 0) return fail(400, 'AlreadyExists', `Rule already exists: ${rule.Name}`);
          if (action === 'UpdateReceiptRule' && at < 0) return fail(400, 'RuleDoesNotExist', `Rule does not exist: ${rule.Name}`);
          const bucket = rule.Actions[0]?.S3Action?.BucketName;
          if (bucket?.startsWith('no-policy-')) return fail(400, 'InvalidS3Configuration', `Could not write to bucket: ${bucket}`);
          if (at >= 0) rules[at] = rule; else rules.push(rule);
          return ok('');
        }
        case 'DeleteReceiptRule': {
          const rules = sets.get(setName);
          if (!rules) return fail(400, 'RuleSetDoesNotExist', `Rule set does not exist: ${setName}`);
          const at = rules.findIndex((r) => r.Name === p.get('RuleName'));
          if (at >= 0) rules.splice(at, 1);
          return ok('');
        }
        default:
          return fail(400, 'InvalidAction', `Unknown action ${action}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const api = {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sets,
    calls,
    get active() { return active; },
    /** A set made and activated by someone else, as a customer's existing receiving would be. */
    activate(name: string, rules: FakeRule[] = []) { sets.set(name, rules); active = name; },
    deny(action: string) { denied.add(action); },
    allow(action: string) { denied.delete(action); },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  after(() => api.close());
  return api;
}
