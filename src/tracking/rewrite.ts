import { setImmediate as nextTurn } from 'node:timers/promises';
import { Parser, type DefaultTreeAdapterMap } from 'parse5';

type Node = DefaultTreeAdapterMap['node'];
type Element = DefaultTreeAdapterMap['element'];

/**
 * Click and open tracking on an email's HTML part, at send time. The HTML is parsed by parse5 with
 * its source locations, and only the bytes of each rewritten `href` attribute change (and the
 * pixel is inserted before `</body>`); every other byte is the caller's, as written.
 *
 * Time is bounded: the parser is fed in chunks, the event loop gets a turn between them, and a
 * document that takes longer than the budget (deep nesting makes some of parse5's tree steps
 * cost in proportion to the depth) is given up and sent untracked. Documents over MAX_HTML_CHARS
 * or MAX_TAGS are not parsed at all.
 */
export const MAX_HTML_CHARS = 2 * 1024 * 1024;
export const MAX_TRACKED_LINKS = 2000;
/**
 * Tags at most (counted as `<`, an upper bound): parse5's cost per tag grows with the nesting
 * depth, so this bounds the worst chunk as MAX_HTML_CHARS bounds the whole. Real mail has a few
 * thousand.
 */
export const MAX_TAGS = 100_000;
const CHUNK_CHARS = 8 * 1024;
const DEFAULT_BUDGET_MS = 2000;

export type RewriteOptions = {
  /** The tracking URL of the link at this position; absent: links are left alone. */
  clickUrl?: (position: number) => string;
  /** The pixel's URL; absent: no pixel. */
  openUrl?: string;
  /** Links never rewritten, such as Mailroom's own unsubscribe link. */
  exempt?: (url: string) => boolean;
  budgetMs?: number;
};

/** The rewritten HTML and the original URL of each tracked link by position, or why it was left untracked. */
export type Rewritten = { html: string; links: string[] } | { untracked: 'html_too_large' | 'too_many_tags' | 'parse_too_slow' | 'too_many_links' };

type Edit = { start: number; end: number; text: string };

/** The absolute http(s) URL an href names (as a browser reads it: entities decoded, ends trimmed), else undefined. */
export function trackableUrl(href: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  const value = href.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '');
  if (!/^https?:/i.test(value)) return undefined;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** Feeds the parser a chunk at a time; undefined when the budget ran out first. */
async function parseWithin(html: string, budgetMs: number) {
  const started = performance.now();
  // Mail clients run no scripts, so <noscript> holds markup (and links) as they show it.
  const parser = new Parser<DefaultTreeAdapterMap>({ sourceCodeLocationInfo: true, scriptingEnabled: false });
  for (let at = 0; at < html.length || at === 0; at += CHUNK_CHARS) {
    const end = Math.min(html.length, at + CHUNK_CHARS);
    parser.tokenizer.write(html.slice(at, end), end >= html.length);
    if (end >= html.length) break;
    if (performance.now() - started > budgetMs) return undefined;
    await nextTurn();
  }
  return performance.now() - started > budgetMs ? undefined : parser.document;
}

/** Every element in document order, without recursion (nesting may be thousands deep), template contents included. */
function* elements(root: Node): Generator<Element> {
  const stack: Node[] = [root];
  while (stack.length) {
    const node = stack.pop()!;
    if ('tagName' in node) yield node;
    const children = 'childNodes' in node ? node.childNodes : [];
    const content = node.nodeName === 'template' ? (node as DefaultTreeAdapterMap['template']).content.childNodes : [];
    for (let i = content.length - 1; i >= 0; i--) stack.push(content[i]!);
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
}

export async function rewriteHtml(html: string, options: RewriteOptions): Promise<Rewritten> {
  if (html.length > MAX_HTML_CHARS) return { untracked: 'html_too_large' };
  let tags = 0;
  for (let at = html.indexOf('<'); at !== -1; at = html.indexOf('<', at + 1)) {
    if (++tags > MAX_TAGS) return { untracked: 'too_many_tags' };
  }
  const document = await parseWithin(html, options.budgetMs ?? DEFAULT_BUDGET_MS);
  if (!document) return { untracked: 'parse_too_slow' };

  const edits: Edit[] = [];
  const links: string[] = [];
  // The parser may make two elements of one tag (a formatting element reopened across a
  // misnested close); both point at the same source bytes, which are rewritten once.
  const seen = new Set<number>();
  let bodyEnd: number | undefined;
  let htmlEnd: number | undefined;
  for (const el of elements(document)) {
    if (el.tagName === 'body') bodyEnd = el.sourceCodeLocation?.endTag?.startOffset;
    else if (el.tagName === 'html') htmlEnd = el.sourceCodeLocation?.endTag?.startOffset;
    if (!options.clickUrl || el.tagName !== 'a') continue;
    const href = el.attrs.find((a) => a.name === 'href' && !a.namespace);
    const location = el.sourceCodeLocation?.attrs?.href;
    if (!href || !location || seen.has(location.startOffset)) continue;
    seen.add(location.startOffset);
    const url = trackableUrl(href.value);
    if (!url || options.exempt?.(url)) continue;
    if (links.length >= MAX_TRACKED_LINKS) return { untracked: 'too_many_links' };
    edits.push({ start: location.startOffset, end: location.endOffset, text: `href="${options.clickUrl(links.length)}"` });
    links.push(url);
  }
  if (options.openUrl) {
    const at = bodyEnd ?? htmlEnd ?? html.length;
    edits.push({ start: at, end: at, text: `<img src="${options.openUrl}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0">` });
  }
  edits.sort((a, b) => a.start - b.start);
  let out = '';
  let from = 0;
  for (const e of edits) {
    out += html.slice(from, e.start) + e.text;
    from = e.end;
  }
  return { html: out + html.slice(from), links };
}
