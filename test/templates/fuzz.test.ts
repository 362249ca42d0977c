import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTestContext } from '../helpers/app.ts';

// A small message limit, so the fuzz also reaches message_too_large.
const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: '16384' } });
const { key } = await ctx.tenant();

const request = async (path: string, body: unknown, method = 'POST') => {
  const res = await ctx.app.request(path, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  assert.ok(res.status < 500, `${method} ${path} answered ${res.status}: ${text.slice(0, 300)} for ${JSON.stringify(body).slice(0, 500)}`);
  if (res.status === 422) {
    const detail = (JSON.parse(text) as { detail: { loc: unknown[]; msg: unknown; type: unknown }[] }).detail;
    assert.ok(detail.length > 0 && detail.every((d) => d.loc[0] === 'body' && typeof d.msg === 'string' && typeof d.type === 'string'), text);
  }
  return { status: res.status, body: text ? JSON.parse(text) as Record<string, unknown> : {} };
};

/** Pieces of Handlebars, valid and not, so sources mix templates that compile with ones that don't. */
const token = fc.constantFrom(
  '{{a}}', '{{{a}}}', '{{b}}', '{{a.b}}', '{{this}}', '{{@root.a}}', '{{../a}}', '{{#if a}}', '{{/if}}', '{{else}}', '{{#each this}}',
  '{{/each}}', '{{#with a}}', '{{/with}}', '{{lookup this "a"}}', '{{lookup a "constructor"}}', '{{constructor}}', '{{__proto__}}',
  '{{> p}}', '{{* d}}', '{{#unless b}}', '{{/unless}}', '{{!-- c --}}', '{{', '}}', '{{{', '<b>', '&', '"', '\n', 'text ', '{{log a}}',
  '{{#each @root as |v k|}}{{k}}{{v}}{{/each}}', '{{a b}}', '{{(lookup this "a")}}', '{{#if (lookup this "b")}}x{{/if}}', '\\{{a}}',
);
const source = fc.oneof(fc.array(token, { maxLength: 12 }).map((t) => t.join('')), fc.string({ maxLength: 40 }));
const value = fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.double(), fc.constant(null), fc.boolean(), fc.array(fc.string(), { maxLength: 3 }),
  fc.constant({ constructor: 'x' }), fc.string({ minLength: 0, maxLength: 3 }).map((s) => s.repeat(3000)));
const variable = fc.record({
  key: fc.oneof(fc.constantFrom('a', 'b', 'constructor', '__proto__', '1x'), fc.string({ maxLength: 6 })),
  type: fc.oneof(fc.constantFrom('string', 'number'), fc.string({ maxLength: 4 })),
  fallback_value: fc.option(value, { nil: undefined }),
}, { requiredKeys: ['key', 'type'] });

test('fuzzed sources and variables never get a 5xx: create, render, publish and send', { timeout: 120_000 }, async () => {
  await fc.assert(fc.asyncProperty(
    source, source, fc.array(variable, { maxLength: 3 }), fc.dictionary(fc.oneof(fc.constantFrom('a', 'b', '__proto__', 'constructor'), fc.string({ maxLength: 4 })), value, { maxKeys: 4 }),
    async (html, subject, variables, values) => {
      const made = await request('/v1/templates', { name: 'fuzz', html: html || 'x', subject, variables });
      if (made.status !== 201) return;
      const id = made.body.id as string;
      await request(`/v1/templates/${id}/render`, { variables: values });
      await request(`/v1/templates/${id}/publish`, {});
      await request('/v1/emails', { from: 'a@example.com', to: 'b@example.net', template: { id, variables: values } });
    },
  ), { numRuns: 150 });
});

test('fuzzed template references on a send never get a 5xx', async () => {
  await fc.assert(fc.asyncProperty(fc.anything({ maxDepth: 2 }), async (template) => {
    await request('/v1/emails', { from: 'a@example.com', to: 'b@example.net', template });
  }), { numRuns: 150 });
});
