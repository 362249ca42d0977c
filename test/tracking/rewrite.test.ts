import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_HTML_CHARS, MAX_TAGS, MAX_TRACKED_LINKS, rewriteHtml, trackableUrl } from '../../src/tracking/rewrite.ts';
import { signTrackingToken, TOKEN_LENGTH, verifyTrackingToken } from '../../src/tracking/token.ts';
import { isMachineAgent } from '../../src/events/user-agents.ts';
import { newId } from '../../src/platform/ids.ts';

const click = (i: number) => `https://t.example/t/c/${i}`;
const PIXEL = '<img src="https://t.example/t/o/P" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0">';
const options = { clickUrl: click, openUrl: 'https://t.example/t/o/P' };

async function rewritten(html: string, opts: Parameters<typeof rewriteHtml>[1] = options) {
  const r = await rewriteHtml(html, opts);
  assert.ok(!('untracked' in r), JSON.stringify(r));
  return r;
}

test('only the href attributes of http(s) <a> links change, and the pixel goes before </body>', async () => {
  const html = '<html>\r\n<BODY class=x>\r\n'
    + '<a href=https://a.example/1 id=u>unquoted</a>\r\n'
    + '<a title="x > y" href="HTTPS://B.example/2">upper</a>\r\n'
    + '<a href="  https://c.example/3  ">spaces</a>\r\n'
    + '<a href="https://d.example/4" href="https://ignored.example/">two hrefs</a>\r\n'
    + '<a href="javascript:alert(1)">js</a><a href="data:text/html,x">data</a><a href="//e.example/">no scheme</a>'
    + '<a href="#top">frag</a><a href="ftp://f.example/">ftp</a><a href="https://">broken</a>\r\n'
    + '<svg><a href="https://g.example/svg"><text>svg link</text></a><![CDATA[ <a href="https://cdata.example/"> ]]></svg>\r\n'
    + '<textarea><a href="https://textarea.example/"></textarea><noscript><a href="https://noscript.example/">n</a></noscript>\r\n'
    + '<a href="https://h.example/5"><b>mis</a>nested</b>\r\n'
    + '</BODY>\r\n</html>';
  const r = await rewritten(html);
  assert.deepEqual(r.links, ['https://a.example/1', 'https://b.example/2', 'https://c.example/3', 'https://d.example/4', 'https://g.example/svg', 'https://noscript.example/', 'https://h.example/5']);
  const expected = html
    .replace('href=https://a.example/1', `href="${click(0)}"`)
    .replace('href="HTTPS://B.example/2"', `href="${click(1)}"`)
    .replace('href="  https://c.example/3  "', `href="${click(2)}"`)
    .replace('href="https://d.example/4"', `href="${click(3)}"`)
    .replace('href="https://g.example/svg"', `href="${click(4)}"`)
    .replace('href="https://noscript.example/"', `href="${click(5)}"`)
    .replace('href="https://h.example/5"', `href="${click(6)}"`)
    .replace('</BODY>', `${PIXEL}</BODY>`);
  assert.equal(r.html, expected);
});

test('exempt links (the unsubscribe link) are left alone; without a click URL no link changes', async () => {
  const html = '<p><a href="https://m.example/unsubscribe/abc">unsubscribe</a> <a href="https://shop.example/">shop</a></p>';
  const r = await rewritten(html, { ...options, exempt: (u) => u.startsWith('https://m.example/unsubscribe/') });
  assert.equal(r.html, `<p><a href="https://m.example/unsubscribe/abc">unsubscribe</a> <a href="${click(0)}">shop</a></p>${PIXEL}`);
  const opensOnly = await rewritten(html, { openUrl: options.openUrl });
  assert.equal(opensOnly.html, html + PIXEL);
  assert.deepEqual(opensOnly.links, []);
});

test('the pixel: before </body>, else before </html>, else at the end', async () => {
  assert.equal((await rewritten('<p>x</p>')).html, `<p>x</p>${PIXEL}`);
  assert.equal((await rewritten('<html><body><p>x</html>')).html, `<html><body><p>x${PIXEL}</html>`);
  assert.equal((await rewritten('<body>x</body>\n<!-- after -->\n')).html, `<body>x${PIXEL}</body>\n<!-- after -->\n`);
  assert.equal((await rewritten('')).html, PIXEL);
});

test('a large document is rewritten across parser chunks byte for byte (entities, CRLF and surrogate pairs at the seams)', async () => {
  const part = (i: number) => `<tr><td>😀 row ${i} &amp; caf\u00e9 ${'lorem ipsum '.repeat(i % 7)}\r\n<a href="https://shop.example/item/${i}?a=1&amp;b=2">item ${i}</a></td></tr>\r\n`;
  const html = `<table>${Array.from({ length: 2000 }, (_, i) => part(i)).join('')}</table>`;
  assert.ok(html.length > 200_000);
  const r = await rewritten(html, { clickUrl: click });
  assert.equal(r.links.length, 2000);
  assert.equal(r.links[1999], 'https://shop.example/item/1999?a=1&b=2');
  let i = 0;
  assert.equal(r.html.replace(/href="https:\/\/t\.example\/t\/c\/\d+"/g, () => `href="https://shop.example/item/${i++}?a=1&amp;b=2"`), html);
});

