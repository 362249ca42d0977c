import type { z } from '@hono/zod-openapi';
import type { Config } from '../platform/config.ts';
import { beginRetryingDeadlocks, type Sql } from '../platform/db.ts';
import { isWellFormedId, newId } from '../platform/ids.ts';
import { ApiError, ValidationError, validationErrorFromZod } from '../http/errors.ts';
import * as q from './queries.ts';
import type { BroadcastContent, BroadcastRow } from './queries.ts';
import { CreateBroadcastRequest, SendBroadcastRequest, UpdateBroadcastRequest } from './schemas.ts';
import { parseScheduledAt } from './schedule.ts';
import { recordAudit } from '../audit/record.ts';
import type { RenderedTemplate, TemplateRenderer } from '../emails/template-send.ts';

/** Broadcasts as every surface (`/v1`, `/resend`) manages them; the routes only translate. */

export async function requireBroadcast(sql: Sql, projectId: string, id: string): Promise<BroadcastRow> {
  const b = isWellFormedId('broadcast', id) ? await q.getBroadcast(sql, projectId, id) : undefined;
  if (!b) throw new ApiError('not_found', 'Broadcast not found.');
  return b;
}

/** The segment and topic must be the project's own; named by id, checked with the project in the where. */
async function checkRefs(sql: Sql, projectId: string, content: BroadcastContent) {
  const problems = [];
  const [segment] = isWellFormedId('segment', content.segmentId)
    ? await sql`select 1 from segments where id = ${content.segmentId} and project_id = ${projectId}` : [];
  if (!segment) problems.push({ loc: ['body', 'segment_id'], msg: 'No segment of this project has that id', type: 'not_found', input: content.segmentId });
  if (content.topicId !== null) {
    const [topic] = isWellFormedId('topic', content.topicId)
      ? await sql`select 1 from topics where id = ${content.topicId} and project_id = ${projectId}` : [];
    if (!topic) problems.push({ loc: ['body', 'topic_id'], msg: 'No topic of this project has that id', type: 'not_found', input: content.topicId });
  }
  if (content.html === null && content.text === null) problems.push({ loc: ['body', 'html'], msg: 'A broadcast needs html or text', type: 'missing' });
  if (problems.length) throw new ValidationError(problems);
}

/**
 * The content a request makes, over the stored one when updating. With a template, the template's
 * rendered parts are the html and text, and its from, subject and reply_to fill what the request
 * leaves out; inline html or text given later replaces the template.
 */
function contentOf(body: z.infer<typeof UpdateBroadcastRequest>, base?: BroadcastRow, rendered?: RenderedTemplate): BroadcastContent {
  const has = (k: keyof typeof body) => Object.hasOwn(body, k);
  const given = body.reply_to === undefined ? undefined : Array.isArray(body.reply_to) ? body.reply_to : [body.reply_to];
  const inline = has('html') || has('text');
  const problems = [];
  const fromAddress = body.from ?? rendered?.from ?? base?.fromAddress;
  const subject = body.subject ?? rendered?.subject ?? base?.subject;
  if (!fromAddress) problems.push({ loc: ['body', 'from'], msg: 'Field required: the template has no from address', type: 'missing' });
  if (!subject) problems.push({ loc: ['body', 'subject'], msg: 'Field required: the template has no subject', type: 'missing' });
  else if (subject.length > 998) problems.push({ loc: ['body', 'subject'], msg: 'The rendered subject is longer than 998 characters', type: 'string_too_long', ctx: { max_length: 998 } });
  if (problems.length) throw new ValidationError(problems);
  return {
    name: body.name ?? base?.name ?? '',
    segmentId: body.segment_id ?? base!.segmentId,
    topicId: has('topic_id') ? body.topic_id ?? null : base?.topicId ?? null,
    fromAddress: fromAddress!,
    replyToAddresses: given ?? (rendered ? rendered.replyTo : base?.replyToAddresses ?? []),
    subject: subject!,
    previewText: has('preview_text') ? body.preview_text ?? null : base?.previewText ?? null,
    html: rendered ? rendered.html || null : has('html') ? body.html ?? null : base?.html ?? null,
    text: rendered ? rendered.text || null : has('text') ? body.text ?? null : base?.text ?? null,
    templateId: rendered ? rendered.templateId : inline ? null : base?.templateId ?? null,
    templateVersion: rendered ? rendered.version : inline ? null : base?.templateVersion ?? null,
  };
}

/** How a broadcast's template is rendered: the send path's renderer (§14.3), within the message limit. */
export type BroadcastTemplates = { render?: TemplateRenderer; limitBytes: number };
export const templatesFor = (deps: { renderTemplate?: TemplateRenderer; config: { emailMaxMessageBytes: number } }): BroadcastTemplates =>
  ({ render: deps.renderTemplate, limitBytes: deps.config.emailMaxMessageBytes });

/**
 * The published version `template` names, rendered with its variables: a template that does not
 * exist or was never published, or variables missing or of the wrong type, answer 422 at
 * `["body", "template", …]` as a templated send does.
 */
async function renderTemplateOf(sql: Sql, projectId: string, body: z.infer<typeof UpdateBroadcastRequest>, templates?: BroadcastTemplates) {
  if (!body.template) return undefined;
  if (!templates?.render) {
    throw new ValidationError([{ loc: ['body', 'template'], msg: 'Templates are not available on this surface', type: 'template_unavailable' }]);
  }
  const rendered = await templates.render(sql, projectId, { id: body.template.id, variables: body.template.variables ?? {} }, templates.limitBytes);
  if (!rendered.html && !rendered.text) {
    throw new ValidationError([{ loc: ['body', 'template'], msg: 'The template rendered neither html nor text', type: 'missing_content' }]);
  }
  return rendered;
}

