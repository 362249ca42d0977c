import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ValidationError, errorResponses, validationErrorFromZod } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { changeThresholds, getReputation, resumeSending } from './service.ts';
import './metrics.ts';

const Rate = z.number().openapi({ description: 'A fraction: 0.04 is 4%.' });
const Pair = z.object({ warn: Rate, pause: Rate });

const ReputationResponse = z
  .object({
    state: z.enum(['ok', 'warning', 'paused']),
    paused_at: z.string().datetime().nullable(),
    reason: z.string().nullable().openapi({ description: '`bounce_rate`, `complaint_rate` or `aws_sending_disabled` while paused.' }),
    thresholds: z.object({ bounce_rate: Pair, complaint_rate: Pair }),
    windows: z.array(z.object({
      scope: z.enum(['project', 'account']),
      window: z.enum(['1h', 'representative']),
      sent: z.number().int(),
      bounced: z.number().int(),
      complained: z.number().int(),
      bounce_rate: z.number(),
      complaint_rate: z.number(),
      since: z.string().datetime(),
    })),
    aws: z.object({
      enforcement_status: z.string().nullable(),
      sending_enabled: z.boolean().nullable(),
      checked_at: z.string().datetime().nullable(),
    }).nullable(),
  })
  .openapi('ReputationResponse');

const PartialPair = z.object({ warn: z.number().optional(), pause: z.number().optional() }).strict();
const ThresholdsRequest = z
  .object({ bounce_rate: PartialPair.optional(), complaint_rate: PartialPair.optional() })
  .strict()
  .openapi('ReputationThresholdsRequest');

const read = createRoute({
  method: 'get',
  path: '/v1/reputation',
  tags: ['reputation'],
  summary: 'Read the project\'s reputation',
  description:
    'Hard-bounce and complaint rates per recipient over sent recipients, for the project and its SES account, ' +
    'in the last hour and the representative window (the larger of 24 h and the last 10,000 sent recipients, ' +
    'at most 30 days), with the thresholds, the pause, and what SES last said of the account. Full key only.',
  security: SECURITY,
  responses: {
    200: { description: 'The reputation.', content: { 'application/json': { schema: ReputationResponse } } },
    ...errorResponses(401, 403, 422, 429),
  },
});

const patch = createRoute({
  method: 'patch',
  path: '/v1/reputation',
  tags: ['reputation'],
  summary: 'Change the thresholds',
  description:
    'Any subset of the four thresholds, as fractions. A pause above SES\'s review levels (0.05 bounces, 0.001 ' +
    'complaints), a warning above its pause, or a value below 0 answers 422 and changes nothing.',
  security: SECURITY,
  request: { body: { required: true, content: { 'application/json': { schema: ThresholdsRequest } } } },
  responses: {
    200: { description: 'The reputation with the new thresholds.', content: { 'application/json': { schema: ReputationResponse } } },
    ...errorResponses(401, 403, 413, 422, 429),
  },
});

const resume = createRoute({
  method: 'post',
  path: '/v1/reputation/resume',
  tags: ['reputation'],
  summary: 'Resume a paused project',
  description:
    'Held mail leaves again, in the order it was accepted, at the SES pace; both windows of both scopes start ' +
    'counting afresh for the project from now. A project that is not paused is left as it is.',
  security: SECURITY,
  responses: {
    200: { description: 'The reputation after the resume.', content: { 'application/json': { schema: ReputationResponse } } },
    ...errorResponses(401, 403, 422, 429),
  },
});

const MAX_BODY_BYTES = 4 * 1024;

export function registerReputationRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(read, async (c) => c.json(await getReputation(c.var.deps.sql, c.var.projectId), 200));

  // The body is read with a byte bound, like every JSON body of the API.
  app.openAPIRegistry.registerPath(patch);
  app.patch(patch.path, async (c) => {
    const parsed = ThresholdsRequest.safeParse(await readJsonBody(c, MAX_BODY_BYTES));
    if (!parsed.success) throw validationErrorFromZod(parsed.error, 'json');
    const result = await changeThresholds(c.var.deps.sql, c.var.projectId, parsed.data);
    if ('loc' in result) throw new ValidationError([{ loc: result.loc, msg: result.msg, type: 'value_error' }]);
    return c.json(result, 200);
  });

  app.openapi(resume, async (c) => {
    const { sql, log } = c.var.deps;
    await resumeSending(sql, log, c.var.projectId);
    return c.json(await getReputation(sql, c.var.projectId), 200);
  });
}