test('malformed, deeply nested or multi-megabyte HTML is rewritten in bounded time or left untracked, and never blocks the event loop for long', async () => {
  const big = '<p>hello <a href="https://example.com/x">link</a></p>\n'.repeat(Math.ceil((MAX_HTML_CHARS + 1) / 50));
  let started = performance.now();
  assert.deepEqual(await rewriteHtml(big, options), { untracked: 'html_too_large' });
  assert.ok(performance.now() - started < 250);

  const tooMany = '<a href="https://x.example/">x</a>'.repeat(MAX_TRACKED_LINKS + 1);
  assert.deepEqual(await rewriteHtml(tooMany, options), { untracked: 'too_many_links' });
  started = performance.now();
  assert.deepEqual(await rewriteHtml('<div>'.repeat(MAX_TAGS + 1), options), { untracked: 'too_many_tags' });
  assert.ok(performance.now() - started < 250);

  let longestGap = 0;
  let last = performance.now();
  const ticker = setInterval(() => { const now = performance.now(); longestGap = Math.max(longestGap, now - last); last = now; }, 1);
  try {
    for (const hostile of ['<div>'.repeat(MAX_TAGS), '<b><i><u><s><a href="https://x.example/">'.repeat(MAX_TAGS / 5), '<table><tr><td>'.repeat(MAX_TAGS / 3), '<p><b><i><u><s>x</p>'.repeat(MAX_TAGS / 6)]) {
      started = performance.now();
      const r = await rewriteHtml(hostile, { ...options, budgetMs: 500 });
      const took = performance.now() - started;
      assert.ok(took < 2500, `took ${took.toFixed(0)} ms`);
      // Left untracked for time, or, where the parse gets that far within it, for its links.
      if ('untracked' in r) assert.ok(['parse_too_slow', 'too_many_links'].includes(r.untracked), r.untracked);
      else assert.ok(r.html.length > hostile.length);
    }
  } finally {
    clearInterval(ticker);
  }
  // Parsed whole, each of these holds the loop for seconds; in chunks, one chunk (or a collection) at a time.
  assert.ok(longestGap < 1000, `the event loop waited ${longestGap.toFixed(0)} ms at most`);
});

test('trackableUrl: what a browser would follow, normalised, for http and https only', () => {
  assert.equal(trackableUrl(' https://Shop.Example/a b '), 'https://shop.example/a%20b');
  assert.equal(trackableUrl('http://x.example'), 'http://x.example/');
  for (const no of ['mailto:a@b.example', 'tel:1', '/rel', '//x.example/', 'javascript:1', 'https://', 'https://exa mple.com/', 'httpx://a']) {
    assert.equal(trackableUrl(no), undefined, no);
  }
});

test('tokens: 62 characters naming project, email and position; any other string does not verify', () => {
  const secret = 'k'.repeat(40);
  const target = { projectId: newId('project'), emailId: newId('email'), link: 513 };
  const token = signTrackingToken(secret, 'click', target, 'T.example:443');
  assert.equal(token.length, TOKEN_LENGTH);
  assert.equal(TOKEN_LENGTH, 62);
  assert.deepEqual(verifyTrackingToken(secret, 'click', token, 't.example'), target);
  assert.equal(verifyTrackingToken(secret, 'click', token, 'evil.example'), undefined, 'another host');
  assert.equal(verifyTrackingToken(secret, 'click', token, 't.example.evil.example'), undefined, 'another host');
  assert.equal(verifyTrackingToken(secret, 'open', token, 't.example'), undefined, 'a click token is not an open token');
  assert.equal(verifyTrackingToken('j'.repeat(40), 'click', token, 't.example'), undefined, 'another SECRET_KEY');
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < token.length; i++) {
    for (const ch of [alphabet[(alphabet.indexOf(token[i]!) + 1) % 64]!, alphabet[(alphabet.indexOf(token[i]!) + 33) % 64]!]) {
      assert.equal(verifyTrackingToken(secret, 'click', token.slice(0, i) + ch + token.slice(i + 1), 't.example'), undefined, `position ${i}`);
    }
  }
  for (const bad of [token.slice(0, -1), `${token}A`, '', 'é'.repeat(62), `${token.slice(0, 60)}==`, 'A'.repeat(1_000_000)]) {
    assert.equal(verifyTrackingToken(secret, 'click', bad, 't.example'), undefined);
  }
});

test('machine: image proxies and link scanners on the list, people\'s mail clients not', () => {
  for (const agent of [
    'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)',
    'YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html',
    'Mozilla/5.0',
    'Microsoft Office Existence Discovery',
    'Mozilla/5.0 (compatible; Barracuda Sentinel)',
    'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
    'python-requests/2.31.0',
    'curl/8.5.0',
    'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
    'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)',
    '',
    undefined,
  ]) assert.equal(isMachineAgent(agent), true, String(agent));
  for (const agent of [
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
    'Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.0',
    'Mozilla/5.0 (Linux; Android 12; Cubot X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36',
  ]) assert.equal(isMachineAgent(agent), false, agent);
});
