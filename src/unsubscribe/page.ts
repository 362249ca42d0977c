import { html } from 'hono/html';

/** Static, script-free pages: nothing from the request is echoed, and nothing can frame them. */
export const PAGE_HEADERS = {
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

function layout(title: string, body: ReturnType<typeof html>) {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${title}</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem; color: #222; }
  button { font: inherit; padding: .5rem 1.25rem; border: 0; border-radius: .375rem; background: #b42318; color: #fff; cursor: pointer; }
</style>
</head>
<body>
${body}
</body>
</html>`;
}

export function confirmPage() {
  return layout('Unsubscribe', html`<h1>Unsubscribe</h1>
<p>Stop receiving email from this sender at the address this message was sent to?</p>
<form method="post">
  <input type="hidden" name="List-Unsubscribe" value="One-Click">
  <button type="submit">Unsubscribe</button>
</form>`);
}

export function donePage() {
  return layout('Unsubscribed', html`<h1>You are unsubscribed</h1>
<p>This sender will not email you at this address again.</p>`);
}

export function invalidPage() {
  return layout('Invalid link', html`<h1>This link is not valid</h1>
<p>The unsubscribe link is incomplete or was changed. Use the link from the email exactly as it arrived.</p>`);
}

export function gonePage() {
  return layout('Link expired', html`<h1>This link no longer works</h1>
<p>The message this link belongs to no longer exists.</p>`);
}

/**
 * A broadcast recipient's page: leave the topic the email came under (or everything, when it came
 * under none), choose among the project's public topics, or leave every broadcast. Plain forms
 * posting back to the same signed URL, so it works without JavaScript and the token is the only
 * credential (no cookie to forge a request with).
 */
export function preferencesPage(opts: { email: string; unsubscribed: boolean; topic: { id: string; name: string } | null; topics: { id: string; name: string; description: string | null; subscribed: boolean }[] }) {
  const leave = opts.topic
    ? html`<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">
  <p>Stop receiving <strong>${opts.topic.name}</strong> at ${opts.email}?</p><button type="submit">Unsubscribe</button></form>`
    : html``;
  const choose = opts.topics.length
    ? html`<form method="post"><input type="hidden" name="action" value="save">
  <h2>Your subscriptions</h2>
  ${opts.topics.map((t) => html`<p><label><input type="checkbox" name="topic" value="${t.id}"${t.subscribed ? html` checked` : html``}> ${t.name}</label>${t.description ? html`<br><small>${t.description}</small>` : html``}</p>`)}
  <button type="submit" style="background:#344054">Save</button></form>`
    : html``;
  return layout('Email preferences', html`<h1>Email preferences</h1>
${opts.unsubscribed ? html`<p>${opts.email} is unsubscribed from every broadcast of this sender.</p>` : html``}
${leave}
${choose}
<form method="post"><input type="hidden" name="action" value="all">
  <h2>Leave everything</h2><p>Receive no broadcasts from this sender at ${opts.email}.</p>
  <button type="submit">Unsubscribe from all</button></form>`);
}

export function preferencesSavedPage() {
  return layout('Preferences saved', html`<h1>Preferences saved</h1>
<p>Your choices take effect at once.</p>`);
}
