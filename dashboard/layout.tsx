import { useContext, type Child } from 'hono/jsx';
import { raw } from 'hono/html';
import type { Project } from '../src/projects/service.ts';
import { BASE } from './env.ts';
import { CSRF_FIELD } from './csrf.ts';
import { Access } from './access.ts';
import { allowsRequest } from './permissions.ts';

const CSS = `
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;align-items:center;flex-wrap:wrap}
header a{color:#cfe0ff;text-decoration:none}header strong a{color:#fff}
header form{margin-left:auto}
main{padding:1.2rem;max-width:1100px}
table{border-collapse:collapse;width:100%;background:#fff;margin:.6rem 0}
th,td{border:1px solid #dde1e8;padding:.35rem .5rem;text-align:left;vertical-align:top;font-size:14px}
th{background:#eef1f5}
pre{background:#fff;border:1px solid #dde1e8;padding:.6rem;overflow:auto;max-height:28rem;white-space:pre-wrap;word-break:break-all}
input[type=text],input[type=email],input[type=password],input[type=url],input[type=search]{padding:.35rem;min-width:18rem}
textarea{font:13px/1.4 ui-monospace,monospace;width:100%;max-width:60rem}
button{padding:.3rem .7rem;cursor:pointer}
form.inline{display:inline}
fieldset.read-only{border:0;padding:0;margin:0}
.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.5rem .7rem}
.note{background:#fff7dc;border:1px solid #e6cf7a;padding:.5rem .7rem}
.muted{color:#6b7383}
code.secret{font-size:1.05rem;background:#fff;border:1px solid #dde1e8;padding:.3rem .5rem;user-select:all}
iframe{width:100%;height:28rem;border:1px solid #dde1e8;background:#fff}
nav.pager{display:flex;gap:1rem;margin:.6rem 0}
form.filters{display:flex;gap:.6rem;align-items:end;flex-wrap:wrap;margin:.6rem 0}
form.filters label{display:flex;flex-direction:column;font-size:13px;color:#4a5263}
header nav{display:flex;gap:1.2rem;flex-wrap:wrap}
.stats{display:flex;gap:.8rem;flex-wrap:wrap;margin:.6rem 0}
.stat{background:#fff;border:1px solid #dde1e8;padding:.5rem .8rem;min-width:7rem}
.stat b{display:block;font-size:1.3rem}
a.stat{color:inherit;text-decoration:none}
.legend{display:flex;gap:1rem;flex-wrap:wrap;list-style:none;padding:0;margin:.3rem 0}
.swatch{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}
svg.chart{background:#fff;border:1px solid #dde1e8;max-width:100%;height:auto}
.status-failed,.status-canceled{color:#b42318}.status-sent,.status-delivered{color:#1e7b34}
`;

const FAVICON = `data:image/svg+xml,${encodeURIComponent("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><rect width='16' height='16' rx='3' fill='#1d2330'/><path d='M3 5h10v7H3z' fill='none' stroke='#cfe0ff'/><path d='M3 5l5 4 5-4' fill='none' stroke='#cfe0ff'/></svg>")}`;

/**
 * A POST form with the CSRF token already in it. It is left out of the page when the signed-in
 * member's role may not post to its action (the same table the server checks).
 */
export function Form(props: { action: string; csrf: string; class?: string; readOnly?: boolean; children?: Child }) {
  const role = useContext(Access);
  if (role && !allowsRequest(role, 'POST', props.action)) {
    // A form that also shows settings (a draft, ticked event types) stays readable, disabled and unsendable.
    return props.readOnly ? <fieldset disabled class="read-only">{props.children}</fieldset> : null;
  }
  return (
    <form method="post" action={props.action} class={props.class}>
      <input type="hidden" name={CSRF_FIELD} value={props.csrf} />
      {props.children}
    </form>
  );
}

