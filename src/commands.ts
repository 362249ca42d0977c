import { parseArgs } from 'node:util';
import type { Config } from './platform/config.ts';
import type { Sql } from './platform/db.ts';
import { migrateDatabase } from './platform/migrate.ts';
import { createProject } from './projects/service.ts';
import { ServiceError } from './platform/errors.ts';
import { createApiKey, revokeApiKey } from './keys/service.ts';
import { disconnectProvider } from './providers/connections.ts';
import { connectSesAccount } from './providers/quota.ts';
import { addDomain, checkDomain, updateDomainTracking } from './domains/service.ts';
import { toDomainResponse } from './domains/schemas.ts';
import { createEndpoint, parseEventTypes, rotateEndpointSecret, updateEndpoint } from './webhooks/service.ts';
import { toEndpointResponse } from './webhooks/schemas.ts';
import { reencodeLegacySecrets } from './webhooks/secret.ts';
import { applyRetention } from './retention/apply.ts';
import { rebuildStats } from './stats/rebuild.ts';
import { TEMPLATE_COMMANDS } from './templates/commands.ts';
import { AUDIT_COMMANDS } from './audit/commands.ts';
import { REPUTATION_COMMANDS } from './reputation/commands.ts';
import { registerOwner, SignupError } from '../dashboard/owner.ts';
import { MEMBER_COMMANDS } from './members/commands.ts';
import { CONTACT_IMPORT_COMMANDS } from './contacts/imports/commands.ts';

export type CommandContext = { config: Config; sql: () => Sql };
type Options = Record<string, { type: 'string' | 'boolean' }>;
export type Command = {
  usage: string;
  options?: Options;
  run(ctx: CommandContext, values: Record<string, string | boolean | undefined>, positionals: string[]): Promise<unknown>;
};

