import { z } from '@hono/zod-openapi';

/** The query fields of every cursor-paged list: spread into the route's query object. */
export const PAGE_QUERY = {
  limit: z.coerce.number().int().min(1).max(100).default(25).openapi({ description: '1 to 100, default 25.' }),
  starting_after: z.string().max(100).optional().openapi({ description: 'The last id of the previous page.' }),
};
