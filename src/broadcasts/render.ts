/**
 * Per-recipient placeholders of a broadcast's subject, html and text (§23.5), in Resend's forms:
 * `{{{contact.first_name|there}}}`, `{{{contact.<property>|fallback}}}`, the older
 * `{{{FIRST_NAME|there}}}` and `{{{<PROPERTY>|fallback}}}`, `{{{EMAIL}}}` and
 * `{{{RESEND_UNSUBSCRIBE_URL}}}`. One linear pass per part, stopped as soon as the output passes
 * the message limit (§18.1): no template code runs, so nothing a contact holds can make it slow.
 */

export type RecipientContact = {
  id: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  properties: Record<string, string | number>;
};

/** A declared contact property's fallback, used when neither the contact nor the placeholder gives a value. */
export type PropertyFallbacks = Record<string, string | number | null>;

export class BroadcastTooLarge extends Error {}

const PLACEHOLDER = /\{\{\{\s*([A-Za-z0-9_]{1,64}(?:\.[A-Za-z0-9_]{1,64})?)\s*(?:\|([^{}|]{0,500}))?\}\}\}/g;
const UNSUBSCRIBE_NAMES = new Set(['RESEND_UNSUBSCRIBE_URL', 'UNSUBSCRIBE_URL', 'unsubscribe_url']);
const LEGACY: Record<string, 'firstName' | 'lastName' | 'email'> = { FIRST_NAME: 'firstName', LAST_NAME: 'lastName', EMAIL: 'email' };

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/** Whether content carries its own unsubscribe link placeholder; without one a footer is added. */
export function hasUnsubscribePlaceholder(content: string | null): boolean {
  if (!content) return false;
  for (const m of content.matchAll(PLACEHOLDER)) if (UNSUBSCRIBE_NAMES.has(m[1]!)) return true;
  return false;
}

function valueOf(name: string, given: string | undefined, contact: RecipientContact, fallbacks: PropertyFallbacks, unsubscribeUrl: string): string {
  if (UNSUBSCRIBE_NAMES.has(name)) return unsubscribeUrl;
  let own: string | number | null | undefined;
  let key = name;
  if (name.startsWith('contact.')) {
    key = name.slice('contact.'.length);
    own = key === 'first_name' ? contact.firstName : key === 'last_name' ? contact.lastName : key === 'email' ? contact.email : contact.properties[key];
  } else if (LEGACY[name]) {
    own = contact[LEGACY[name]];
  } else {
    own = contact.properties[name];
  }
  if (own !== null && own !== undefined && own !== '') return String(own);
  // The placeholder's own fallback wins over the property's declared one.
  if (given !== undefined) return given.trim();
  const declared = fallbacks[key];
  return declared === null || declared === undefined ? '' : String(declared);
}

/** One part for one recipient; html values are escaped, subject and text are not. */
export function renderPart(source: string, kind: 'subject' | 'html' | 'text', contact: RecipientContact, fallbacks: PropertyFallbacks, unsubscribeUrl: string, limitBytes: number): string {
  let out = '';
  let at = 0;
  for (const m of source.matchAll(PLACEHOLDER)) {
    const value = valueOf(m[1]!, m[2], contact, fallbacks, unsubscribeUrl);
    out += source.slice(at, m.index) + (kind === 'html' ? escapeHtml(value) : value);
    at = m.index + m[0].length;
    if (out.length > limitBytes) throw new BroadcastTooLarge(`the ${kind} is over the message limit for ${contact.email}`);
  }
  out += source.slice(at);
  if (kind === 'subject') out = out.replace(/[\r\n]+/g, ' ');
  if (Buffer.byteLength(out) > limitBytes) throw new BroadcastTooLarge(`the ${kind} is over the message limit for ${contact.email}`);
  return out;
}

/** The visible link Mailroom adds when the content has none of its own (§23.5). */
export function htmlFooter(html: string, url: string): string {
  const footer = `<p style="font-size:12px;color:#666;margin-top:24px">Don't want these emails? <a href="${escapeHtml(url)}">Unsubscribe</a>.</p>`;
  const close = html.search(/<\/body\s*>/i);
  return close < 0 ? html + footer : html.slice(0, close) + footer + html.slice(close);
}

export function textFooter(text: string, url: string): string {
  return `${text}\n\n--\nUnsubscribe: ${url}\n`;
}

/** A hidden preheader: inbox previews show it after the subject. */
export function withPreview(html: string, previewText: string | null): string {
  if (!previewText) return html;
  const div = `<div style="display:none;max-height:0;overflow:hidden">${escapeHtml(previewText)}</div>`;
  const open = html.match(/<body[^>]*>/i);
  return open ? html.replace(open[0], open[0] + div) : div + html;
}
