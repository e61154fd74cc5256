// timeseries.js - the totals-over-time chart on <canvas>, with drag-to-select.
//
// Points come from /api/v1/timeseries ({timestamp ms, value}). Dragging across the
// chart calls onSelect(fromMs, untilMs); highlighted ranges (the diff view's left and
// right) are drawn as shaded bands.

import { formatTime, formatValue } from './format.js';

const PAD = { l: 64, r: 10, t: 8, b: 30 };
const S = 1000, M = 60 * S, HR = 60 * M, D = 24 * HR;
// Tick steps on round local times; the first that keeps labels about 90 px apart wins.
const TIME_STEPS = [S, 5 * S, 10 * S, 15 * S, 30 * S, M, 2 * M, 5 * M, 10 * M, 15 * M, 30 * M, HR, 2 * HR, 3 * HR,
  6 * HR, 12 * HR, D, 2 * D, 7 * D, 14 * D, 30 * D];
const p2 = (n) => String(n).padStart(2, '0');
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

// Ticks of [from, until]: [{ms, label, date}], on multiples of a round step in local time;
// `date` (e.g. "Dec 3") is set where the day differs from the previous tick's.
export function timeTicks(from, until, maxTicks) {
  const span = Math.max(1, until - from);
  const step = TIME_STEPS.find((s) => span / s <= maxTicks) || TIME_STEPS[TIME_STEPS.length - 1];
  const tz = new Date(from).getTimezoneOffset() * M; // local midnight is a multiple of D after -tz
  let t = Math.ceil((from - tz) / step) * step + tz;
  if (step >= D) t = Math.ceil((from - tz) / D) * D + tz;
  const out = [];
  let lastDay = '';
  for (; t <= until && out.length < 100; t += step) {
    const d = new Date(t), day = `${MONTHS[d.getMonth()]} ${d.getDate()}`;
    const label = step >= D ? day : step < M ? `${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}`
      : `${p2(d.getHours())}:${p2(d.getMinutes())}`;
    out.push({ ms: t, label, date: day !== lastDay && step < D ? day : '' });
    lastDay = day;
  }
  return out;
}

// 3-5 round values from 0 to at least max (1, 2, 2.5 or 5 times a power of ten).
export function valueTicks(max, unit) {
  if (!(max > 0)) return [0];
  if (unit === 'bytes' && max >= 1024) { // round in the unit shown: 0, 2, 4 MiB, not 2.38 MiB
    const scale = 1024 ** Math.min(4, Math.floor(Math.log(max) / Math.log(1024)));
    return valueTicks(max / scale).map((v) => v * scale);
  }
  const raw = max / 4, pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((s) => max / s <= 4) || 10 * pow;
  const out = [];
  for (let v = 0; v < max + step * 0.999 && out.length < 6; v += step) out.push(v);
  return out;
}

// The local time zone as users read it: its abbreviation, or UTC±h.
function zoneName() {
  const part = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(new Date())
    .find((x) => x.type === 'timeZoneName');
  return part ? part.value : 'UTC';
}

export class TimeSeries {
  constructor(container, { onSelect } = {}) {
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'ts-canvas';
    container.append(this.canvas);
    this.onSelect = onSelect;
    this.points = [];
    this.bands = [];
    this.drag = null;
    this.canvas.addEventListener('mousedown', (e) => { this.drag = { a: this.px(e), b: this.px(e) }; });
    window.addEventListener('mousemove', (e) => { if (this.drag) { this.drag.b = this.px(e); this.render(); } });
    window.addEventListener('mouseup', () => this.finishDrag());
    new ResizeObserver(() => this.render()).observe(container);
  }

  // range: {from, until} in ms, the x extent even where there are no points.
  setData(points, unit, range) {
    this.points = points;
    this.unit = unit;
    this.range = range;
    this.canvas.dataset.points = String(points.length);
    this.render();
  }

  // groups: [{name, points, color}] drawn as lines instead of the total (none: the total).
  setGroups(groups) {
    this.groups = groups && groups.length ? groups : null;
    this.canvas.dataset.groups = String(this.groups ? this.groups.length : 0);
    this.render();
  }

  // bands: [{from, until, color}] in ms.
  setBands(bands) { this.bands = bands; this.render(); }

  px(e) { return e.clientX - this.canvas.getBoundingClientRect().left; }

  xOf(ms, W) { return PAD.l + ((ms - this.range.from) / (this.range.until - this.range.from || 1)) * (W - PAD.l - PAD.r); }
  msOf(px, W) {
    const f = Math.min(1, Math.max(0, (px - PAD.l) / (W - PAD.l - PAD.r)));
    return this.range.from + f * (this.range.until - this.range.from);
  }

  finishDrag() {
    if (!this.drag) return;
    const { a, b } = this.drag, W = this.canvas.clientWidth;
    this.drag = null;
    this.render();
    if (Math.abs(a - b) > 3 && this.onSelect) this.onSelect(Math.round(this.msOf(Math.min(a, b), W)), Math.round(this.msOf(Math.max(a, b), W)));
  }

