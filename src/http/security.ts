/** The bearer scheme every /v1 route declares in the schema. */
export const SECURITY = [{ bearerAuth: [] }];
