// app.js - the Hearth UI: query bar, chart, flame graph, table, diff, single profiles, embed.
//
// All state lives in the URL (query, from, until, view, ...), so a link reproduces a
// view and the back button works. The UI only calls the public REST API (api.js).

import { Api, ApiError } from './api.js';
import { FlameGraph } from './flamegraph.js';
import { TimeSeries } from './timeseries.js';
import { DiffTable, FleetTable, TopTable } from './table.js';
import { Heatmap } from './heatmap.js';
import { formatTime, formatValue, percent, plural, sampleUnit, typeName } from './format.js';

const $ = (id) => document.getElementById(id);
const EMBED = location.pathname.replace(/\/+$/, '') === '/embed';
const PRESETS = [['5m', 'Last 5 minutes'], ['15m', 'Last 15 minutes'], ['1h', 'Last hour'], ['6h', 'Last 6 hours'],
                 ['24h', 'Last 24 hours'], ['7d', 'Last 7 days']];

// ---- URL state ----

const URL_KEYS = { query: 'query', from: 'from', until: 'until', view: 'view', show: 'show', mode: 'mode',
  search: 'search', profile: 'profile', tenant: 'tenant', theme: 'theme', rightQuery: 'right_query',
  leftFrom: 'left_from', leftUntil: 'left_until', rightFrom: 'right_from', rightUntil: 'right_until', cmp: 'cmp',
  focus: 'focus', ignore: 'ignore', hide: 'hide', fn: 'fn', groupBy: 'group_by', layout: 'layout', points: 'points' };
const GROUP_COLORS = ['#d9480f', '#1971c2', '#2f9e44', '#ae3ec9', '#f08c00', '#0c8599', '#e64980', '#5c940d', '#868e96'];
const FILTERS = ['focus', 'ignore', 'hide']; // pprof's stack filters, sent with every merge
// Values equal to these are left out of the URL, to keep links short.
const DEFAULTS = { from: 'now-1h', until: 'now', view: EMBED ? 'flamegraph' : 'single', show: 'both', mode: 'icicle',
  leftFrom: 'now-2h', leftUntil: 'now-1h', rightFrom: 'now-1h', rightUntil: 'now', cmp: 'relative', layout: 'diff' };

function readState() {
  const p = new URLSearchParams(location.search);
  const s = {};
  for (const [k, name] of Object.entries(URL_KEYS)) s[k] = p.get(name) || DEFAULTS[k] || '';
  return s;
}

function writeState(s, replace) {
  const p = new URLSearchParams();
  for (const [k, name] of Object.entries(URL_KEYS)) if (s[k] && s[k] !== DEFAULTS[k]) p.set(name, s[k]);
  const url = `${location.pathname}${p.toString() ? '?' + p : ''}`;
  if (url !== location.pathname + location.search) history[replace ? 'replaceState' : 'pushState'](null, '', url);
}

// ---- time ----

const UNIT_MS = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 7 * 86400e3 };

// Resolves the forms the server accepts (now, now-1h, unix s/ms/ns digits, RFC 3339) to ms.
export function resolveTime(s, now = Date.now()) {
  if (!s || s === 'now') return now;
  const rel = /^now-(\d+)([smhdw])$/.exec(s);
  if (rel) return now - Number(rel[1]) * UNIT_MS[rel[2]];
  if (/^\d+$/.test(s)) {
    if (s.length >= 19) return Math.floor(Number(s) / 1e6);
    if (s.length >= 16) return Math.floor(Number(s) / 1e3);
    if (s.length >= 13) return Number(s);
    return Number(s) * 1000;
  }
  const t = Date.parse(s);
  return Number.isNaN(t) ? now : t;
}

function splitQuery(q) {
  const i = q.indexOf('{');
  return i < 0 ? { type: q.trim(), sel: '' } : { type: q.slice(0, i).trim(), sel: q.slice(i).trim() };
}

// ---- the app ----

