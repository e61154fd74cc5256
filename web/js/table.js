// table.js - the top table: function, self, total; sortable; a click reports the row.

import { formatValue, percent } from './format.js';

export class TopTable {
  constructor(container, { onPick } = {}) {
    this.onPick = onPick;
    this.sort = { key: 'self', desc: true };
    this.el = document.createElement('table');
    this.el.className = 'top-table';
    container.append(this.el);
    this.rows = [];
  }

  // top: the /api/v1/query?format=top document; unit: the sample unit.
  setData(top, unit) {
    this.rows = top.functions;
    this.total = top.total;
    this.unit = unit;
    this.render();
  }

  setSelected(name) { this.selected = name; this.render(); }

  header(key, label) {
    const th = document.createElement('th');
    th.textContent = label + (this.sort.key === key ? (this.sort.desc ? ' ▾' : ' ▴') : '');
    th.dataset.key = key;
    th.addEventListener('click', () => {
      this.sort = { key, desc: this.sort.key === key ? !this.sort.desc : key !== 'name' };
      this.render();
    });
    return th;
  }

  render() {
    const rows = [...this.rows];
    const { key, desc } = this.sort;
    rows.sort((a, b) => {
      const c = key === 'name' ? a.name.localeCompare(b.name) : a[key] - b[key];
      return desc ? -c : c;
    });
    const head = document.createElement('tr');
    head.append(this.header('name', 'Function'), this.header('self', 'Self'), this.header('total', 'Total'));
    const body = document.createElement('tbody');
    for (const r of rows.slice(0, 2000)) {
      const tr = document.createElement('tr');
      if (r.name === this.selected) tr.className = 'selected';
      const name = document.createElement('td');
      name.textContent = r.name;
      name.title = r.name;
      const self = document.createElement('td');
      self.textContent = `${formatValue(r.self, this.unit)} (${percent(r.self, this.total)})`;
      const total = document.createElement('td');
      total.textContent = `${formatValue(r.total, this.unit)} (${percent(r.total, this.total)})`;
      tr.append(name, self, total);
      tr.addEventListener('click', () => this.onPick && this.onPick(r.name));
      body.append(tr);
    }
    const thead = document.createElement('thead');
    thead.append(head);
    this.el.replaceChildren(thead, body);
  }
}

// The fleet table: the top functions of the whole selection, each row with the number of
// groups (services, versions, ...) that spend it; a click opens the groups, largest first,
// and each group opens the single view of that group and function.
export class FleetTable {
  constructor(container, { onOpen } = {}) {
    this.onOpen = onOpen;
    this.el = document.createElement('table');
    this.el.className = 'top-table fleet-table';
    container.append(this.el);
    this.open = new Set();
  }

  // doc: /api/v1/query?format=top&group_by=LABEL; unit: the sample unit.
  setData(doc, unit) {
    this.doc = doc;
    this.unit = unit;
    this.open.clear();
    this.render();
  }

  cell(text, title) {
    const td = document.createElement('td');
    td.textContent = text;
    if (title) td.title = title;
    return td;
  }

  groupRows(f) {
    const by = this.doc.groupBy;
    const t = document.createElement('table');
    for (const g of f.groups) {
      const tr = document.createElement('tr');
      const name = by.map((k) => `${k}=${g.labels[k] === undefined ? '(none)' : g.labels[k]}`).join(', ');
      const open = document.createElement('button');
      open.textContent = 'Open';
      open.addEventListener('click', (e) => { e.stopPropagation(); this.onOpen && this.onOpen(by, g.labels, f.name); });
      const act = document.createElement('td');
      act.append(open);
      tr.append(this.cell(name), this.cell(`${formatValue(g.self, this.unit)} (${percent(g.self, f.self)})`),
                this.cell(`${formatValue(g.total, this.unit)} (${percent(g.total, f.total)})`), act);
      t.append(tr);
    }
    const row = document.createElement('tr');
    row.className = 'groups';
    const td = document.createElement('td');
    td.colSpan = 4;
    td.append(t);
    row.append(td);
    return row;
  }

  render() {
    const head = document.createElement('tr');
    for (const h of ['Function', 'Self', 'Total', `Spent in (${this.doc.groupBy.join(', ')})`]) head.append(this.cell(h));
    const body = document.createElement('tbody');
    for (const f of this.doc.functions) {
      const tr = document.createElement('tr');
      tr.append(this.cell(f.name, f.name), this.cell(`${formatValue(f.self, this.unit)} (${percent(f.self, this.doc.total)})`),
                this.cell(`${formatValue(f.total, this.unit)} (${percent(f.total, this.doc.total)})`),
                this.cell(`${f.groups.length} ${f.groups.length === 1 ? 'group' : 'groups'} ${this.open.has(f.name) ? '▾' : '▸'}`));
      tr.addEventListener('click', () => {
        if (this.open.has(f.name)) this.open.delete(f.name); else this.open.add(f.name);
        this.render();
      });
      body.append(tr);
      if (this.open.has(f.name)) body.append(this.groupRows(f));
    }
    const thead = document.createElement('thead');
    thead.append(head);
    this.el.replaceChildren(thead, body);
  }
}

// The diff table: per function, its self on each side and the change, largest change
// first. rel: the change in share of each side's total (what the relative colouring
// shows), else in absolute value.
export class DiffTable {
  constructor(container) {
    this.el = document.createElement('table');
    this.el.className = 'top-table diff-table';
    container.append(this.el);
  }

  // left, right: /api/v1/query?format=top documents of the two sides.
  setData(left, right, unit, rel) {
    const rows = new Map();
    for (const f of left.functions) rows.set(f.name, { name: f.name, l: f.self, r: 0 });
    for (const f of right.functions) (rows.get(f.name) || rows.set(f.name, { name: f.name, l: 0, r: 0 }).get(f.name)).r = f.self;
    const lt = left.total || 1, rt = right.total || 1;
    const change = (x) => (rel ? (100 * x.r) / rt - (100 * x.l) / lt : x.r - x.l);
    const list = [...rows.values()].filter((x) => x.l || x.r).sort((a, b) => Math.abs(change(b)) - Math.abs(change(a)));
    const head = document.createElement('tr');
    for (const h of ['Function', 'Left self', 'Right self', rel ? 'Change in share' : 'Change']) {
      const th = document.createElement('th');
      th.textContent = h;
      head.append(th);
    }
    const body = document.createElement('tbody');
    for (const x of list.slice(0, 2000)) {
      const tr = document.createElement('tr'), c = change(x);
      const cells = [x.name, `${formatValue(x.l, unit)} (${percent(x.l, lt)})`, `${formatValue(x.r, unit)} (${percent(x.r, rt)})`,
        rel ? `${c >= 0 ? '+' : ''}${c.toFixed(2)} pp` : `${c >= 0 ? '+' : ''}${formatValue(c, unit)}`];
      for (const v of cells) { const td = document.createElement('td'); td.textContent = v; td.title = v; tr.append(td); }
      tr.className = c > 0 ? 'grew' : c < 0 ? 'shrank' : '';
      body.append(tr);
    }
    const thead = document.createElement('thead');
    thead.append(head);
    this.el.replaceChildren(thead, body);
    this.el.dataset.rows = String(list.length);
  }
}
