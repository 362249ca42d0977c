import type { ReputationView } from '../../src/reputation/service.ts';
import { SES_PAUSE, SES_REVIEW } from '../../src/reputation/queries.ts';
import { Form, when } from '../layout.tsx';

const pct = (r: number) => `${Number((r * 100).toFixed(3))}%`;

const KINDS = [
  { kind: 'bounce', label: 'Hard bounces', key: 'bounce_rate', review: SES_REVIEW.bounce, sesPause: SES_PAUSE.bounce },
  { kind: 'complaint', label: 'Complaints', key: 'complaint_rate', review: SES_REVIEW.complaint, sesPause: SES_PAUSE.complaint },
] as const;

const WINDOW_LABEL = { '1h': 'last hour', representative: 'representative' } as const;

/**
 * One gauge: the rate as a bar on a scale up to SES's pause level, with the project's warn and
 * pause lines and SES's review line marked. Plain HTML and CSS: the dashboard runs no inline script.
 */
function Gauge(props: { rate: number; warn: number; pause: number; review: number; max: number; label: string; attrs: Record<string, string> }) {
  const at = (r: number) => `${Math.min(100, (100 * r) / props.max).toFixed(2)}%`;
  const level = props.rate >= props.pause ? 'pause' : props.rate >= props.warn ? 'warn' : 'ok';
  return (
    <div class="gauge" data-level={level} {...props.attrs}>
      <div class="gauge-label">{props.label}: <b>{pct(props.rate)}</b></div>
      <div class="gauge-track" style="position:relative;height:12px;background:#eee;border-radius:3px">
        <div class="gauge-bar" style={`position:absolute;left:0;top:0;bottom:0;width:${at(props.rate)};background:${level === 'ok' ? '#2e7d32' : level === 'warn' ? '#ed6c02' : '#c62828'}`}></div>
        <span class="gauge-line" data-line="warn" title={`your warning, ${pct(props.warn)}`} style={`position:absolute;top:-3px;bottom:-3px;width:2px;background:#ed6c02;left:${at(props.warn)}`}></span>
        <span class="gauge-line" data-line="pause" title={`your pause, ${pct(props.pause)}`} style={`position:absolute;top:-3px;bottom:-3px;width:2px;background:#c62828;left:${at(props.pause)}`}></span>
        <span class="gauge-line" data-line="ses-review" title={`SES reviews the account at ${pct(props.review)}`} style={`position:absolute;top:-3px;bottom:-3px;width:2px;background:#000;left:${at(props.review)}`}></span>
      </div>
      <small>warn {pct(props.warn)} · pause {pct(props.pause)} · SES review {pct(props.review)} · SES pause {pct(props.max)}</small>
    </div>
  );
}

const REASONS: Record<string, string> = {
  bounce_rate: 'the hard-bounce rate crossed its pause threshold',
  complaint_rate: 'the complaint rate crossed its pause threshold',
  aws_sending_disabled: 'SES has disabled sending for the AWS account',
};

/** Shown at the top of the overview while the project is paused, with the resume button. */
export function PausedBanner(props: { reputation: ReputationView; resumeAction: string; csrf: string; queued: number }) {
  const r = props.reputation;
  if (r.state !== 'paused') return null;
  return (
    <div id="paused-banner" role="alert" style="border:2px solid #c62828;padding:0.75em;margin:0.5em 0;background:#fdecea">
      <p><b>Sending is paused</b> since {when(r.paused_at ? new Date(r.paused_at) : null)}: {REASONS[r.reason ?? ''] ?? r.reason}.
        New mail is still accepted and waits, with {props.queued} emails held as queued. Nothing was failed or dropped.
        Resuming sends the held mail in order at the SES pace, and the windows start counting afresh.</p>
      <Form action={props.resumeAction} csrf={props.csrf}>
        <button type="submit" id="resume-sending">Resume sending</button>
      </Form>
    </div>
  );
}

/** The overview's reputation section: the gauges of both windows and scopes against SES's lines and the project's own. */
export function ReputationPanel(props: { reputation: ReputationView }) {
  const r = props.reputation;
  return (
    <section id="reputation" data-state={r.state}>
      {r.state === 'warning' ? (
        <p id="reputation-warning" role="status">A rate is over its warning threshold: sending goes on, but look at the list before it reaches the pause.</p>
      ) : null}
      {r.aws ? (
        <p id="aws-standing">SES account standing: <b>{r.aws.enforcement_status ?? 'not read yet'}</b>
          {r.aws.sending_enabled === false ? ', sending disabled by AWS' : ''} (read {when(r.aws.checked_at ? new Date(r.aws.checked_at) : null)})</p>
      ) : r.windows.some((w) => w.scope === 'account') ? (
        // Connected, and GetAccount not read yet: `aws` is null until the worker's first reading.
        <p id="aws-standing">SES account standing: <b>not read yet</b> (the worker reads it every few minutes)</p>
      ) : (
        <p id="aws-standing">No SES account: the sink's mail counts for nothing here.</p>
      )}
      <div class="gauges" style="display:grid;grid-template-columns:repeat(auto-fit,minmax(16em,1fr));gap:1em">
        {r.windows.map((w) => (
          <div class="window" data-scope={w.scope} data-window={w.window}>
            <h3>{w.scope === 'project' ? 'Project' : 'AWS account'}, {WINDOW_LABEL[w.window]}</h3>
            <small>{w.sent} sent recipients since {when(new Date(w.since))}</small>
            {KINDS.map((k) => (
              <Gauge rate={w[k.key]} warn={r.thresholds[k.key].warn} pause={r.thresholds[k.key].pause} review={k.review} max={k.sesPause}
                label={k.label} attrs={{ 'data-kind': k.kind, 'data-rate': String(w[k.key]) }} />
            ))}
          </div>
        ))}
      </div>
    </section>
  );
}
