import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkMailbox, isMailbox, isPlainAddrSpec, parsesAsMailbox } from '../../src/emails/mailbox.ts';

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

test('an address of the everyday shape, answered without the parser, is one the full check accepts', () => {
  // Strings made of the plain shape's characters and those around its edges (dots, hyphens, quotes, spaces).
  const char = fc.oneof(
    { arbitrary: fc.constantFrom(...'aZ09_+-.'.split('')), weight: 20 },
    { arbitrary: fc.constantFrom(...'@ "<>\\,;:(){}[]!#$%&\'*/=?^`|~é'.split('')), weight: 1 },
  );
  const piece = fc.array(char, { maxLength: 12 }).map((cs) => cs.join(''));
  const near = (chars: string) => fc.array(fc.constantFrom(...chars.split('')), { minLength: 1, maxLength: 10 }).map((cs) => cs.join(''));
  const value = fc.oneof(
    fc.tuple(near('aZ09_+-.'), near('aZ09-'), near('aZ09-')).map(([local, host, tld]) => `${local}@${host}.${tld}`),
    fc.tuple(piece, piece).map(([local, host]) => `${local}@${host}`),
    fc.tuple(piece, piece, piece).map(([local, host, tld]) => `${local}@${host}.${tld}`),
    fc.tuple(fc.nat(70), fc.nat(70)).map(([l, h]) => `${'a'.repeat(l + 1)}@${'b'.repeat(h + 1)}.com`),
  );
  fc.assert(fc.property(value, (v) => {
    if (isPlainAddrSpec(v)) assert.equal(parsesAsMailbox(v), true, JSON.stringify(v));
  }), { numRuns: 20_000 });
  for (const v of ['person1@example.com', 'a.b+c_d-e@mail-1.example.co.uk', 'x@1.2']) assert.equal(isPlainAddrSpec(v), true, v);
  for (const v of ['a..b@example.com', '.a@example.com', 'a.@example.com', 'a@-x.com', 'a@x-.com', 'a@example', `${'a'.repeat(65)}@example.com`, `a@${'b'.repeat(64)}.com`]) {
    assert.equal(isPlainAddrSpec(v), false, v);
    assert.equal(checkMailbox(v), parsesAsMailbox(v), v);
  }
});