/** A part of a page (a heading and its form) shown only to roles that may post to `action`. */
export function IfAllowed(props: { action: string; children?: Child }) {
  const role = useContext(Access);
  if (role && !allowsRequest(role, 'POST', props.action)) return null;
  return <>{props.children}</>;
}

export type LayoutProps = {
  title: string;
  csrf: string;
  email?: string;
  project?: Project;
  /** Same-origin scripts this page adds; every page works without them. */
  scripts?: string[];
  /** Reloads the page this often when scripts are off (a progress page still at work). */
  refreshSeconds?: number;
  children?: Child;
};

/** Every page of a project links to the others, in this order. */
const PROJECT_PAGES = [
  ['', 'Overview'],
  ['/emails', 'Emails'],
  ['/inbox', 'Inbox'],
  ['/received', 'Received'],
  ['/templates', 'Templates'],
  ['/contacts', 'Contacts'],
  ['/segments', 'Segments'],
  ['/topics', 'Topics'],
  ['/broadcasts', 'Broadcasts'],
  ['/suppressions', 'Suppressions'],
  ['/webhooks', 'Webhooks'],
  ['/domains', 'Domains'],
  ['/keys', 'API keys'],
] as const;

export function Layout(props: LayoutProps) {
  const role = useContext(Access);
  const p = props.project ? `${BASE}/projects/${props.project.id}` : undefined;
  return (
    <>
      {raw('<!doctype html>')}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <title>{props.title} · Mailroom</title>
          {/* An inline icon, so browsers don't ask the server for /favicon.ico. */}
          <link rel="icon" href={FAVICON} />
          <style>{raw(CSS)}</style>
          {props.scripts?.map((src) => <script src={src} defer></script>)}
          {props.refreshSeconds && <noscript><meta http-equiv="refresh" content={String(props.refreshSeconds)} /></noscript>}
        </head>
        <body>
          <header>
            <strong><a href={BASE}>Mailroom</a></strong>
            {props.email && <a href={`${BASE}/team`}>Team</a>}
            {p && props.project && (
              <>
                <span>{props.project.name}</span>
                <nav aria-label="Project">
                  {PROJECT_PAGES.map(([path, label]) => <a href={`${p}${path}`}>{label}</a>)}
                </nav>
              </>
            )}
            {props.email && (!role || allowsRequest(role, 'GET', `${BASE}/audit`)) && <a href={`${BASE}/audit`}>Audit log</a>}
            {props.email && (
              <Form action={`${BASE}/logout`} csrf={props.csrf}>
                <span class="muted">{props.email}{role && ` (${role})`}</span> <button type="submit">Sign out</button>
              </Form>
            )}
          </header>
          <main>
            <h1>{props.title}</h1>
            {props.children}
          </main>
        </body>
      </html>
    </>
  );
}

export function ErrorNote(props: { message?: string }) {
  return props.message ? <p class="error" role="alert">{props.message}</p> : null;
}

/**
 * Cursor paging: the first page, and the page after the last row shown. `query` keeps the
 * filters; `after` is replaced.
 */
export function Pager(props: { path: string; query?: Record<string, string | undefined>; lastId?: string; hasMore: boolean; isFirst: boolean }) {
  const href = (after?: string) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(props.query ?? {})) if (v) params.set(k, v);
    if (after) params.set('after', after);
    const qs = params.toString();
    return qs ? `${props.path}?${qs}` : props.path;
  };
  if (props.isFirst && !props.hasMore) return null;
  return (
    <nav class="pager" aria-label="Pages">
      {!props.isFirst && <a href={href()}>Newest</a>}
      {props.hasMore && props.lastId && <a href={href(props.lastId)} rel="next">Older</a>}
    </nav>
  );
}

/** A time as `2026-11-23 09:15:02 UTC`, with no-break spaces so a narrow column never splits it. */
export function when(d: Date | null | undefined): string {
  return d ? `${d.toISOString().slice(0, 10)}\u00a0${d.toISOString().slice(11, 19)}\u00a0UTC` : '—';
}
