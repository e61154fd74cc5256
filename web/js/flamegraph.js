// flamegraph.js - the flame graph on <canvas>: single and diff ("double") flamebearers.
//
// The server sends levels of delta-encoded nodes (see README, "flamebearer"); they are
// decoded once into absolute positions per level, sorted by x, with a parent index,
// so drawing is one pass over visible nodes and hit-testing is a binary search in
// one level. Nodes narrower than half a pixel are skipped, so 10,000+ nodes stay
// smooth. In a diff each node spans left + right values, which nests correctly
// because both sides lay out children after the parent's self.

import { colorFor, diffColor, formatValue, percent } from './format.js';

const ROW = 18;

// Decodes a flamebearer into levels of nodes {x, w, self, name, parent[, lw, lself, rw, rself]}.
export function decodeFlamebearer(fb, double) {
  const names = fb.names, levels = [];
  const step = double ? 7 : 4;
  for (let d = 0; d < fb.levels.length; d++) {
    const src = fb.levels[d], out = [];
    let x = 0, lx = 0, rx = 0;
    for (let i = 0; i + step - 1 < src.length; i += step) {
      if (double) {
        lx += src[i]; rx += src[i + 3];
        const lw = src[i + 1], rw = src[i + 4];
        out.push({ x: lx + rx, w: lw + rw, self: src[i + 2] + src[i + 5], lw, lself: src[i + 2], rw, rself: src[i + 5],
                   name: names[src[i + 6]], parent: -1 });
        lx += lw; rx += rw;
      } else {
        x += src[i];
        out.push({ x, w: src[i + 1], self: src[i + 2], name: names[src[i + 3]], parent: -1 });
        x += src[i + 1];
      }
    }
    if (d > 0) linkParents(levels[d - 1], out);
    levels.push(out);
  }
  return levels;
}

// Both levels are sorted by x and children lie inside their parent, so one merge walk finds parents.
function linkParents(up, down) {
  let p = 0;
  for (const n of down) {
    while (p < up.length && up[p].x + up[p].w <= n.x && !(up[p].w === 0 && up[p].x === n.x)) p++;
    n.parent = p < up.length ? p : -1;
  }
}

