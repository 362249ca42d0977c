import { ACTIVITY_SERIES, type ActivityDay, type ActivityKey } from '../../src/projects/activity.ts';

export const SERIES_COLOURS: Record<ActivityKey, string> = {
  sent: '#3b5bdb',
  delivered: '#2b8a3e',
  bounced: '#e67700',
  complained: '#a61e4d',
  failed: '#c92a2a',
  opened: '#1098ad',
  clicked: '#7048e8',
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
 * Each day a group of bars, one per outcome and engagement (opens, clicks), drawn on the server: plain SVG, no script.
 * Bars rather than lines, so equal counts never hide one another. Each bar has a <title>, so
 * hovering shows its day and count; the page's table carries the same numbers as text.
 */
export function ActivityChart(props: { days: ActivityDay[] }) {
  const { days } = props;
  const top = niceCeiling(Math.max(0, ...days.flatMap((d) => ACTIVITY_SERIES.map((s) => d[s.key]))));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const groupW = plotW / days.length;
  const barW = (groupW - 6) / ACTIVITY_SERIES.length;
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const ticks = [0, top / 2, top];
  return (
    <svg class="chart" role="img" aria-labelledby="chart-title" viewBox={`0 0 ${WIDTH} ${HEIGHT}`} width={WIDTH} height={HEIGHT}
      xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="11">
      <title id="chart-title">Sent, delivered, bounced, complained, failed, opened and clicked per day over the last {days.length} days</title>
      {ticks.map((t) => (
        <g>
          <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y(t)} y2={y(t)} stroke="#dde1e8" />
          <text x={PAD.left - 6} y={y(t) + 4} text-anchor="end" fill="#6b7383">{t}</text>
        </g>
      ))}
      {days.map((d, i) => (
        <text x={(PAD.left + (i + 0.5) * groupW).toFixed(1)} y={HEIGHT - PAD.bottom + 16} text-anchor="middle" fill="#6b7383">{d.day.slice(5)}</text>
      ))}
      {ACTIVITY_SERIES.map((s, j) => (
        <g data-series={s.key} fill={SERIES_COLOURS[s.key]}>
          {days.map((d, i) => (
            <rect x={(PAD.left + i * groupW + 3 + j * barW).toFixed(1)} y={y(d[s.key]).toFixed(1)}
              width={Math.max(1, barW - 1).toFixed(1)} height={(PAD.top + plotH - y(d[s.key])).toFixed(1)}>
              <title>{`${d.day}: ${d[s.key]} ${s.key}`}</title>
            </rect>
          ))}
        </g>
      ))}
    </svg>
  );
}
