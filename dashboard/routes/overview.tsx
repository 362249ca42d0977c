import type { Hono } from 'hono';
import { dailyActivity, inFlightCounts, providerPacing } from '../../src/projects/activity.ts';
import { relaySettings } from '../../src/relay/address.ts';
import type { DashEnv } from '../env.ts';
import { OverviewPage } from '../pages/overview.tsx';
import { base, render } from '../render.tsx';
import { getReputation, resumeSending } from '../../src/reputation/service.ts';
import { BASE } from '../env.ts';

export const CHART_DAYS = 14;

/** A project's front page: the last two weeks' outcomes, what is in flight, the provider's pace, and the SMTP relay's settings. */
export function registerOverviewRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId', async (c) => {
    const { sql } = c.var.deps;
    const projectId = c.var.project.id;
    const [days, inFlight, pacing, reputation] = await Promise.all([
      dailyActivity(sql, projectId, CHART_DAYS),
      inFlightCounts(sql, projectId),
      providerPacing(sql, projectId),
      getReputation(sql, projectId),
    ]);
    const relay = relaySettings(c.var.deps.config, new URL(c.req.url).hostname);
    return render(c, <OverviewPage {...base(c)} days={days} inFlight={inFlight} pacing={pacing} relay={relay} reputation={reputation} />);
  });

  // The paused banner's button: the same resume as the API's and the CLI's.
  app.post('/projects/:projectId/reputation/resume', async (c) => {
    const projectId = c.var.project.id;
    await resumeSending(c.var.deps.sql, c.var.deps.log, projectId);
    return c.redirect(`${BASE}/projects/${projectId}`, 303);
  });
}
