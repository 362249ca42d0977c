import { ACTIVITY_SERIES, type ActivityDay, type ActivityKey } from '../../src/projects/activity.ts';

export const SERIES_COLOURS: Record<ActivityKey, string> = {
  sent: '#3b5bdb',
  delivered: '#2b8a3e',
  bounced: '#e67700',
  complained: '#a61e4d',
  failed: '#c92a2a',
};

const WIDTH = 720;
const HEIGHT = 260;
const PAD = { left: 48, right: 16, top: 16, bottom: 40 };

/** The smallest of 1, 2 or 5 times a power of ten that is at least `n`, so the axis reads well. */
function niceCeiling(n: number): number {
  if (n <= 5) return 5;
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * power >= n) return step * power;
  return 10 * power;
}

/**
 * One line per outcome over the days given, drawn on the server: plain SVG, no script. Each
 * point has a <title>, so hovering shows its day and count, and a table beside the chart
 * carries the same numbers for readers without the picture.
 */
export function ActivityChart(props: { days: ActivityDay[] }) {
  const { days } = props;
  const top = niceCeiling(Math.max(0, ...days.flatMap((d) => ACTIVITY_SERIES.map((s) => d[s.key]))));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (days.length === 1 ? plotW / 2 : (i * plotW) / (days.length - 1));
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const ticks = [0, top / 2, top];
  return (
    <svg class="chart" role="img" aria-labelledby="chart-title" viewBox={`0 0 ${WIDTH} ${HEIGHT}`} width={WIDTH} height={HEIGHT}
      xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="11">
      <title id="chart-title">Sent, delivered, bounced, complained and failed per day over the last {days.length} days</title>
      {ticks.map((t) => (
        <g>
          <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y(t)} y2={y(t)} stroke="#dde1e8" />
          <text x={PAD.left - 6} y={y(t) + 4} text-anchor="end" fill="#6b7383">{t}</text>
        </g>
      ))}
      {days.map((d, i) => (
        <text x={x(i)} y={HEIGHT - PAD.bottom + 16} text-anchor="middle" fill="#6b7383">{d.day.slice(5)}</text>
      ))}
      {ACTIVITY_SERIES.map((s) => (
        <g data-series={s.key}>
          <polyline fill="none" stroke={SERIES_COLOURS[s.key]} stroke-width="2"
            points={days.map((d, i) => `${x(i).toFixed(1)},${y(d[s.key]).toFixed(1)}`).join(' ')} />
          {days.map((d, i) => (
            <circle cx={x(i).toFixed(1)} cy={y(d[s.key]).toFixed(1)} r="3" fill={SERIES_COLOURS[s.key]}>
              <title>{`${d.day}: ${d[s.key]} ${s.key}`}</title>
            </circle>
          ))}
        </g>
      ))}
    </svg>
  );
}
