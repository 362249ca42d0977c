import type { Project } from '../../src/projects/service.ts';
import { ACTIVITY_SERIES, type ActivityDay, type ProviderPacing } from '../../src/projects/activity.ts';
import type { RelaySettings } from '../../src/relay/address.ts';
import { BASE } from '../env.ts';
import { Layout, when } from '../layout.tsx';
import { ActivityChart, SERIES_COLOURS } from './chart.tsx';
import { PausedBanner, ReputationPanel } from './reputation.tsx';
import type { ReputationView } from '../../src/reputation/service.ts';

type Base = { csrf: string; email: string; project: Project };

const rate = (n: number | null) => (n === null ? 'unknown' : `${Number(n.toFixed(2))}/s`);

export function OverviewPage(props: Base & {
  days: ActivityDay[];
  inFlight: { scheduled: number; queued: number; sending: number };
  pacing?: ProviderPacing;
  relay?: RelaySettings;
  reputation: ReputationView;
}) {
  const p = `${BASE}/projects/${props.project.id}`;
  const totals = Object.fromEntries(ACTIVITY_SERIES.map((s) => [s.key, props.days.reduce((sum, d) => sum + d[s.key], 0)]));
  const bounceRate = totals.sent ? ((100 * totals.bounced!) / totals.sent).toFixed(1) : '0.0';
  return (
    <Layout title={props.project.name} csrf={props.csrf} email={props.email} project={props.project}>
      <PausedBanner reputation={props.reputation} resumeAction={`${p}/reputation/resume`} csrf={props.csrf} queued={props.inFlight.queued} />
      <h2>Last {props.days.length} days</h2>
      <div class="stats" id="totals">
        {ACTIVITY_SERIES.map((s) => (
          <div class="stat" data-series={s.key}><b>{totals[s.key]}</b>{s.key}</div>
        ))}
        <div class="stat"><b>{bounceRate}%</b>bounce rate</div>
      </div>
      <ActivityChart days={props.days} />
      <ul class="legend">
        {ACTIVITY_SERIES.map((s) => (
          <li><span class="swatch" style={`background:${SERIES_COLOURS[s.key]}`}></span>{s.key}</li>
        ))}
      </ul>
      <details>
        <summary>The numbers by day</summary>
        <table>
          <thead><tr><th>Day (UTC)</th>{ACTIVITY_SERIES.map((s) => <th>{s.key}</th>)}</tr></thead>
          <tbody>
            {props.days.map((d) => <tr><td>{d.day}</td>{ACTIVITY_SERIES.map((s) => <td>{d[s.key]}</td>)}</tr>)}
          </tbody>
        </table>
      </details>

      <h2>Now</h2>
      <div class="stats" id="in-flight">
        <a class="stat" href={`${p}/emails?status=scheduled`}><b>{props.inFlight.scheduled}</b>scheduled</a>
        <a class="stat" href={`${p}/emails?status=queued`}><b>{props.inFlight.queued}</b>queued</a>
        <a class="stat" href={`${p}/emails?status=sending`}><b>{props.inFlight.sending}</b>sending</a>
      </div>

      <h2>Reputation</h2>
      <ReputationPanel reputation={props.reputation} />

      <h2>Provider</h2>
      {props.pacing ? (
        <table id="provider">
          <tbody>
            <tr><th>Provider</th><td>Amazon SES, {props.pacing.region}</td></tr>
            <tr><th>Pace</th><td>{rate(props.pacing.sendRate)}{props.pacing.slowed ? ' (halved after throttling)' : ''}</td></tr>
            <tr><th>Account send rate</th><td>{rate(props.pacing.accountMaxSendRate)}</td></tr>
            <tr><th>Rate cap</th><td>{props.pacing.rateCap === null ? 'none' : rate(props.pacing.rateCap)}</td></tr>
            <tr>
              <th>Sent in the last 24 h</th>
              <td>{props.pacing.sentLast24h} of {props.pacing.max24HourSend === null ? 'an unknown quota' : props.pacing.max24HourSend}</td>
            </tr>
            <tr><th>Throttles in the last hour</th><td>{props.pacing.throttlesLastHour}</td></tr>
            <tr><th>Quota read</th><td>{when(props.pacing.quotaCheckedAt)}</td></tr>
          </tbody>
        </table>
      ) : (
        <p id="provider">No provider is connected: this project's mail goes to the built-in sink, and shows in the <a href={`${p}/inbox`}>Inbox</a>.</p>
      )}

      <h2>SMTP relay</h2>
      {props.relay ? <RelayTable relay={props.relay} keysHref={`${p}/keys`} /> : (
        <p id="smtp-relay">The SMTP relay is off. Set <code>RELAY_SMTP_PORT</code> (and a certificate) to let applications that only speak SMTP send through this project.</p>
      )}
    </Layout>
  );
}

const TLS_MODES: Record<RelaySettings['tls'], string> = {
  'starttls': 'STARTTLS',
  'starttls-and-implicit': 'STARTTLS, or implicit TLS (SMTPS) on its own port',
  'none': 'none: no certificate configured',
};

/** What to type into an application's SMTP settings page. */
function RelayTable(props: { relay: RelaySettings; keysHref: string }) {
  const r = props.relay;
  return (
    <table id="smtp-relay">
      <tbody>
        <tr><th>Host</th><td><code>{r.host}</code></td></tr>
        <tr><th>Port</th><td><code>{r.port}</code>{r.tls === 'none' ? '' : ' (STARTTLS)'}</td></tr>
        {r.smtpsPort !== undefined ? <tr><th>Implicit TLS port</th><td><code>{r.smtpsPort}</code> (SMTPS)</td></tr> : null}
        <tr><th>TLS</th><td>{TLS_MODES[r.tls]}{r.plaintextAuth ? '; AUTH is also taken without TLS' : ''}</td></tr>
        <tr><th>Username</th><td><code>{r.username}</code></td></tr>
        <tr><th>Password</th><td>password: an API key (<a href={props.keysHref}>full or sending</a>)</td></tr>
      </tbody>
    </table>
  );
}