  // Profiles that arrive less often than the step leave empty steps between them: those
  // are gaps, not zeros, so the line joins the non-empty points and breaks only where the
  // gap is over three times the usual one (a lone point is drawn as a dot).
  drawLine(ctx, W, yOf, color, points, fill) {
    const pts = points.filter((p) => p.value !== 0);
    if (!pts.length) return;
    const gaps = pts.slice(1).map((p, i) => p.timestamp - pts[i].timestamp).sort((a, b) => a - b);
    const usual = gaps.length ? gaps[Math.floor(gaps.length / 2)] : 0;
    const runs = [[pts[0]]];
    for (let i = 1; i < pts.length; i++) {
      if (pts[i].timestamp - pts[i - 1].timestamp > 3 * usual) runs.push([]);
      runs[runs.length - 1].push(pts[i]);
    }
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 1.5;
    for (const run of runs) {
      if (run.length === 1) {
        ctx.beginPath();
        ctx.arc(this.xOf(run[0].timestamp, W), yOf(run[0].value), 2.5, 0, 2 * Math.PI);
        ctx.fill();
        continue;
      }
      ctx.beginPath();
      run.forEach((p, i) => { const x = this.xOf(p.timestamp, W), y = yOf(p.value); i ? ctx.lineTo(x, y) : ctx.moveTo(x, y); });
      ctx.stroke();
      if (!fill) continue;
      ctx.lineTo(this.xOf(run[run.length - 1].timestamp, W), yOf(0));
      ctx.lineTo(this.xOf(run[0].timestamp, W), yOf(0));
      ctx.globalAlpha = 0.15;
      ctx.fill();
      ctx.globalAlpha = 1;
    }
    this.canvas.dataset.runs = String(runs.length);
  }

  render() {
    const c = this.canvas, W = c.clientWidth, H = c.clientHeight || 140;
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.max(1, Math.floor(W * dpr));
    c.height = Math.floor(H * dpr);
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    if (!this.range) return;
    const style = getComputedStyle(c);
    const fg = style.getPropertyValue('--fg').trim() || '#333', line = style.getPropertyValue('--accent').trim() || '#d9480f';
    const shown = this.groups ? this.groups.flatMap((g) => g.points) : this.points;
    const yt = valueTicks(Math.max(...shown.map((p) => p.value), 0), this.unit);
    const max = Math.max(1, yt[yt.length - 1]);
    const yOf = (v) => H - PAD.b - (v / max) * (H - PAD.t - PAD.b);
    for (const band of this.bands) {
      ctx.fillStyle = band.color;
      const x0 = this.xOf(band.from, W), x1 = this.xOf(band.until, W);
      ctx.fillRect(x0, PAD.t, Math.max(2, x1 - x0), H - PAD.t - PAD.b);
    }
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const v of yt) { // gridlines with their values, in the type's unit
      ctx.strokeStyle = fg;
      ctx.globalAlpha = v ? 0.12 : 0.3;
      ctx.beginPath();
      ctx.moveTo(PAD.l, Math.round(yOf(v)) + 0.5); ctx.lineTo(W - PAD.r, Math.round(yOf(v)) + 0.5);
      ctx.stroke();
      ctx.globalAlpha = 1;
      ctx.fillStyle = fg;
      ctx.fillText(v ? formatValue(v, this.unit) : '0', 4, yOf(v));
    }
    ctx.textBaseline = 'top';
    const ticks = timeTicks(this.range.from, this.range.until, Math.max(2, Math.floor((W - PAD.l - PAD.r) / 90)));
    for (const t of ticks) {
      const x = this.xOf(t.ms, W), w = ctx.measureText(t.label).width;
      ctx.globalAlpha = 0.3;
      ctx.fillRect(Math.round(x), H - PAD.b, 1, 4);
      ctx.globalAlpha = 1;
      ctx.fillText(t.label, Math.min(Math.max(PAD.l, x - w / 2), W - PAD.r - w), H - PAD.b + 5);
      if (t.date) ctx.fillText(t.date, Math.min(Math.max(PAD.l, x - w / 2), W - PAD.r - w), H - PAD.b + 17);
    }
    const zone = zoneName();
    ctx.fillText(zone, 4, H - PAD.b + 5);
    this.canvas.dataset.ticks = JSON.stringify(ticks.map((t) => (t.date ? t.date + ' ' : '') + t.label));
    this.canvas.dataset.yticks = JSON.stringify(yt);
    this.canvas.dataset.zone = zone;
    if (this.groups) for (const g of this.groups) this.drawLine(ctx, W, yOf, g.color, g.points, false);
    else this.drawLine(ctx, W, yOf, line, this.points, true);
    if (this.drag) {
      ctx.fillStyle = 'rgba(80,120,220,0.25)';
      ctx.fillRect(Math.min(this.drag.a, this.drag.b), PAD.t, Math.abs(this.drag.a - this.drag.b), H - PAD.t - PAD.b);
    }
  }
}