class App {
  constructor() {
    this.state = readState();
    this.firstVisit = !new URLSearchParams(location.search).get('query'); // no query chosen yet
    this.diffChosen = new URLSearchParams(location.search).has('left_from'); // else halves of the data
    this.api = new Api({ tenant: this.state.tenant, token: localStorage.getItem('hearth.token') || '' });
    this.loadSeq = 0;
    this.applyTheme();
    document.body.classList.toggle('embed', EMBED);
    this.fg = new FlameGraph($('graph-pane'), { onZoom: (path) => this.renderBreadcrumb(path),
                                                onPick: (name) => this.pickFunction(name) });
    this.table = new TopTable($('table-pane'), { onPick: (name) => this.pickFunction(name) });
    this.diffTable = new DiffTable($('diff-table-pane'));
    if (!EMBED) this.fleet = new FleetTable($('fleet-table'), { onOpen: (by, labels, fn) => this.openGroup(by, labels, fn) });
    if (!EMBED) { // the function pane's sandwich: its callers (inverted) and callees as flame graphs
      this.fnCallers = new FlameGraph($('fn-callers-graph'), { className: 'flame-canvas-fn' });
      this.fnCallees = new FlameGraph($('fn-callees-graph'), { className: 'flame-canvas-fn' });
      // the diff's side-by-side layout: each side's own flame graph
      this.sideLeft = new FlameGraph($('side-left-graph'), { className: 'flame-canvas-side' });
      this.sideRight = new FlameGraph($('side-right-graph'), { className: 'flame-canvas-side' });
      this.heatmap = new Heatmap($('heatmap-graph'), { onPick: (ex) => this.openExemplar(ex) });
    }
    this.chart = new TimeSeries($('chart'), { onSelect: (a, b) => this.onChartSelect(a, b) });
    this.bindControls();
    window.addEventListener('popstate', () => { this.state = readState(); this.syncControls(); this.load(); });
    window.__hearth = this; // for browser tests and the console
  }

  applyTheme() {
    const t = this.state.theme || localStorage.getItem('hearth.theme') || 'light';
    document.documentElement.dataset.theme = t;
  }

  set(patch, { replace = false, reload = true } = {}) {
    Object.assign(this.state, patch);
    writeState(this.state, replace);
    this.syncControls();
    if (reload) this.load();
  }

  // ---- controls ----

