import type { Hono } from 'hono';
import type { DashEnv } from '../env.ts';

export function registerOidcRoutes(_app: Hono<DashEnv>) {}
