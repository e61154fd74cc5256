// heatmap.js - Profiles Drilldown's heatmap: per time step, how many profiles (or spans)
// had a value in each of 20 value buckets (SelectHeatmap), darker for more; a cell's
// exemplar is its largest profile, which a click opens.

const ROWS = 20;

export class Heatmap {
  // opts.onPick(exemplar, cell): a cell with an exemplar was clicked.
  constructor(container, opts = {}) {
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'heatmap-canvas';
    this.tip = document.createElement('div');
    this.tip.className = 'tooltip tooltip-side';
    this.tip.hidden = true;
    container.append(this.canvas, this.tip);
    this.opts = opts;
    this.cells = [];
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    this.canvas.addEventListener('click', (e) => {
      const c = this.cellAt(e);
      if (c && c.exemplar && this.opts.onPick) this.opts.onPick(c.exemplar, c);
    });
    new ResizeObserver(() => this.render()).observe(container);
  }

  // doc: a SelectHeatmap JSON answer; [start, end) ms and step s of the request.
  setData(doc, start, end, step, format) {
    this.cells = [];
    this.start = start, this.end = end, this.step = step * 1000, this.format = format;
    let points = 0, max = 0;
    for (const series of doc.series || []) {
      for (const slot of series.slots || []) {
        const ts = Number(slot.timestamp), counts = slot.counts || [], ex = slot.exemplars || [];
        let k = 0;
        counts.forEach((n, row) => {
          if (!n) return;
          const cell = { ts, row, count: n, yMin: Number((slot.yMin || [])[row] || 0), exemplar: ex[k++] || null };
          this.cells.push(cell);
          points += n, max = Math.max(max, n);
        });
      }
    }
    this.max = max;
    this.canvas.dataset.points = String(points);
    this.canvas.dataset.cells = String(this.cells.length);
    this.render();
  }

  geometry() {
    const W = this.canvas.clientWidth, H = 220, cols = Math.max(1, Math.ceil((this.end - this.start) / this.step));
    return { W, H, cw: W / cols, rh: H / ROWS };
  }

  render() {
    const c = this.canvas, { W, H, cw, rh } = this.geometry(), dpr = window.devicePixelRatio || 1;
    c.width = Math.max(1, Math.floor(W * dpr)), c.height = Math.floor(H * dpr), c.style.height = `${H}px`;
    const g = c.getContext('2d');
    g.scale(dpr, dpr);
    g.clearRect(0, 0, W, H);
    for (const cell of this.cells) {
      const a = 0.15 + 0.85 * (cell.count / (this.max || 1));
      g.fillStyle = `rgba(217, 72, 15, ${a.toFixed(3)})`;
      g.fillRect(((cell.ts - this.start) / this.step) * cw, H - (cell.row + 1) * rh, Math.max(1, cw - 1), rh - 1);
    }
  }

  cellAt(e) {
    const r = this.canvas.getBoundingClientRect(), { H, cw, rh } = this.geometry();
    const col = Math.floor((e.clientX - r.left) / cw), row = Math.floor((H - (e.clientY - r.top)) / rh);
    return this.cells.find((c) => Math.floor((c.ts - this.start) / this.step) === col && c.row === row) || null;
  }

  hover(e) {
    const c = this.cellAt(e);
    this.tip.hidden = !c;
    if (!c) return;
    const ex = c.exemplar;
    this.tip.textContent = `${new Date(c.ts).toISOString()}: ${c.count} with values from ${this.format(c.yMin)}` +
      (ex ? ` - largest ${this.format(Number(ex.value))}${ex.traceId ? ', trace ' + ex.traceId : ''} (click to open)` : '');
    const r = this.canvas.getBoundingClientRect();
    this.tip.style.left = `${e.clientX - r.left + 12}px`, this.tip.style.top = `${e.clientY - r.top + 12}px`;
  }
}