export class FlameGraph {
  // container: an element the graph fills; opts.onZoom(path) reports zoom changes;
  // opts.onPick(name), when given, is what a right click on a frame opens;
  // opts.className names the canvas (default flame-canvas, the main graph's).
  constructor(container, opts = {}) {
    this.opts = opts;
    this.canvas = document.createElement('canvas');
    this.canvas.className = opts.className || 'flame-canvas';
    this.tip = document.createElement('div');
    this.tip.className = opts.className ? 'tooltip tooltip-side' : 'tooltip'; /* tests read the main one as .tooltip:not(.tooltip-side) */
    this.tip.hidden = true;
    container.append(this.canvas, this.tip);
    this.levels = [];
    this.mode = 'icicle';
    this.diffMode = 'relative';
    this.search = '';
    this.selected = '';
    this.zoom = null; // {d, i}
    this.canvas.addEventListener('mousemove', (e) => this.onMove(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    this.canvas.addEventListener('click', (e) => this.onClick(e));
    this.canvas.addEventListener('contextmenu', (e) => { // a frame's menu: its function's pane
      const h = this.hit(e);
      if (!h || !this.opts.onPick || h.d === 0) return;
      e.preventDefault();
      this.opts.onPick(this.levels[h.d][h.i].name);
    });
    new ResizeObserver(() => this.render()).observe(container);
  }

  // data: a flamebearer document from /api/v1/query or /api/v1/diff; unit: the sample unit.
  setData(doc, unit) {
    this.doc = doc;
    this.unit = unit;
    this.double = doc.metadata && doc.metadata.format === 'double';
    this.levels = decodeFlamebearer(doc.flamebearer, this.double);
    this.leftTicks = doc.flamebearer.leftTicks || 0;
    this.rightTicks = doc.flamebearer.rightTicks || 0;
    this.zoom = null;
    this.canvas.dataset.format = this.double ? 'double' : 'single';
    this.canvas.dataset.total = String(this.levels.length ? this.levels[0][0].w : 0);
    this.render();
    this.reportZoom();
  }

  setMode(mode) { this.mode = mode; this.render(); }
  setDiffMode(mode) { this.diffMode = mode; this.render(); }
  setSearch(s) { this.search = s.toLowerCase(); this.selected = ''; this.render(); }
  setSelected(name) { this.selected = name; this.search = ''; this.render(); }
  resetZoom() { this.zoom = null; this.render(); this.reportZoom(); }

  node(d, i) { return this.levels[d][i]; }
  root() { return this.levels.length ? this.levels[0][0] : null; }

  // The zoom node's ancestors (root first), then the zoom node itself.
  zoomPath() {
    const path = [];
    if (!this.zoom) return path;
    for (let d = this.zoom.d, i = this.zoom.i; d >= 0 && i >= 0; i = this.levels[d][i].parent, d--)
      path.unshift({ d, i, name: this.levels[d][i].name });
    return path;
  }

  zoomTo(d, i) {
    this.zoom = d === 0 ? null : { d, i };
    this.render();
    this.reportZoom();
  }

  reportZoom() {
    const z = this.zoom ? this.node(this.zoom.d, this.zoom.i).name : '';
    this.canvas.dataset.zoom = z;
    if (this.opts.onZoom) this.opts.onZoom(this.zoomPath());
  }

  matches(n) {
    if (this.selected) return n.name === this.selected;
    if (this.search) return n.name.toLowerCase().includes(this.search);
    return true;
  }

  // Share of the total under matching frames, counting nested matches once.
  matchStats() {
    if (!this.search && !this.selected) return null;
    let count = 0, value = 0;
    let prevCovered = [];
    for (let d = 0; d < this.levels.length; d++) {
      const covered = new Uint8Array(this.levels[d].length);
      this.levels[d].forEach((n, i) => {
        const up = d > 0 && n.parent >= 0 && prevCovered[n.parent];
        const m = d > 0 && this.matches(n);
        if (m) count++;
        if (m && !up) value += n.w;
        covered[i] = up || m ? 1 : 0;
      });
      prevCovered = covered;
    }
    const root = this.root();
    return { count, value, total: root ? root.w : 0 };
  }

  // The visible window in value units: [x0, x0 + w) from the zoom node.
  window() {
    if (this.zoom) { const z = this.node(this.zoom.d, this.zoom.i); return { x0: z.x, w: z.w || 1, d0: this.zoom.d }; }
    const r = this.root();
    return { x0: 0, w: (r && r.w) || 1, d0: 0 };
  }

  // Where node (d, i) is drawn, in CSS pixels, or null when it is not visible.
  rect(d, i) {
    const W = this.canvas.clientWidth, win = this.window(), n = this.node(d, i);
    let px, pw;
    if (d < win.d0) { px = 0; pw = W; }
    else {
      if (n.x + n.w <= win.x0 || n.x >= win.x0 + win.w) return null;
      px = ((n.x - win.x0) / win.w) * W;
      pw = (n.w / win.w) * W;
    }
    const y = this.mode === 'icicle' ? d * ROW : (this.levels.length - 1 - d) * ROW;
    return { x: px, y, w: pw, h: ROW - 1 };
  }

  // On the zoom path (ancestors drawn full width) or inside the zoom window.
  visible(d, i) {
    const win = this.window();
    if (d >= win.d0) return true;
    return this.zoomPath().some((p) => p.d === d && p.i === i);
  }

  color(n) {
    if (!this.matches(n)) return '#d8d8d8';
    if (!this.double) return colorFor(n.name);
    let l, r;
    if (this.diffMode === 'absolute') { l = n.lw; r = n.rw; }
    else { l = this.leftTicks ? n.lw / this.leftTicks : 0; r = this.rightTicks ? n.rw / this.rightTicks : 0; }
    if (l === 0 && r === 0) return diffColor(0, 1);
    return diffColor(l === 0 ? 1 : (r - l) / l, 1);
  }

  render() {
    const c = this.canvas, W = c.clientWidth;
    const H = Math.max(1, this.levels.length) * ROW;
    const dpr = window.devicePixelRatio || 1;
    c.style.height = H + 'px';
    c.width = Math.max(1, Math.floor(W * dpr));
    c.height = Math.floor(H * dpr);
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = '12px ui-monospace, SFMono-Regular, Menlo, monospace';
    ctx.textBaseline = 'middle';
    const path = this.zoomPath(), d0 = this.window().d0;
    for (let d = 0; d < this.levels.length; d++) {
      const lv = this.levels[d];
      for (let i = 0; i < lv.length; i++) {
        if (d < d0 && !path.some((p) => p.d === d && p.i === i)) continue;
        const r = this.rect(d, i);
        if (!r || r.w < 0.5) continue;
        const n = lv[i];
        ctx.fillStyle = d < d0 ? '#c9c9c9' : this.color(n);
        ctx.fillRect(r.x, r.y, Math.max(r.w - 0.5, 0.5), r.h);
        if (r.w > 28) {
          const chars = Math.floor((r.w - 6) / 7.2);
          const label = n.name.length > chars ? n.name.slice(0, Math.max(chars - 1, 1)) + '…' : n.name;
          ctx.fillStyle = '#1a1a1a';
          ctx.fillText(label, r.x + 3, r.y + r.h / 2 + 1);
        }
      }
    }
  }

  // The node under a mouse event, as {d, i}, or null.
  hit(e) {
    const b = this.canvas.getBoundingClientRect();
    const px = e.clientX - b.left, py = e.clientY - b.top;
    let d = Math.floor(py / ROW);
    if (this.mode !== 'icicle') d = this.levels.length - 1 - d;
    if (d < 0 || d >= this.levels.length) return null;
    const win = this.window();
    if (d < win.d0) { const p = this.zoomPath().find((q) => q.d === d); return p ? { d, i: p.i } : null; }
    const x = win.x0 + (px / this.canvas.clientWidth) * win.w, lv = this.levels[d];
    let lo = 0, hi = lv.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, n = lv[mid];
      if (x < n.x) hi = mid - 1;
      else if (x >= n.x + n.w) lo = mid + 1;
      else return { d, i: mid };
    }
    return null;
  }

  tooltipLines(n) {
    const u = this.unit, root = this.root();
    if (!this.double) {
      return [n.name,
        `Self: ${formatValue(n.self, u)} (${percent(n.self, root.w)})`,
        `Total: ${formatValue(n.w, u)} (${percent(n.w, root.w)})`];
    }
    const lp = this.leftTicks ? n.lw / this.leftTicks : 0, rp = this.rightTicks ? n.rw / this.rightTicks : 0;
    const change = lp ? `${rp >= lp ? '+' : ''}${((100 * (rp - lp)) / lp).toFixed(1)}%` : (rp ? 'new' : '0%');
    return [n.name,
      `Left total: ${formatValue(n.lw, u)} (${percent(n.lw, this.leftTicks)}), self ${formatValue(n.lself, u)}`,
      `Right total: ${formatValue(n.rw, u)} (${percent(n.rw, this.rightTicks)}), self ${formatValue(n.rself, u)}`,
      `Change in share: ${change}`];
  }

  onMove(e) {
    const h = this.hit(e);
    if (!h) { this.tip.hidden = true; this.canvas.style.cursor = ''; return; }
    this.canvas.style.cursor = 'pointer';
    const lines = this.tooltipLines(this.node(h.d, h.i));
    this.tip.replaceChildren(...lines.map((l, k) => {
      const div = document.createElement('div');
      div.textContent = l;
      if (k === 0) div.className = 'tip-name';
      return div;
    }));
    this.tip.hidden = false;
    const parent = this.canvas.parentElement.getBoundingClientRect();
    let left = e.clientX - parent.left + 14, top = e.clientY - parent.top + 14;
    if (left + this.tip.offsetWidth > parent.width) left = Math.max(0, e.clientX - parent.left - this.tip.offsetWidth - 14);
    this.tip.style.left = left + 'px';
    this.tip.style.top = top + 'px';
  }

  onClick(e) {
    const h = this.hit(e);
    if (h) this.zoomTo(h.d, h.i);
  }

  // For tests and deep links: the centre (client coordinates) of the widest visible node named name.
  locate(name) {
    let best = null;
    this.levels.forEach((lv, d) => lv.forEach((n, i) => {
      if (n.name !== name || !this.visible(d, i)) return;
      const r = this.rect(d, i);
      if (r && (!best || r.w > best.w)) best = r;
    }));
    if (!best) return null;
    const b = this.canvas.getBoundingClientRect();
    return { x: b.left + best.x + Math.min(best.w / 2, 20), y: b.top + best.y + best.h / 2, w: best.w, left: b.left + best.x };
  }
}
