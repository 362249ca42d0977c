import type { Child } from 'hono/jsx';
import { raw } from 'hono/html';
import type { Project } from '../src/projects/service.ts';
import { BASE } from './env.ts';
import { CSRF_FIELD } from './csrf.ts';

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
input[type=text],input[type=email],input[type=password],input[type=url]{padding:.35rem;min-width:18rem}
button{padding:.3rem .7rem;cursor:pointer}
form.inline{display:inline}
.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.5rem .7rem}
.note{background:#fff7dc;border:1px solid #e6cf7a;padding:.5rem .7rem}
.muted{color:#6b7383}
code.secret{font-size:1.05rem;background:#fff;border:1px solid #dde1e8;padding:.3rem .5rem;user-select:all}
iframe{width:100%;height:28rem;border:1px solid #dde1e8;background:#fff}
`;

/** A POST form with the CSRF token already in it. */
export function Form(props: { action: string; csrf: string; class?: string; children?: Child }) {
  return (
    <form method="post" action={props.action} class={props.class}>
      <input type="hidden" name={CSRF_FIELD} value={props.csrf} />
      {props.children}
    </form>
  );
}

export type LayoutProps = { title: string; csrf: string; email?: string; project?: Project; children?: Child };

export function Layout(props: LayoutProps) {
  const p = props.project ? `${BASE}/projects/${props.project.id}` : undefined;
  return (
    <>
      {raw('<!doctype html>')}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <title>{props.title} · Mailroom</title>
          <style>{raw(CSS)}</style>
        </head>
        <body>
          <header>
            <strong><a href={BASE}>Mailroom</a></strong>
            {p && props.project && (
              <>
                <span>{props.project.name}</span>
                <a href={`${p}/keys`}>API keys</a>
                <a href={`${p}/webhooks`}>Webhooks</a>
                <a href={`${p}/domains`}>Domains</a>
                <a href={`${p}/emails`}>Emails</a>
                <a href={`${p}/inbox`}>Inbox</a>
              </>
            )}
            {props.email && (
              <Form action={`${BASE}/logout`} csrf={props.csrf}>
                <span class="muted">{props.email}</span> <button type="submit">Sign out</button>
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

export function when(d: Date | null | undefined): string {
  return d ? d.toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : '—';
}
