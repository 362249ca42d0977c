import { readJsonArrayBody } from '../http/body.ts';
import { ValidationError, type ValidationDetail } from '../http/errors.ts';
import { newId } from '../platform/ids.ts';
import { assertMessageSize } from './message-size.ts';
import type { NewEmail } from './queries.ts';
import { parseSendRequest, type ParsedSend } from './validate.ts';
import { renderSend } from './template-send.ts';
import type { SendDeps } from './service.ts';

export const MAX_BATCH = 100;

/** A batch over the cap, refused before any item is looked at (the count may be partial). */
export function batchTooLong(): ValidationError {
  return new ValidationError([{
    loc: ['body'], msg: `A batch holds 1 to ${MAX_BATCH} emails`, type: 'too_long',
    ctx: { min_length: 1, max_length: MAX_BATCH },
  }]);
}

/** Reads a batch body, refusing it as soon as item number `MAX_BATCH + 1` starts to arrive. */
export function readBatchBody(c: Parameters<typeof readJsonArrayBody>[0], limitBytes: number): Promise<unknown> {
  return readJsonArrayBody(c, limitBytes, MAX_BATCH, batchTooLong);
}

/** Runs a check, handing back its 422 details with `loc` moved under the item's index. */
async function underIndex<T>(index: number, check: () => T | Promise<T>): Promise<T | ValidationDetail[]> {
  try {
    return await check();
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    return err.detail.map((d) => ({ ...d, loc: ['body', index, ...d.loc.slice(1)] }));
  }
}

/**
 * Validates a batch all or nothing: every item as a single send would be, sizes included. One bad
 * item fails the whole batch with every problem found, each `loc` starting `["body", i, …]`.
 */
export async function parseBatch(deps: SendDeps, body: unknown, projectId: string): Promise<{ sends: ParsedSend[]; emails: NewEmail[] }> {
  if (!Array.isArray(body)) throw new ValidationError([{ loc: ['body'], msg: 'The body must be a JSON array of send requests', type: 'list_type' }]);
  if (body.length === 0 || body.length > MAX_BATCH) {
    throw new ValidationError([{
      loc: ['body'], msg: `A batch holds 1 to ${MAX_BATCH} emails`, type: body.length ? 'too_long' : 'too_short',
      ctx: { min_length: 1, max_length: MAX_BATCH, actual_length: body.length },
    }]);
  }
  const problems: ValidationDetail[] = [];
  const sends: ParsedSend[] = [];
  const emails: NewEmail[] = [];
  for (const [i, item] of body.entries()) {
    const send = await underIndex(i, () => parseSendRequest(item));
    if (Array.isArray(send)) { problems.push(...send); continue; }
    const ready = await underIndex(i, () => renderSend(deps, projectId, send));
    if (Array.isArray(ready)) { problems.push(...ready); continue; }
    const email = { id: newId('email'), projectId, ...ready };
    const sized = await underIndex(i, () => assertMessageSize(ready, email.id, projectId, deps.config));
    if (Array.isArray(sized)) { problems.push(...sized); continue; }
    sends.push(send);
    emails.push(email);
  }
  if (problems.length) throw new ValidationError(problems);
  return { sends, emails };
}
