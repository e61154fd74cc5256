// timeseries.js - the totals-over-time chart on <canvas>, with drag-to-select.
//
// Points come from /api/v1/timeseries ({timestamp ms, value}). Dragging across the
// chart calls onSelect(fromMs, untilMs); highlighted ranges (the diff view's left and
// right) are drawn as shaded bands.

import { formatTime, formatValue } from './format.js';

const PAD = { l: 64, r: 10, t: 8, b: 22 };

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
    const max = Math.max(1, ...this.points.map((p) => p.value));
    const yOf = (v) => H - PAD.b - (v / max) * (H - PAD.t - PAD.b);
    for (const band of this.bands) {
      ctx.fillStyle = band.color;
      const x0 = this.xOf(band.from, W), x1 = this.xOf(band.until, W);
      ctx.fillRect(x0, PAD.t, Math.max(2, x1 - x0), H - PAD.t - PAD.b);
    }
    ctx.strokeStyle = fg;
    ctx.globalAlpha = 0.3;
    ctx.beginPath();
    ctx.moveTo(PAD.l, H - PAD.b + 0.5); ctx.lineTo(W - PAD.r, H - PAD.b + 0.5);
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.fillStyle = fg;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillText(formatValue(max, this.unit), 4, PAD.t + 6);
    ctx.fillText('0', 4, H - PAD.b);
    ctx.textBaseline = 'top';
    const ticks = Math.max(2, Math.floor((W - PAD.l) / 170));
    for (let k = 0; k <= ticks; k++) {
      const ms = this.range.from + (k / ticks) * (this.range.until - this.range.from);
      const label = formatTime(ms).slice(5, 16);
      const x = Math.min(this.xOf(ms, W), W - PAD.r - ctx.measureText(label).width);
      ctx.fillText(label, Math.max(PAD.l, x - 20), H - PAD.b + 5);
    }
    if (this.points.length) {
      ctx.beginPath();
      this.points.forEach((p, i) => { const x = this.xOf(p.timestamp, W), y = yOf(p.value); i ? ctx.lineTo(x, y) : ctx.moveTo(x, y); });
      ctx.strokeStyle = line;
      ctx.lineWidth = 1.5;
      ctx.stroke();
      ctx.lineTo(this.xOf(this.points[this.points.length - 1].timestamp, W), yOf(0));
      ctx.lineTo(this.xOf(this.points[0].timestamp, W), yOf(0));
      ctx.globalAlpha = 0.15;
      ctx.fillStyle = line;
      ctx.fill();
      ctx.globalAlpha = 1;
    }
    if (this.drag) {
      ctx.fillStyle = 'rgba(80,120,220,0.25)';
      ctx.fillRect(Math.min(this.drag.a, this.drag.b), PAD.t, Math.abs(this.drag.a - this.drag.b), H - PAD.t - PAD.b);
    }
  }
}
