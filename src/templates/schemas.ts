import { z } from '@hono/zod-openapi';
import type { TemplateRow } from './queries.ts';

const VariableResponse = z.object({
  key: z.string(),
  type: z.enum(['string', 'number']),
  fallback_value: z.union([z.string(), z.number()]).nullable(),
});

export const TemplateResponse = z
  .object({
    id: z.string().openapi({ example: 'tmpl_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    name: z.string(),
    alias: z.string().nullable(),
    subject: z.string().nullable(),
    html: z.string().optional(),
    text: z.string().nullable().optional(),
    from: z.string().nullable(),
    reply_to: z.array(z.string()),
    variables: z.array(VariableResponse),
    status: z.enum(['draft', 'published']).openapi({ description: '`published` once any version has been published.' }),
    published_at: z.string().datetime().nullable(),
    created_at: z.string().datetime(),
    updated_at: z.string().datetime(),
    has_unpublished_versions: z.boolean().openapi({ description: 'The draft holds edits that sends do not use yet.' }),
    current_version: z.number().int().openapi({ description: 'The draft\'s version number; it becomes that version when published.' }),
  })
  .openapi('TemplateResponse');

export const TemplateListItem = TemplateResponse.omit({ html: true, text: true }).openapi('TemplateListItem');
export const TemplateList = z.object({ data: z.array(TemplateListItem), has_more: z.boolean() }).openapi('TemplateList');

export const TemplateVersionList = z
  .object({
    data: z.array(z.object({
      id: z.string().openapi({ example: 'tmplv_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
      version: z.number().int(),
      published_at: z.string().datetime(),
    })),
  })
  .openapi('TemplateVersionList');

export const RenderedTemplateResponse = z
  .object({ subject: z.string().nullable(), html: z.string().nullable(), text: z.string().nullable() })
  .openapi('RenderedTemplate');

export function toTemplateListItem(t: TemplateRow): z.infer<typeof TemplateListItem> {
  return {
    id: t.id,
    name: t.name,
    alias: t.alias,
    subject: t.subject,
    from: t.fromAddress,
    reply_to: t.replyToAddresses,
    variables: t.variables,
    status: t.publishedVersionId ? 'published' : 'draft',
    published_at: t.publishedAt?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
    has_unpublished_versions: t.hasUnpublishedVersions,
    current_version: t.currentVersion,
  };
}

export function toTemplateResponse(t: TemplateRow): z.infer<typeof TemplateResponse> {
  return { ...toTemplateListItem(t), html: t.html, text: t.text };
}
