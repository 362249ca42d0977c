import type { Hono } from 'hono';
import { BASE, type DashEnv } from '../env.ts';

export const LIVE_INBOX_SCRIPT_PATH = `${BASE}/assets/live-inbox.js`;

/**
 * The inbox's live updates, the dashboard's only script. It is served from this origin (the
 * CSP allows no inline script) and only adds to a page that works without it: it listens to
 * the stream the inbox table names and prepends each caught message as a row, built with DOM
 * calls and textContent, so no field of a message is ever parsed as markup.
 */
const LIVE_INBOX_SCRIPT = `'use strict';
(() => {
  const table = document.querySelector('table[data-live]');
  const status = document.getElementById('live-status');
  if (!table || !status || typeof EventSource !== 'function') return;
  const body = table.tBodies[0];
  const empty = document.getElementById('inbox-empty');
  const cell = (row, text) => { const td = document.createElement('td'); td.textContent = text; row.append(td); return td; };
  const source = new EventSource(table.dataset.live);
  source.addEventListener('open', () => { status.textContent = 'Live: new mail appears here as it arrives.'; });
  source.addEventListener('error', () => { status.textContent = 'Live updates paused; reconnecting…'; });
  source.addEventListener('caught', (event) => {
    const m = JSON.parse(event.data);
    if (document.getElementById('row-' + m.id)) return;
    const row = document.createElement('tr');
    row.id = 'row-' + m.id;
    row.className = 'new';
    cell(row, m.receivedAt);
    cell(row, m.from);
    cell(row, m.to);
    const link = document.createElement('a');
    link.href = m.href;
    link.textContent = m.subject || '(no subject)';
    cell(row, '').append(link);
    cell(row, m.size + ' B');
    body.prepend(row);
    if (empty) empty.hidden = true;
  });
})();
`;

export const LIVE_PROGRESS_SCRIPT_PATH = `${BASE}/assets/live-progress.js`;

/**
 * A progress page's live bar (imports, broadcasts). The page works without it (it refreshes
 * itself inside <noscript>); with it, the stream the bar names moves the bar and sets each
 * `[data-count]` cell's text, and the page reloads once the work is done to show the outcome.
 */
const LIVE_PROGRESS_SCRIPT = `'use strict';
(() => {
  const bar = document.querySelector('progress[data-live]');
  if (!bar || typeof EventSource !== 'function') return;
  const status = document.getElementById('progress-status');
  const source = new EventSource(bar.dataset.live);
  source.addEventListener('progress', (event) => {
    const p = JSON.parse(event.data);
    bar.value = p.percent;
    bar.textContent = p.percent + '%';
    if (status) status.textContent = p.status;
    for (const [key, value] of Object.entries(p.counts)) {
      const cell = document.querySelector('[data-count="' + key + '"]');
      if (cell) cell.textContent = String(value);
    }
    if (p.done) { source.close(); location.reload(); }
  });
})();
`;

export function registerAssetRoutes(app: Hono<DashEnv>) {
  app.get('/assets/live-inbox.js', (c) => {
    c.header('Content-Type', 'text/javascript; charset=utf-8');
    return c.body(LIVE_INBOX_SCRIPT, 200);
  });
  app.get('/assets/live-progress.js', (c) => {
    c.header('Content-Type', 'text/javascript; charset=utf-8');
    return c.body(LIVE_PROGRESS_SCRIPT, 200);
  });
}