  bindControls() {
    if (EMBED) return;
    const range = $('range');
    for (const [k, label] of PRESETS) range.add(new Option(label, 'now-' + k));
    range.add(new Option('Custom…', 'custom'));
    range.addEventListener('change', () => {
      if (range.value === 'custom') { $('custom').hidden = false; return; }
      this.set({ from: range.value, until: 'now' });
    });
    $('custom-apply').addEventListener('click', () => {
      const f = Date.parse($('from').value), u = Date.parse($('until').value);
      if (Number.isNaN(f) || Number.isNaN(u) || u <= f) return this.showStatus('error', 'Pick a custom range whose end is after its start.');
      this.set({ from: String(f), until: String(u) });
    });
    $('type').addEventListener('change', () => this.set({ query: $('type').value + this.selector(), profile: '' }));
    $('service').addEventListener('change', () => this.set({
      query: splitQuery(this.state.query).type + withService(this.selector(), $('service').value), profile: '', fn: '' }));
    $('fn-close').addEventListener('click', () => this.set({ fn: '' }));
    document.addEventListener('keydown', (e) => {
      const typing = ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement && document.activeElement.tagName);
      if (e.key === '/' && !typing) {
        e.preventDefault();
        $('search').focus();
      } else if (e.key === 'Escape' && !typing) {
        this.fg.resetZoom();
        if (this.state.fn) this.set({ fn: '' });
      }
    });
    $('refresh').addEventListener('click', () => this.applyQueryInput());
    $('selector').addEventListener('keydown', (e) => this.onSelectorKey(e));
    $('selector').addEventListener('input', () => this.suggest());
    $('selector').addEventListener('focus', () => this.suggest());
    $('selector').addEventListener('blur', () => setTimeout(() => { $('suggest').hidden = true; }, 150));
    document.querySelectorAll('.tabs a').forEach((a) => a.addEventListener('click', (e) => {
      e.preventDefault();
      this.set({ view: a.dataset.view, profile: '' });
    }));
    $('search').addEventListener('input', () => {
      this.fg.setSearch($('search').value);
      this.table.setSelected('');
      this.set({ search: $('search').value }, { replace: true, reload: false });
      this.renderMatch();
    });
    $('mode').addEventListener('click', () => this.set({ mode: this.state.mode === 'icicle' ? 'flame' : 'icicle' }, { reload: false }));
    $('reset-zoom').addEventListener('click', () => this.fg.resetZoom());
    $('show').addEventListener('change', () => this.set({ show: $('show').value }, { reload: false }));
    $('cmp').addEventListener('change', () => this.set({ cmp: $('cmp').value }, { reload: this.state.view === 'diff' }));
    $('layout').addEventListener('change', () => this.set({ layout: $('layout').value }, { reload: this.state.view === 'diff' }));
    $('points').addEventListener('change', () => this.set({ points: $('points').value }));
    $('theme-toggle').addEventListener('click', () => {
      const t = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
      localStorage.setItem('hearth.theme', t);
      this.set({ theme: '' }, { reload: false });
      document.documentElement.dataset.theme = t;
      this.chart.render();
    });
    $('diff-apply').addEventListener('click', () => {
      this.diffChosen = true;
      this.set({
        leftFrom: timeParam($('left-from').value), leftUntil: timeParam($('left-until').value),
        rightFrom: timeParam($('right-from').value), rightUntil: timeParam($('right-until').value),
        rightQuery: $('right-query').value.trim() });
    });
    $('download').addEventListener('click', (e) => { e.preventDefault(); this.downloadPprof(); });
    $('single-back').addEventListener('click', () => this.set({ profile: '' }));
    $('group-by').addEventListener('change', () => this.set({ groupBy: $('group-by').value }));
    for (const k of FILTERS) {
      $(k).addEventListener('keydown', (e) => { if (e.key === 'Enter') this.set({ [k]: $(k).value.trim() }); });
      $(k).addEventListener('change', () => this.set({ [k]: $(k).value.trim() }));
    }
  }

  // The stack filters of the current state, as API parameters.
  filters() {
    const f = {};
    for (const k of FILTERS) if (this.state[k]) f[k] = this.state[k];
    return f;
  }

  selector() { return $('selector').value.trim(); }

  // The service picker: service_name's values. A first visit (no query in the URL) starts on
  // the busiest service of the range, as Pyroscope does, not on the merge of all of them.
  async loadServices(pickBusiest) {
    const s = this.state, { type } = splitQuery(s.query);
    const [vals, top] = await Promise.all([
      this.api.labelValues('service_name', type, s.from, s.until),
      pickBusiest ? this.api.timeseries(type, s.from, s.until, { group_by: 'service_name', limit: 1 }) : null]);
    const names = vals.values || vals.names || [];
    $('service').replaceChildren(new Option('All services', ''), ...names.map((n) => new Option(n, n)));
    const labels = await this.api.labelNames(type, s.from, s.until);
    $('group-by').replaceChildren(new Option('none', ''), ...(labels.names || []).filter((n) => !n.startsWith('__'))
      .map((n) => new Option(n, n)));
    const busiest = top && top.groups && top.groups[0] && top.groups[0].labels.service_name;
    if (busiest) {
      this.state.query = type + withService(splitQuery(s.query).sel, busiest);
      writeState(this.state, true);
    }
  }

  applyQueryInput() {
    const sel = this.selector();
    if (sel && !sel.startsWith('{')) return this.showStatus('error', 'Write label matchers in braces, e.g. {service_name="api", env="prod"}.');
    this.set({ query: ($('type').value || splitQuery(this.state.query).type) + sel });
  }

  syncControls() {
    const s = this.state;
    document.documentElement.dataset.view = s.view;
    document.documentElement.dataset.show = s.show;
    this.fg.setMode(s.mode);
    this.fg.setDiffMode(s.cmp);
    if (EMBED) return;
    const { type, sel } = splitQuery(s.query);
    if ($('type').value !== type && [...$('type').options].some((o) => o.value === type)) $('type').value = type;
    if (document.activeElement !== $('selector')) $('selector').value = sel;
    const preset = [...$('range').options].find((o) => o.value === s.from && s.until === 'now');
    $('range').value = preset ? preset.value : 'custom';
    $('custom').hidden = !!preset;
    if (!preset) {
      $('from').value = toLocalInput(resolveTime(s.from));
      $('until').value = toLocalInput(resolveTime(s.until));
    }
    document.querySelectorAll('.tabs a').forEach((a) => a.classList.toggle('active', a.dataset.view === s.view));
    $('mode').textContent = s.mode === 'icicle' ? 'Icicle ▾' : 'Flame ▴';
    $('show').value = s.show;
    $('cmp').value = s.cmp;
    $('layout').value = s.layout;
    $('points').value = s.points || 'profiles';
    $('search').value = s.search;
    $('left-from').value = timeText(s.leftFrom); $('left-until').value = timeText(s.leftUntil);
    $('right-from').value = timeText(s.rightFrom); $('right-until').value = timeText(s.rightUntil);
    $('right-query').value = s.rightQuery;
    for (const k of FILTERS) if (document.activeElement !== $(k)) $(k).value = s[k];
    if ([...$('group-by').options].some((o) => o.value === s.groupBy)) $('group-by').value = s.groupBy;
    const svc = serviceOf(sel);
    if ([...$('service').options].some((o) => o.value === svc)) $('service').value = svc;
  }

  // ---- label autocomplete: names after `{` or `,`, values inside quotes ----

  async suggest() {
    const input = $('selector'), list = $('suggest');
    const before = input.value.slice(0, input.selectionStart);
    const type = $('type').value;
    const valueCtx = /([A-Za-z_][\w.]*)\s*(?:=~|!=|!~|=)\s*"([^"]*)$/.exec(before);
    const nameCtx = /(?:^|[{,])\s*([A-Za-z_][\w.]*)?$/.exec(before);
    let items = [], prefix = '';
    try {
      if (valueCtx) {
        prefix = valueCtx[2];
        const r = await this.api.labelValues(valueCtx[1], type, this.state.from, this.state.until);
        items = r.values.map((v) => ({ text: v, insert: v.slice(prefix.length) + '"' }));
      } else if (nameCtx && (before.includes('{') || before === '')) {
        prefix = nameCtx[1] || '';
        const r = await this.api.labelNames(type, this.state.from, this.state.until);
        items = r.names.map((n) => ({ text: n, insert: (before === '' ? '{' : '') + n.slice(prefix.length) + '="' }));
      }
    } catch { items = []; }
    items = items.filter((it) => it.text.startsWith(prefix));
    list.replaceChildren(...items.slice(0, 50).map((it, k) => {
      const li = document.createElement('li');
      li.textContent = it.text;
      if (k === 0) li.className = 'active';
      li.addEventListener('mousedown', (e) => { e.preventDefault(); this.complete(it); });
      return li;
    }));
    this.suggestions = items.slice(0, 50);
    list.hidden = items.length === 0 || document.activeElement !== input;
  }

  complete(it) {
    const input = $('selector'), at = input.selectionStart;
    let v = input.value.slice(0, at) + it.insert + input.value.slice(at);
    if (v.startsWith('{') && !v.includes('}')) v += '}';
    input.value = v;
    const pos = at + it.insert.length;
    input.setSelectionRange(pos, pos);
    this.suggest();
  }

  onSelectorKey(e) {
    const list = $('suggest'), lis = [...list.children];
    const cur = lis.findIndex((li) => li.classList.contains('active'));
    if (!list.hidden && (e.key === 'ArrowDown' || e.key === 'ArrowUp')) {
      e.preventDefault();
      const next = (cur + (e.key === 'ArrowDown' ? 1 : lis.length - 1)) % lis.length;
      lis.forEach((li, k) => li.classList.toggle('active', k === next));
    } else if (e.key === 'Tab' && !list.hidden && cur >= 0) {
      e.preventDefault();
      this.complete(this.suggestions[cur]);
    } else if (e.key === 'Enter') {
      e.preventDefault();
      list.hidden = true;
      this.applyQueryInput();
    } else if (e.key === 'Escape') {
      list.hidden = true;
    }
  }

  // ---- loading ----

  showStatus(kind, text) {
    const el = $('status');
    el.className = 'status ' + kind;
    el.textContent = text;
    el.hidden = !text;
  }

  async init() {
    this.syncControls();
    if (!EMBED) {
      try {
        const r = await this.api.profileTypes();
        const types = r.profileTypes.map((t) => t.id);
        $('type').replaceChildren(...types.map((t) => {
          const o = new Option(typeName(t), t);
          o.title = t;
          return o;
        }));
        if (!types.length) { /* a new store: the hint alone, no toolbar or empty panes */
          setEmpty(true);
          this.showStatus('empty', 'No profiles stored yet. Push one, e.g.: curl --data-binary @cpu.pb.gz "' + location.origin +
            '/ingest?name=myapp&format=pprof"');
          return;
        }
        const { type } = splitQuery(this.state.query);
        if (!types.includes(type)) {
          const cpu = types.find((t) => t.startsWith('process_cpu:')) || types[0];
          this.state.query = cpu + splitQuery(this.state.query).sel;
          writeState(this.state, true);
        }
        await this.loadServices(this.firstVisit);
        this.syncControls();
      } catch (e) {
        return this.showStatus('error', errorText(e));
      }
    }
    await this.load();
  }

  async load() {
    setEmpty(false);
    const s = this.state, seq = ++this.loadSeq;
    if (!s.query) return this.showStatus('error', 'No query: add ?query=TYPE{labels} to the URL.');
    this.showStatus('loading', 'Loading…');
    try {
      if (s.view === 'diff') await this.loadDiff(seq);
      else if (s.view === 'profiles') await this.loadProfiles(seq);
      else if (s.view === 'fleet') await this.loadFleet(seq);
      else if (s.view === 'heatmap') await this.loadHeatmap(seq);
      else await this.loadSingle(seq);
    } catch (e) {
      if (seq === this.loadSeq) this.showStatus('error', errorText(e));
    }
  }

  range() { return { from: resolveTime(this.state.from), until: resolveTime(this.state.until) }; }

  async loadChart(query, from, until, bands) {
    const by = !EMBED && this.state.view === 'single' ? this.state.groupBy : '';
    const ts = await this.api.timeseries(query, from, until, { ...this.filters(), ...(by ? { group_by: by, limit: 8 } : {}) });
    return () => {
      this.chart.setData(ts.points, sampleUnit(ts.profileType), { from: resolveTime(from), until: resolveTime(until) });
      this.chart.setBands(bands || []);
      this.renderGroups(by, ts);
    };
  }

  // One line per value of the group-by label (the largest 8, the rest as "other"), and a
  // legend whose entries narrow the selector to their value.
  renderGroups(by, ts) {
    const legend = $('legend');
    const groups = by && ts.groups ? ts.groups.map((g, i) => ({
      name: g.labels[by] === undefined ? `(no ${by})` : g.labels[by], value: g.labels[by] || '', points: g.points,
      total: g.total, color: GROUP_COLORS[i % GROUP_COLORS.length] })) : [];
    if (by && ts.other) groups.push({ name: `other (${ts.other.groups})`, points: ts.other.points, total: ts.other.total,
      color: GROUP_COLORS[GROUP_COLORS.length - 1], other: true });
    this.chart.setGroups(groups);
    if (!legend) return;
    legend.hidden = !groups.length;
    legend.replaceChildren(...groups.map((g) => {
      const b = document.createElement('button');
      const sw = document.createElement('i');
      sw.style.background = g.color;
      b.append(sw, `${g.name} `);
      b.title = g.other ? 'the remaining values' : `show only ${by}="${g.value}"`;
      b.disabled = !!g.other;
      if (!g.other) b.addEventListener('click', () => this.set({
        query: splitQuery(this.state.query).type + withLabel(this.selector(), by, g.value), groupBy: '' }));
      return b;
    }));
  }

  async loadSingle(seq) {
    const s = this.state, unit = sampleUnit(splitQuery(s.query).type);
    const needGraph = !EMBED || s.view === 'flamegraph', needTable = !EMBED || s.view === 'table';
    const needChart = !EMBED || s.view === 'timeseries';
    const [fb, top, drawChart] = await Promise.all([
      needGraph ? this.api.flamegraph(s.query, s.from, s.until, s.profile, this.filters()) : null,
      needTable ? this.api.top(s.query, s.from, s.until, s.profile, this.filters()) : null,
      needChart ? this.loadChart(s.query, s.from, s.until) : null]);
    if (seq !== this.loadSeq) return;
    if (drawChart) drawChart();
    if (fb) this.fg.setData(fb, unit);
    if (top) this.table.setData(top, unit);
    if (fb) { this.fg.setSearch(s.search); this.renderMatch(); }
    const total = fb ? fb.flamebearer.numTicks : top ? top.total : 1;
    if (!EMBED) {
      $('single-banner').hidden = !s.profile;
      if (s.profile) $('single-info').textContent = `One profile: ${formatTime(Number(s.profile.split('-')[1]) / 1e6)}, ` +
        `${plural(fb.metadata.profiles, 'profile')}, total ${formatValue(fb.flamebearer.numTicks, unit)}`;
      $('summary').textContent = fb ? `${plural(fb.metadata.profiles, 'profile')}, total ${formatValue(total, unit)} (${fb.metadata.aggregation})` : '';
    }
    if (!total && s.view !== 'timeseries') this.showStatus('empty', `No data: nothing matches ${s.query} in this time range.`);
    else this.showStatus('', '');
    setEmpty(!total && s.view !== 'timeseries');
    if (!EMBED) await this.loadFunction(seq, unit);
  }

  // The picked function (state fn): its callers and callees one level deep (the sandwich
  // view's first rows, go tool pprof -peek's numbers) and its lines (-list's numbers).
  async loadFunction(seq, unit) {
    const s = this.state, pane = $('function-pane');
    pane.hidden = !s.fn || !!s.profile;
    if (pane.hidden) return;
    const [sw, lines, src] = await Promise.all([this.api.functionView('sandwich', s.query, s.from, s.until, s.fn, this.filters()),
      this.api.functionView('lines', s.query, s.from, s.until, s.fn, this.filters()),
      this.api.functionView('source', s.query, s.from, s.until, s.fn, this.filters())]);
    if (seq !== this.loadSeq) return;
    const fnTotal = lines.total;
    $('fn-name').textContent = s.fn;
    $('fn-summary').textContent = `self ${formatValue(lines.self, unit)}, total ${formatValue(fnTotal, unit)}`;
    const rows = (id, items) => $(id).tBodies[0].replaceChildren(...items.map((cells) => {
      const tr = document.createElement('tr');
      for (const c of cells) { const td = document.createElement('td'); td.textContent = c; td.title = c; tr.append(td); }
      return tr;
    }));
    const level2 = (doc) => {
      const fb = doc.flamebearer, lv = fb.levels[2] || [], out = [];
      for (let i = 0; i < lv.length; i += 4) out.push([fb.names[lv[i + 3]], lv[i + 1]]);
      return out.sort((a, b) => b[1] - a[1]).map(([n, v]) => [n, `${formatValue(v, unit)} (${percent(v, fnTotal)})`]);
    };
    rows('fn-callers', level2(sw.callers));
    rows('fn-callees', level2(sw.callees));
    this.fnCallers.setData(sw.callers, unit);
    this.fnCallees.setData(sw.callees, unit);
    rows('fn-lines', lines.lines.map((l) => [`${l.file.split('/').pop()}:${l.line}`, formatValue(l.self, unit),
      formatValue(l.total, unit)]));
    this.showSource(src, unit);
  }

  // The function's source file with each line's self and total (format=source): read from
  // --source-dir or debuginfod; without the text, the lines that have values and why.
  showSource(src, unit) {
    $('fn-source-file').textContent = src.origin ? `${src.file} (${src.origin})` : (src.error || '');
    $('fn-source').tBodies[0].replaceChildren(...src.lines.map((l) => {
      const tr = document.createElement('tr');
      if (l.total) tr.className = 'hot';
      for (const c of [String(l.line), l.self ? formatValue(l.self, unit) : '', l.total ? formatValue(l.total, unit) : '',
        l.text ?? '']) {
        const td = document.createElement('td');
        td.textContent = c;
        tr.append(td);
      }
      return tr;
    }));
    const box = $('fn-source').parentElement, hot = $('fn-source').querySelector('tr.hot');
    box.scrollTop = hot ? Math.max(0, hot.offsetTop - 3 * hot.offsetHeight) : 0; // the first line with values
  }

  // The side-by-side layout: the left and right merges as two flame graphs beside the
  // diff table (the diff flame graph hidden), each with its own total.
  async loadSides(seq, rq, unit) {
    const s = this.state, side = s.layout === 'side';
    document.body.classList.toggle('layout-side', side);
    $('side-pane').hidden = !side;
    if (!side) return;
    const [l, r] = await Promise.all([this.api.flamegraph(s.query, s.leftFrom, s.leftUntil, '', this.filters()),
      this.api.flamegraph(rq, s.rightFrom, s.rightUntil, '', this.filters())]);
    if (seq !== this.loadSeq) return;
    this.sideLeft.setData(l, unit);
    this.sideRight.setData(r, unit);
    $('side-left-title').textContent = `Left (baseline): ${formatValue(l.flamebearer.numTicks, unit)}`;
    $('side-right-title').textContent = `Right (comparison): ${formatValue(r.flamebearer.numTicks, unit)}`;
  }

  // A diff nobody chose ranges for compares the two halves of the data the selected
  // range holds, so a new install's first diff shows something.
  async defaultDiffRanges() {
    if (this.diffChosen) return;
    this.diffChosen = true;
    const s = this.state, ts = await this.api.timeseries(s.query, s.from, s.until, this.filters());
    const pts = ts.points.filter((p) => p.value);
    if (pts.length < 2) return;
    const a = pts[0].timestamp, b = pts[pts.length - 1].timestamp + ts.step, mid = Math.round((a + b) / 2);
    Object.assign(this.state, { leftFrom: String(a), leftUntil: String(mid - 1), rightFrom: String(mid), rightUntil: String(b) });
    writeState(this.state, true);
    this.syncControls();
  }

  async loadDiff(seq) {
    await this.defaultDiffRanges();
    const s = this.state, unit = sampleUnit(splitQuery(s.query).type);
    const rq = s.rightQuery || s.query;
    const lf = resolveTime(s.leftFrom), lu = resolveTime(s.leftUntil), rf = resolveTime(s.rightFrom), ru = resolveTime(s.rightUntil);
    const from = String(Math.min(lf, rf)), until = String(Math.max(lu, ru));
    const [doc, drawChart, ltop, rtop] = await Promise.all([
      this.api.diff({ left_query: s.query, right_query: rq, left_from: s.leftFrom, left_until: s.leftUntil,
                      right_from: s.rightFrom, right_until: s.rightUntil, ...this.filters() }),
      this.loadChart(s.query, from, until, [{ from: lf, until: lu, color: 'rgba(60,120,230,0.18)' },
                                            { from: rf, until: ru, color: 'rgba(230,120,40,0.22)' }]),
      this.api.top(s.query, s.leftFrom, s.leftUntil, '', this.filters()),
      this.api.top(rq, s.rightFrom, s.rightUntil, '', this.filters())]);
    if (seq !== this.loadSeq) return;
    drawChart();
    this.diffTable.setData(ltop, rtop, unit, s.cmp !== 'absolute');
    this.fg.setData(doc, unit);
    await this.loadSides(seq, rq, unit);
    this.fg.setSearch(s.search);
    this.renderMatch();
    const l = doc.leftTicks, r = doc.rightTicks;
    $('summary').textContent = `Left ${formatValue(l, unit)}, right ${formatValue(r, unit)}` +
      (l ? ` (${r >= l ? '+' : ''}${((100 * (r - l)) / l).toFixed(1)}%)` : '');
    setEmpty(!l && !r);
    if (!l && !r) this.showStatus('empty', 'No data on either side of the comparison.');
    else if (!l || !r) this.showStatus('empty', `No data on the ${l ? 'right' : 'left'} side: every frame shows as ${l ? 'gone' : 'new'}.`);
    else this.showStatus('', '');
  }

  async loadProfiles(seq) {
    const s = this.state, unit = sampleUnit(splitQuery(s.query).type);
    const [list, drawChart] = await Promise.all([this.api.profiles(s.query, s.from, s.until, 500),
                                                 this.loadChart(s.query, s.from, s.until)]);
    if (seq !== this.loadSeq) return;
    drawChart();
    const rows = list.profiles.map((p) => {
      const tr = document.createElement('tr');
      const labels = Object.entries(p.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
      const cells = [formatTime(p.timestamp), labels, formatValue(p.total, unit)];
      for (const c of cells) { const td = document.createElement('td'); td.textContent = c; tr.append(td); }
      const act = document.createElement('td');
      const open = document.createElement('button');
      open.textContent = 'Open';
      open.addEventListener('click', () => this.set({ view: 'single', profile: p.id }));
      const dl = document.createElement('button');
      dl.textContent = 'pprof';
      dl.addEventListener('click', () => this.downloadPprof(p.id));
      act.append(open, ' ', dl);
      tr.append(act);
      tr.dataset.id = p.id;
      return tr;
    });
    $('profiles-body').replaceChildren(...rows);
    $('profiles-note').textContent = list.truncated ? `Showing the newest ${list.profiles.length} of ${list.count} profiles.` :
      `${plural(list.count, 'profile')}.`;
    if (!list.count) this.showStatus('empty', `No profiles of ${s.query} in this time range.`);
    else this.showStatus('', '');
  }

  // The fleet view: the selection's top functions (the 200 largest by self), each split by
  // the group-by label (service_name unless another is picked).
  async loadFleet(seq) {
    const s = this.state, unit = sampleUnit(splitQuery(s.query).type), by = s.groupBy || 'service_name';
    const [doc, drawChart] = await Promise.all([
      this.api.get('/api/v1/query', { query: s.query, from: s.from, until: s.until, format: 'top', group_by: by,
                                      limit: 200, ...this.filters() }),
      this.loadChart(s.query, s.from, s.until)]);
    if (seq !== this.loadSeq) return;
    drawChart();
    this.fleet.setData(doc, unit);
    const groups = new Set(doc.functions.flatMap((f) => f.groups.map((g) => JSON.stringify(g.labels)))).size;
    $('fleet-note').textContent = `Top ${doc.functions.length} functions of ${plural(doc.profiles, 'profile')}, total ` +
      `${formatValue(doc.total, unit)}, across ${groups} ${by} values. Click a function for where it is spent.`;
    setEmpty(!doc.total);
    if (!doc.total) this.showStatus('empty', `No data: nothing matches ${s.query} in this time range.`);
    else this.showStatus('', '');
  }

  // The heatmap view: the selection's profiles (or spans, points=spans) by time and value
  // (Connect's SelectHeatmap, 60 columns over the range); a cell opens its largest profile.
  async loadHeatmap(seq) {
    const s = this.state, { type, sel } = splitQuery(s.query), unit = sampleUnit(type), { from, until } = this.range();
    const step = Math.max(1, Math.ceil((until - from) / 60000)), spans = s.points === 'spans';
    const [doc, drawChart] = await Promise.all([
      this.api.connect('querier.v1.QuerierService/SelectHeatmap', {
        profileTypeID: type, labelSelector: sel || '{}', start: from, end: until, step,
        queryType: spans ? 'HEATMAP_QUERY_TYPE_SPAN' : 'HEATMAP_QUERY_TYPE_INDIVIDUAL',
        exemplarType: spans ? 'EXEMPLAR_TYPE_SPAN' : 'EXEMPLAR_TYPE_INDIVIDUAL' }),
      this.loadChart(s.query, s.from, s.until)]);
    if (seq !== this.loadSeq) return;
    drawChart();
    this.heatmap.setData(doc, from, until, step, (v) => formatValue(v, unit));
    const n = Number(this.heatmap.canvas.dataset.points);
    $('heatmap-note').textContent = `${n} ${spans ? 'spans' : 'profiles'} by time and value (darker: more); ` +
      'click a cell to open its largest profile.';
    if (!n) this.showStatus('empty', `No ${spans ? 'spans' : 'profiles'} of ${s.query} in this time range.`);
    else this.showStatus('', '');
  }

  // A heatmap cell's exemplar: a profile opens in the single view; a span names its trace.
  openExemplar(ex) {
    if (ex.profileId) return this.set({ view: 'single', profile: ex.profileId });
    $('heatmap-note').textContent = `Span ${ex.spanId}` + (ex.traceId ? ` of trace ${ex.traceId}` : '') +
      `: ${ex.value} in its largest profile.`;
  }

  // A fleet table group's Open: the single view narrowed to the group, on the function (a label
  // the group lacks becomes name="", which selects the series without it).
  openGroup(by, labels, fn) {
    let sel = this.selector();
    for (const k of by) sel = withLabel(sel, k, labels[k] || '');
    this.set({ view: 'single', query: splitQuery(this.state.query).type + sel, fn, groupBy: '' });
  }

  // Fetched rather than linked so that tenant and token headers go along.
  async downloadPprof(profile) {
    const s = this.state;
    try {
      const resp = await fetch(this.api.pprofUrl(s.query, s.from, s.until, profile || s.profile, this.filters()),
                               { headers: this.api.headers() });
      if (!resp.ok) throw new ApiError((await resp.json().catch(() => ({}))).error || `HTTP ${resp.status}`, resp.status);
      const a = document.createElement('a');
      a.href = URL.createObjectURL(await resp.blob());
      a.download = (profile ? `profile-${profile}` : 'merged') + '.pb.gz';
      document.body.append(a);
      a.click();
      a.remove();
    } catch (e) {
      this.showStatus('error', errorText(e));
    }
  }

  onChartSelect(a, b) {
    if (this.state.view !== 'diff') return this.set({ from: String(a), until: String(b) });
    const side = document.querySelector('input[name="drag-side"]:checked');
    if (side && side.value === 'left') this.set({ leftFrom: String(a), leftUntil: String(b) });
    else this.set({ rightFrom: String(a), rightUntil: String(b) });
  }

  pickFunction(name) {
    if (!EMBED && this.state.fn !== name) {
      this.state.fn = name;
      writeState(this.state, false);
      this.loadFunction(this.loadSeq, sampleUnit(splitQuery(this.state.query).type))
        .catch((e) => this.showStatus('error', errorText(e)));
    }
    this.fg.resetZoom();
    this.fg.setSelected(name);
    this.table.setSelected(name);
    if (!EMBED) $('search').value = '';
    this.renderMatch(name);
  }

  renderMatch() {
    if (EMBED) return;
    const m = this.fg.matchStats();
    $('match').textContent = m ? `${m.count} matching frames, ${percent(m.value, m.total)} of total` : '';
  }

  renderBreadcrumb(path) {
    if (EMBED) return;
    const nav = $('breadcrumb');
    const items = [{ d: 0, i: 0, name: 'total' }, ...path.filter((p) => p.d > 0)];
    nav.replaceChildren(...items.map((p, k) => {
      const a = document.createElement('a');
      a.textContent = p.name;
      a.href = '#';
      a.addEventListener('click', (e) => { e.preventDefault(); this.fg.zoomTo(p.d, p.i); });
      const span = document.createElement('span');
      if (k) span.append(' › ');
      span.append(a);
      return span;
    }));
  }
}

