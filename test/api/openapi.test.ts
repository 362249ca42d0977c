import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();

test('/openapi.json is 3.1.0, version 0.1.0, with a bearer scheme and no auth needed', async () => {
  const res = await ctx.call(undefined, '/openapi.json');
  assert.equal(res.status, 200);
  const doc = await res.json();
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.version, '0.1.0');
  assert.deepEqual(doc.components.securitySchemes.bearerAuth, { type: 'http', scheme: 'bearer', description: doc.components.securitySchemes.bearerAuth.description });
  assert.ok(!('/v1/events/ses' in doc.paths), 'SNS push is left out of the schema');
  for (const name of ['ErrorResponse', 'HTTPValidationError', 'EmailResponse', 'EmailList', 'DomainResponse', 'APIKeyList', 'WebhookEndpointList', 'WebhookDeliveryList']) {
    assert.ok(doc.components.schemas[name], `${name} is a named schema`);
  }
});

test('every /v1 operation declares bearer security and its 401/422/429 shapes', async () => {
  const doc = await (await ctx.call(undefined, '/openapi.json')).json();
  const ops = Object.entries(doc.paths as Record<string, Record<string, { security?: unknown; responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> }>>)
    .filter(([path]) => path.startsWith('/v1/'))
    .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ id: `${method} ${path}`, op })));
  assert.ok(ops.length >= 6);
  for (const { id, op } of ops) {
    assert.deepEqual(op.security, [{ bearerAuth: [] }], id);
    for (const status of ['401', '429']) {
      assert.equal(op.responses[status]?.content?.['application/json']?.schema.$ref, '#/components/schemas/ErrorResponse', `${id} ${status}`);
    }
    const hasInput = /\{|get \/v1\/emails$|post/.test(id);
    if (hasInput) assert.equal(op.responses['422']?.content?.['application/json']?.schema.$ref, '#/components/schemas/HTTPValidationError', `${id} 422`);
    if (id.includes('{')) assert.ok(op.responses['404'], `${id} 404`);
  }
});

test('/docs serves the interactive documentation', async () => {
  const res = await ctx.call(undefined, '/docs');
  assert.equal(res.status, 200);
  const html = await res.text();
  assert.match(html, /swagger/i);
  assert.match(html, /\/openapi\.json/);
});
