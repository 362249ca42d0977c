import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkMailbox, isMailbox } from '../../src/emails/mailbox.ts';

const VALID = ['a@example.com', 'Alice <alice@example.com>', '"Doe, Jane" <jane@example.com>', '  b@example.org  ', 'ü@exämple.de'];
const INVALID = ['', 'a', 'a@b', 'a@example.com, b@example.com', 'Alice alice@example.com', '<a@example.com> trailing', 'a@example.com\r\nBcc: x@y.z', 'group: a@example.com;'];

test('mailboxes and non-mailboxes are told apart, the first time and again', () => {
  for (let round = 0; round < 2; round++) {
    for (const v of VALID) assert.equal(isMailbox(v), true, v);
    for (const v of INVALID) assert.equal(isMailbox(v), false, v);
  }
});

test('a remembered answer is always the answer worked out afresh, across more addresses than are kept', () => {
  const pool = [...VALID, ...INVALID];
  const value = fc.oneof(
    fc.constantFrom(...pool),
    fc.nat(3000).map((n) => `user${n}@example.com`),
    fc.nat(3000).map((n) => `user${n}@example`),
    fc.string({ maxLength: 40 }),
  );
  fc.assert(fc.property(fc.array(value, { minLength: 1, maxLength: 400 }), (values) => {
    for (const v of values) assert.equal(isMailbox(v), checkMailbox(v), JSON.stringify(v));
  }), { numRuns: 50 });
});

test('a value longer than any address field allows is refused each time', () => {
  const long = `${'a'.repeat(2000)}@example.com`;
  assert.equal(isMailbox(long), false);
  assert.equal(isMailbox(long), false);
});