// Nothing to show: the flame graph's toolbar, breadcrumb and empty panes are hidden
// (style.css), leaving the status line that says why.
function setEmpty(empty) { document.documentElement.toggleAttribute('data-empty', empty); }

// A time parameter as the fields show it: a date for unix times, relative ones as typed.
function timeText(s) { return /^\d+$/.test(s || '') ? formatTime(resolveTime(s)) : s; }

// What a field's text means as a parameter: relative times and digits as they are, a date
// as unix milliseconds.
function timeParam(v) {
  v = (v || '').trim();
  if (!v || /^now/.test(v) || /^\d+$/.test(v)) return v;
  const t = Date.parse(v.replace(' ', 'T'));
  return Number.isNaN(t) ? v : String(t);
}

// The service_name="..." matcher of a selector, or '' when it has none (or another form).
function serviceOf(sel) {
  const m = /service_name\s*=\s*"([^"]*)"/.exec(sel || '');
  return m ? m[1] : '';
}

// sel with its matcher on label `name` set to name="value" (removed when value is empty and
// `drop`; for a group without the label, name="" selects the series that lack it).
function withLabel(sel, name, value, drop = false) {
  let inner = (sel || '').trim().replace(/^\{|\}$/g, '');
  const own = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*(=|!=|=~|!~)`);
  const parts = inner ? inner.split(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/).map((p) => p.trim()).filter((p) => p && !own.test(p)) : [];
  if (value || !drop) parts.unshift(`${name}="${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
  inner = parts.join(', ');
  return inner ? `{${inner}}` : '';
}

// sel with its service_name matcher set to svc (removed when svc is empty).
function withService(sel, svc) { return withLabel(sel, 'service_name', svc, true); }

function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function errorText(e) {
  if (e instanceof ApiError) {
    if (e.status === 400) return `Bad request: ${e.message}`;
    if (e.status === 401 || e.status === 403) return `Not allowed: ${e.message}`;
    if (e.status === 0) return e.message;
    return `Server error (${e.status}): ${e.message}`;
  }
  return `Error: ${e.message}`;
}

new App().init();
