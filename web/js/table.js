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
