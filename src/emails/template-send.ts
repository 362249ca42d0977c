import { ValidationError } from '../http/errors.ts';
import type { Sql } from '../platform/db.ts';
import type { ParsedSend, SendEmail, TemplateRef } from './validate.ts';

/**
 * What sending needs from templates, as an interface: the templates capability implements it
 * and the app wires it in, so this folder never imports the newer one.
 */
export type RenderedTemplate = {
  templateId: string;
  version: number;
  subject: string | null;
  html: string | null;
  text: string | null;
  from: string | null;
  replyTo: string[];
};

/**
 * Renders the published version of the template `ref.id` names (an id or an alias) in the
 * project. Every problem is a ValidationError whose `loc` starts `["body", "template", …]`, or
 * `["body"]` for a message too large.
 */
export type TemplateRenderer = (sql: Sql, projectId: string, ref: TemplateRef, limitBytes: number) => Promise<RenderedTemplate>;

/** A send ready to record: the request's own content, or its template rendered with its overrides. */
export type ReadySend = SendEmail & { template: { id: string; version: number } | null };

export async function renderSend(
  deps: { sql: Sql; renderTemplate?: TemplateRenderer; config: { emailMaxMessageBytes: number } },
  projectId: string,
  parsed: ParsedSend,
): Promise<ReadySend> {
  const { template, ...send } = parsed;
  if (!template) return { ...send, template: null };
  if (!deps.renderTemplate) {
    throw new ValidationError([{ loc: ['body', 'template'], msg: 'Templates are not available on this surface', type: 'template_unavailable' }]);
  }
  const rendered = await deps.renderTemplate(deps.sql, projectId, template, deps.config.emailMaxMessageBytes);
  const from = template.overrides.from ?? rendered.from;
  const subject = template.overrides.subject ?? rendered.subject;
  const problems = [];
  if (!from) problems.push({ loc: ['body', 'from'], msg: 'Field required: the template has no from address', type: 'missing' });
  if (subject === null || subject === undefined) problems.push({ loc: ['body', 'subject'], msg: 'Field required: the template has no subject', type: 'missing' });
  else if (subject.length > 998) problems.push({ loc: ['body', 'subject'], msg: 'The rendered subject is longer than 998 characters', type: 'string_too_long', ctx: { max_length: 998 } });
  if (!rendered.html && !rendered.text) problems.push({ loc: ['body', 'template'], msg: 'The template rendered neither html nor text', type: 'missing_content' });
  if (problems.length) throw new ValidationError(problems);
  return {
    ...send,
    from: from!,
    subject: subject!,
    replyTo: template.overrides.replyTo ?? rendered.replyTo,
    html: rendered.html || null,
    text: rendered.text || null,
    template: { id: rendered.templateId, version: rendered.version },
  };
}