const parse = <T extends z.ZodType>(schema: T, body: unknown): z.infer<T> => {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) throw validationErrorFromZod(parsed.error, 'json');
  return parsed.data;
};

/** What a broadcast's audit entry names: where it goes and what it is called, never its content. */
const audited = (b: BroadcastRow) => ({ name: b.name, segment_id: b.segmentId, topic_id: b.topicId, subject: b.subject });
/** The fields a request set, by name. */
const fieldsOf = (input: object) => Object.keys(input).filter((k) => (input as Record<string, unknown>)[k] !== undefined).sort();

export async function createBroadcast(sql: Sql, projectId: string, body: unknown, templates?: BroadcastTemplates) {
  const request = parse(CreateBroadcastRequest, body);
  const content = contentOf(request, undefined, await renderTemplateOf(sql, projectId, request, templates));
  await checkRefs(sql, projectId, content);
  return sql.begin(async (tx) => {
    const row = await q.insertBroadcast(tx, newId('broadcast'), projectId, content);
    await recordAudit(tx, { action: 'broadcast.created', projectId, target: { type: 'broadcast', id: row.id }, changes: audited(row) });
    return row;
  });
}

const notEditable = (b: BroadcastRow) => new ApiError('broadcast_not_editable', `The broadcast is ${b.status}; only a draft or scheduled broadcast can change.`);

/** `stored`: the broadcast as the caller has just read it, so it is not read again. */
export async function updateBroadcast(sql: Sql, projectId: string, id: string, body: unknown, templates?: BroadcastTemplates, stored?: BroadcastRow) {
  const b = stored ?? await requireBroadcast(sql, projectId, id);
  const input = parse(UpdateBroadcastRequest, body);
  const content = contentOf(input, b, await renderTemplateOf(sql, projectId, input, templates));
  await checkRefs(sql, projectId, content);
  const row = await sql.begin(async (tx) => {
    const updated = await q.updateBroadcast(tx, projectId, id, content);
    if (updated) {
      await recordAudit(tx, { action: 'broadcast.updated', projectId, target: { type: 'broadcast', id }, changes: { ...audited(updated), fields: fieldsOf(input) } });
    }
    return updated;
  });
  if (!row) throw notEditable(b);
  return row;
}

export async function deleteBroadcast(sql: Sql, projectId: string, id: string) {
  const b = await requireBroadcast(sql, projectId, id);
  const deleted = await sql.begin(async (tx) => {
    const row = await q.deleteBroadcast(tx, projectId, id);
    if (row) await recordAudit(tx, { action: 'broadcast.deleted', projectId, target: { type: 'broadcast', id }, changes: { name: b.name, status: b.status } });
    return row;
  });
  if (!deleted) throw notEditable(b);
  return b;
}

/** `send`: now, or at `scheduled_at`. Needs PUBLIC_BASE_URL, where every copy's unsubscribe link points. */
export async function sendBroadcast(config: Config, sql: Sql, projectId: string, id: string, body: unknown) {
  const { scheduled_at: when } = parse(SendBroadcastRequest, body);
  const at = when ? await parseScheduledAt(when) : null;
  const b = await requireBroadcast(sql, projectId, id);
  if (!config.publicBaseUrl) {
    throw new ValidationError([{ loc: ['body'], msg: 'Broadcasts need PUBLIC_BASE_URL: every copy carries a one-click unsubscribe link under it', type: 'public_base_url_required' }]);
  }
  const row = await sql.begin(async (tx) => {
    const started = await q.startBroadcast(tx, projectId, id, at);
    if (started) {
      await recordAudit(tx, {
        action: started.status === 'scheduled' ? 'broadcast.scheduled' : 'broadcast.send_started', projectId, target: { type: 'broadcast', id },
        changes: { ...audited(started), scheduled_at: started.scheduledAt?.toISOString() },
      });
    }
    return started;
  });
  if (!row) throw notEditable(b);
  return row;
}

export async function cancelBroadcast(sql: Sql, projectId: string, id: string) {
  const b = await requireBroadcast(sql, projectId, id);
  // Its copies not yet sent are canceled in one statement, in index order, while the worker's
  // shared commits may hold a few of them in another: a deadlock ends this try, not the request.
  const row = await beginRetryingDeadlocks(sql, async (tx) => {
    const canceled = await q.cancelBroadcast(tx, projectId, id);
    // `status` is where it went: `draft` for a canceled schedule, `canceled` for a stopped send.
    if (canceled) await recordAudit(tx, { action: 'broadcast.canceled', projectId, target: { type: 'broadcast', id }, changes: { name: canceled.name, status: canceled.status } });
    return canceled;
  });
  if (!row) throw new ApiError('broadcast_not_cancelable', `The broadcast is ${b.status}; only a scheduled or sending broadcast can be canceled.`);
  return row;
}

export async function duplicateBroadcast(sql: Sql, projectId: string, id: string) {
  await requireBroadcast(sql, projectId, id);
  // A copy is a new broadcast, recorded as made, naming what it copied (as a duplicated template is).
  return sql.begin(async (tx) => {
    const row = (await q.duplicateBroadcast(tx, projectId, id, newId('broadcast')))!;
    await recordAudit(tx, { action: 'broadcast.created', projectId, target: { type: 'broadcast', id: row.id }, changes: { ...audited(row), duplicate_of: id } });
    return row;
  });
}