/** The password from standard input (never an argument, which `ps` and shell history would show), less its final newline. */
async function readPassword(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Password: ');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > 4096) throw new ServiceError('invalid_input', 'the password on standard input is longer than 4096 bytes');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

/** A listing the CLI prints one JSON object a line, rather than as one object. */
export class JsonLines {
  constructor(readonly lines: unknown[]) {}
}

/** Reads a required option or fails with the usage line. */
export function required(values: Record<string, unknown>, name: string, usage: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new ServiceError('invalid_input', `--${name} is required: ${usage}`);
  return v;
}

/**
 * The operator CLI's commands. Each calls the same service function the dashboard uses and
 * returns the JSON object to print.
 */
export const COMMANDS: Record<string, Command> = {
  migrate: {
    usage: 'migrate',
    async run(ctx) {
      const result = await migrateDatabase(ctx.config.databaseUrl);
      await reencodeLegacySecrets(ctx.sql(), ctx.config);
      return result;
    },
  },
  'project create': {
    usage: 'project create --name NAME',
    options: { name: { type: 'string' } },
    async run(ctx, v) {
      const p = await createProject(ctx.sql(), required(v, 'name', this.usage));
      return { id: p.id, name: p.name, created_at: p.createdAt.toISOString() };
    },
  },
  'key create': {
    usage: 'key create --project P --name NAME [--permission full|sending]',
    options: { project: { type: 'string' }, name: { type: 'string' }, permission: { type: 'string' } },
    async run(ctx, v) {
      const k = await createApiKey(ctx.sql(), required(v, 'project', this.usage), required(v, 'name', this.usage), (v.permission as string | undefined) ?? 'full');
      return { id: k.id, key: k.key, key_prefix: k.keyPrefix, name: k.name, permission: k.permission, project: k.projectId, created_at: k.createdAt.toISOString() };
    },
  },
  'key revoke': {
    usage: 'key revoke KEY_ID',
    async run(ctx, _v, args) {
      if (!args[0]) throw new ServiceError('invalid_input', `KEY_ID is required: ${this.usage}`);
      const k = await revokeApiKey(ctx.sql(), undefined, args[0]);
      return { id: k.id, revoked_at: k.revokedAt!.toISOString() };
    },
  },
  'domain add': {
    usage: 'domain add --project P --domain NAME [--region R] [--mail-from SUBDOMAIN]',
    options: { project: { type: 'string' }, domain: { type: 'string' }, region: { type: 'string' }, 'mail-from': { type: 'string' } },
    async run(ctx, v) {
      const d = await addDomain(ctx.sql(), ctx.config, required(v, 'project', this.usage), required(v, 'domain', this.usage), {
        region: v.region as string | undefined,
        mailFrom: v['mail-from'] as string | undefined,
      });
      return toDomainResponse(d);
    },
  },
  'domain check': {
    usage: 'domain check DOMAIN_ID',
    async run(ctx, _v, args) {
      if (!args[0]) throw new ServiceError('invalid_input', `DOMAIN_ID is required: ${this.usage}`);
      return toDomainResponse(await checkDomain(ctx.sql(), ctx.config, undefined, args[0]));
    },
  },
  'domain update': {
    usage: 'domain update DOMAIN_ID [--open-tracking on|off] [--click-tracking on|off] [--tracking-domain HOST|none]',
    options: { 'open-tracking': { type: 'string' }, 'click-tracking': { type: 'string' }, 'tracking-domain': { type: 'string' } },
    async run(ctx, v, args) {
      if (!args[0]) throw new ServiceError('invalid_input', `DOMAIN_ID is required: ${this.usage}`);
      const onOff = (name: string) => {
        const value = v[name];
        if (value === undefined) return undefined;
        if (value === 'on' || value === 'off') return value === 'on';
        throw new ServiceError('invalid_input', `--${name} takes on or off: ${this.usage}`);
      };
      const host = v['tracking-domain'] as string | undefined;
      return toDomainResponse(await updateDomainTracking(ctx.sql(), ctx.config, undefined, args[0], {
        openTracking: onOff('open-tracking'),
        clickTracking: onOff('click-tracking'),
        trackingDomain: host === undefined ? undefined : host === 'none' || host === '' ? null : host,
      }));
    },
  },
  'webhook create': {
    usage: 'webhook create --project P --url URL [--events TYPE,TYPE]',
    options: { project: { type: 'string' }, url: { type: 'string' }, events: { type: 'string' } },
    async run(ctx, v) {
      const eventTypes = typeof v.events === 'string' ? parseEventTypes(v.events) : undefined;
      const { endpoint, secret } = await createEndpoint(ctx.sql(), ctx.config, required(v, 'project', this.usage), required(v, 'url', this.usage), { eventTypes });
      // The only time the signing secret is printed; afterwards the dashboard reveals it.
      return { ...toEndpointResponse(endpoint), secret };
    },
  },
  'webhook update': {
    usage: 'webhook update WH_ID [--url URL] [--events TYPE,TYPE|all] [--enable | --disable]',
    options: { url: { type: 'string' }, events: { type: 'string' }, enable: { type: 'boolean' }, disable: { type: 'boolean' } },
    async run(ctx, v, args) {
      if (!args[0]) throw new ServiceError('invalid_input', `WH_ID is required: ${this.usage}`);
      if (v.enable && v.disable) throw new ServiceError('invalid_input', `--enable and --disable exclude each other: ${this.usage}`);
      const enabled = v.enable ? true : v.disable ? false : undefined;
      const eventTypes = typeof v.events === 'string' ? parseEventTypes(v.events) : undefined;
      return toEndpointResponse(await updateEndpoint(ctx.sql(), ctx.config, undefined, args[0], { url: v.url as string | undefined, enabled, eventTypes }));
    },
  },
  'webhook rotate-secret': {
    usage: 'webhook rotate-secret WH_ID',
    async run(ctx, _v, args) {
      if (!args[0]) throw new ServiceError('invalid_input', `WH_ID is required: ${this.usage}`);
      const { endpoint, secret } = await rotateEndpointSecret(ctx.sql(), ctx.config, undefined, args[0]);
      // The new secret is printed this once, as at creation.
      return { ...toEndpointResponse(endpoint), secret };
    },
  },
  'provider connect': {
    usage: 'provider connect --project P --region R --access-key-id ID --secret-access-key S [--configuration-set N] [--events-queue-url U] [--sns-topic-arn A] [--max-send-rate N]',
    options: {
      project: { type: 'string' }, region: { type: 'string' }, 'access-key-id': { type: 'string' },
      'secret-access-key': { type: 'string' }, 'configuration-set': { type: 'string' },
      'events-queue-url': { type: 'string' }, 'sns-topic-arn': { type: 'string' },
      'max-send-rate': { type: 'string' },
    },
    run(ctx, v) {
      const cap = v['max-send-rate'] as string | undefined;
      if (cap !== undefined && !/^\d+(\.\d+)?$/.test(cap)) throw new ServiceError('invalid_input', `--max-send-rate takes a positive number of messages per second: ${this.usage}`);
      return connectSesAccount(ctx.sql(), ctx.config, {
        projectId: required(v, 'project', this.usage),
        region: required(v, 'region', this.usage),
        accessKeyId: required(v, 'access-key-id', this.usage),
        secretAccessKey: required(v, 'secret-access-key', this.usage),
        configurationSet: v['configuration-set'] as string | undefined,
        eventsQueueUrl: v['events-queue-url'] as string | undefined,
        snsTopicArn: v['sns-topic-arn'] as string | undefined,
        maxSendRate: cap === undefined ? undefined : Number(cap),
      });
    },
  },
  'retention run': {
    usage: 'retention run',
    async run(ctx) {
      const { emails_removed, bodies_purged } = await applyRetention(ctx.sql(), ctx.config);
      return { emails_removed, bodies_purged };
    },
  },
  'stats rebuild': {
    usage: 'stats rebuild',
    async run(ctx) {
      return { rebuilt: await rebuildStats(ctx.sql()) };
    },
  },
  'owner create': {
    usage: 'owner create --email EMAIL (the password on standard input)',
    options: { email: { type: 'string' } },
    async run(ctx, v) {
      const email = required(v, 'email', this.usage);
      const password = await readPassword();
      try {
        const owner = await registerOwner(ctx.sql(), email, password);
        return { id: owner.id, email: owner.email };
      } catch (err) {
        if (err instanceof SignupError) throw new ServiceError('invalid_input', err.message);
        throw err;
      }
    },
  },
  'provider disconnect': {
    usage: 'provider disconnect --project P',
    options: { project: { type: 'string' } },
    run(ctx, v) {
      return disconnectProvider(ctx.sql(), required(v, 'project', this.usage));
    },
  },
  ...TEMPLATE_COMMANDS,
  ...AUDIT_COMMANDS,
  ...MEMBER_COMMANDS,
  ...REPUTATION_COMMANDS,
  ...CONTACT_IMPORT_COMMANDS,
};

/** Finds the longest command name the arguments start with, and parses the rest. */
export function resolveCommand(argv: string[]) {
  for (const words of [2, 1]) {
    const name = argv.slice(0, words).join(' ');
    const command = COMMANDS[name];
    if (!command) continue;
    try {
      const { values, positionals } = parseArgs({ args: argv.slice(words), options: command.options ?? {}, allowPositionals: true, strict: true });
      return { name, command, values: values as Record<string, string | boolean | undefined>, positionals };
    } catch (err) {
      throw new ServiceError('invalid_input', `${(err as Error).message.split('\n')[0]}; usage: ${command.usage}`);
    }
  }
  throw new ServiceError('invalid_input', `unknown command "${argv.join(' ')}"; commands: ${Object.values(COMMANDS).map((c) => c.usage.split(' --')[0]).join(', ')}`);
}
