// ui.test.mjs - drives the real UI in Debian's headless Chromium against a real ./hearth.
//
// Run by tests/integration/test_web.py (web_ui_in_headless_chromium), which starts the server,
// pushes real profiles and passes what the REST API answers as EXPECT (a JSON file):
// the UI must show the same numbers. Screenshots of each view go to OUT.
// Prints "browser: N passed" and exits non-zero on the first failure.

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const BASE = process.env.HEARTH_URL;
const OUT = process.env.OUT;
const E = JSON.parse(fs.readFileSync(process.env.EXPECT, 'utf8'));
fs.mkdirSync(OUT, { recursive: true });

let passed = 0;
const errors = [];
function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  passed++;
}

const q = (params) => new URLSearchParams({ tenant: E.tenant, from: E.from, until: E.until, ...params }).toString();

async function waitGraph(page, format = 'single') {
  await page.waitForFunction((f) => {
    const c = document.querySelector('.flame-canvas');
    return c && c.dataset.format === f && Number(c.dataset.total) > 0;
  }, format, { timeout: 20000 });
}

// The colour drawn at a point of the flame canvas, as [r, g, b].
async function pixelAt(page, x, y) {
  return page.evaluate(([x, y]) => {
    const c = document.querySelector('.flame-canvas'), b = c.getBoundingClientRect(), k = c.width / b.width;
    return [...c.getContext('2d').getImageData(Math.round((x - b.left) * k), Math.round((y - b.top) * k), 1, 1).data].slice(0, 3);
  }, [x, y]);
}

const locate = (page, name) => page.evaluate((n) => window.__hearth.fg.locate(n), name);

async function singleView(page) {
  await page.goto(`${BASE}/?${q({ query: E.query })}`);
  await waitGraph(page);
  const total = await page.$eval('.flame-canvas', (c) => Number(c.dataset.total));
  check(total === E.total, `root total ${total} == ${E.total}`);
  check((await page.textContent('#summary')).includes(E.totalText), 'summary shows the formatted total');
  check(!/\d{3}\.\d+ (ms|s|min|µs|KiB|MiB|GiB)/.test(await page.textContent('#summary')) && !/\b1 profiles/.test(await page.textContent('#summary')),
    'values carry three significant digits (not 350.00 ms), and one profile is singular');
  const root = await locate(page, 'total');
  await page.mouse.move(root.x, root.y);
  const tip = await page.textContent('.tooltip:not(.tooltip-side)');
  check(tip.includes('Total: ' + E.totalText) && tip.includes('(100.0%)'), `root tooltip: ${tip}`);
  const first = await page.$$eval('.top-table tbody tr:first-child td', (tds) => tds.map((t) => t.textContent));
  check(first[0] === E.top.name, `table top row ${first[0]} == ${E.top.name}`);
  check(first[1].startsWith(E.top.selfText), `top self ${first[1]} starts with ${E.top.selfText}`);
  await page.screenshot({ path: path.join(OUT, 'single.png') });

  // Search highlights the known function and reports its share of the total.
  await page.fill('#search', E.search.text);
  const match = await page.textContent('#match');
  const share = Number(/([\d.]+)% of total/.exec(match)[1]);
  check(Math.abs(share - E.search.percent) < 0.01, `search share ${share} ~ ${E.search.percent} (${match})`);
  const hit = await locate(page, E.search.name), other = await locate(page, E.search.other);
  const hc = await pixelAt(page, hit.left + 1.5, hit.y), oc = await pixelAt(page, other.left + 1.5, other.y);
  check(oc[0] === oc[1] && oc[1] === oc[2], `non-matching frame is grey: ${oc}`);
  check(!(hc[0] === hc[1] && hc[1] === hc[2]), `matching frame keeps its colour: ${hc}`);
  check(new URL(page.url()).searchParams.get('search') === E.search.text, 'search is in the URL');
  await page.screenshot({ path: path.join(OUT, 'search.png') });
  await page.reload();
  await waitGraph(page);
  check((await page.inputValue('#search')) === E.search.text, 'search survives a reload from the URL');
  await page.fill('#search', '');

  // Zoom: click a frame, it fills the width; the breadcrumb leads back.
  const z = await locate(page, E.zoom);
  await page.mouse.click(z.x, z.y);
  check((await page.$eval('.flame-canvas', (c) => c.dataset.zoom)) === E.zoom, 'zoomed into ' + E.zoom);
  const width = await page.$eval('.flame-canvas', (c) => c.clientWidth);
  const zoomed = await locate(page, E.zoom);
  check(Math.abs(zoomed.w - width) < 2, `zoomed frame spans the graph (${zoomed.w} of ${width})`);
  check((await page.textContent('#breadcrumb')).includes(E.zoom), 'breadcrumb names the zoomed frame');
  await page.screenshot({ path: path.join(OUT, 'zoom.png') });
  await page.click('#breadcrumb a:first-child');
  check((await page.$eval('.flame-canvas', (c) => c.dataset.zoom)) === '', 'breadcrumb root resets the zoom');

  // A table row focuses its function in the graph.
  await page.click('.top-table tbody tr:first-child');
  check((await page.evaluate(() => window.__hearth.fg.selected)) === E.top.name, 'table click selects the function');
  check((await page.textContent('#match')).includes('matching frames'), 'table click reports the function share');

  // Flame mode puts the root at the bottom.
  await page.click('#mode');
  check(new URL(page.url()).searchParams.get('mode') === 'flame', 'mode is in the URL');
  const canvasBox = await page.$eval('.flame-canvas', (c) => { const b = c.getBoundingClientRect(); return { top: b.top, h: b.height }; });
  const r2 = await locate(page, 'total');
  check(r2.y > canvasBox.top + canvasBox.h - 18, 'root is the bottom row in flame mode');
  await page.click('#mode');
}

// The chart's axes: ticks on round times, none repeated, the date where the day starts, the
// time zone shown; 3-5 round gridlines covering the data.
async function chartAxes(page) {
  await page.goto(`${BASE}/?${q({ query: E.query })}`);
  await waitGraph(page);
  await page.waitForFunction(() => document.querySelector('.ts-canvas').dataset.ticks);
  const d = await page.$eval('.ts-canvas', (c) => ({ ...c.dataset }));
  const ticks = JSON.parse(d.ticks), yt = JSON.parse(d.yticks);
  check(ticks.length >= 2 && new Set(ticks).size === ticks.length, `time ticks unique: ${d.ticks}`);
  check(ticks.every((t) => /^([A-Z][a-z]{2} \d{1,2} )?\d\d:\d\d(:\d\d)?$/.test(t)), `time ticks are clock times: ${d.ticks}`);
  check(/^[A-Z][a-z]{2} \d/.test(ticks[0]), `the first tick carries the date: ${ticks[0]}`);
  const secs = ticks.map((t) => Number(t.slice(-2)));
  check(secs.every((s) => s % 5 === 0), `ticks fall on round seconds: ${d.ticks}`);
  check(d.zone && d.zone.length > 0, `time zone shown: ${d.zone}`);
  check(yt.length >= 3 && yt.length <= 6 && yt[0] === 0, `3-5 gridlines: ${d.yticks}`);
  check(Number(d.runs) >= 1, 'the line is drawn');
  await page.screenshot({ path: path.join(OUT, 'chart.png'), clip: { x: 0, y: 0, width: 1400, height: 260 } });
}

// Group by: one chart line per value with a legend; a legend entry narrows the selector.
async function groupBy(page) {
  await page.goto(`${BASE}/?${q({ query: E.query })}`);
  await waitGraph(page);
  await page.waitForFunction(() => [...document.querySelectorAll('#group-by option')].some((o) => o.value === 'env'));
  await page.selectOption('#group-by', 'env');
  await page.waitForFunction(() => document.querySelector('.ts-canvas').dataset.groups === '2');
  const names = await page.$$eval('#legend button', (bs) => bs.map((b) => b.textContent.trim()));
  check(names.length === 2 && names.includes('canary') && names.includes('prod'), `legend: ${names}`);
  check(new URL(page.url()).searchParams.get('group_by') === 'env', 'group_by is in the URL');
  await page.screenshot({ path: path.join(OUT, 'group-by.png'), clip: { x: 0, y: 0, width: 1400, height: 300 } });
  await page.click('#legend button:has-text("canary")');
  await page.waitForFunction((t) => Number(document.querySelector('.flame-canvas').dataset.total) === t, E.canaryTotal,
    { timeout: 20000 });
  const u = new URL(page.url()).searchParams;
  check(u.get('query').includes('env="canary"') && !u.get('group_by'), `the legend narrows the query: ${u.get('query')}`);
}

// pprof's -focus/-hide as the filter bar: the graph, the table and the URL follow them.
async function stackFilters(page) {
  await page.goto(`${BASE}/?${q({ query: E.query })}`);
  await waitGraph(page);
  await page.fill('#focus', E.filter.focus);
  await page.press('#focus', 'Enter');
  await page.fill('#hide', E.filter.hide);
  await page.press('#hide', 'Enter');
  await page.waitForFunction((t) => Number(document.querySelector('.flame-canvas').dataset.total) === t, E.filter.total,
    { timeout: 20000 });
  const url = new URL(page.url()).searchParams;
  check(url.get('focus') === E.filter.focus && url.get('hide') === E.filter.hide, 'filters are in the URL');
  // Hiding frames keeps the total, so the total alone cannot tell the focus-only answer from the
  // focus+hide one: wait until the table has dropped the hidden frames.
  await page.waitForFunction((n) => {
    const tds = [...document.querySelectorAll('.top-table tbody tr td:first-child')];
    return tds.length && tds[0].textContent === n && !tds.some((t) => t.textContent.startsWith('runtime.'));
  }, E.filter.top, { timeout: 20000 }).catch(() => {});
  const names = await page.$$eval('.top-table tbody tr td:first-child', (tds) => tds.map((t) => t.textContent));
  check(names.every((n) => E.filter.names.includes(n)) && !names.some((n) => n.startsWith('runtime.')),
    `table shows only the filtered functions (${names.length})`);
  await page.screenshot({ path: path.join(OUT, 'filters.png') });
  await page.reload();
  await waitGraph(page);
  check((await page.inputValue('#focus')) === E.filter.focus, 'focus survives a reload from the URL');
  await page.fill('#focus', '');
  await page.press('#focus', 'Enter');
  await page.fill('#hide', '');
  await page.press('#hide', 'Enter');
  await page.waitForFunction((t) => Number(document.querySelector('.flame-canvas').dataset.total) === t, E.total,
    { timeout: 20000 });
}

// A first visit starts on the busiest service; types read as names; a table row opens the
// function's callers, callees and lines; Esc closes it; `/` focuses the search.
async function servicesAndFunctions(page) {
  await page.goto(`${BASE}/?${new URLSearchParams({ tenant: E.tenant, from: E.from, until: E.until })}`);
  await waitGraph(page);
  check(new URL(page.url()).searchParams.get('query').includes('service_name="shop"'), 'starts on the busiest service');
  check((await page.inputValue('#service')) === 'shop', 'the service picker shows it');
  const opt = await page.$eval('#type', (s) => ({ text: s.selectedOptions[0].textContent, title: s.selectedOptions[0].title }));
  check(opt.text === 'CPU' && opt.title.startsWith('process_cpu:cpu:'), `type shown by name: ${opt.text} (${opt.title})`);
  await page.click('.top-table tbody tr:first-child');
  await page.waitForSelector('#function-pane:not([hidden])');
  await page.waitForFunction((n) => document.querySelector('#fn-name').textContent === n, E.fn.name);
  await page.waitForFunction((e) => document.querySelectorAll('#fn-callers tbody tr').length === e.callers &&
    document.querySelectorAll('#fn-callees tbody tr').length === e.callees &&
    document.querySelectorAll('#fn-lines tbody tr').length === e.lines, E.fn, { timeout: 20000 });
  check(new URL(page.url()).searchParams.get('fn') === E.fn.name, 'the function is in the URL');
  await page.waitForFunction((e) => document.querySelectorAll('#fn-source tbody tr').length === e.rows, E.source,
    { timeout: 20000 });
  const src = await page.$$eval('#fn-source tbody tr', (trs) => ({
    hot: trs.filter((t) => t.classList.contains('hot')).length, first: trs[0] ? trs[0].cells[3].textContent : null }));
  check(src.hot === E.source.hot && src.first === E.source.first,
    `the source pane shows the file with its hot lines: ${JSON.stringify(src)}`);
  const sandwich = await page.$$eval('.flame-canvas-fn', (cs) => cs.map((c) => Number(c.dataset.total)));
  check(sandwich.length === 2 && sandwich.every((t) => t === E.fn.total), `sandwich graphs total the function: ${sandwich}`);
  await page.screenshot({ path: path.join(OUT, 'function.png'), fullPage: true });
  await page.click('body', { position: { x: 5, y: 5 } });
  await page.keyboard.press('Escape');
  await page.waitForSelector('#function-pane', { state: 'hidden' });
  check(!new URL(page.url()).searchParams.get('fn'), 'Esc closes the function pane');
  // A frame's right-click opens its function's pane too.
  const z = await locate(page, E.zoom);
  await page.mouse.click(z.x, z.y, { button: 'right' });
  await page.waitForFunction((n) => document.querySelector('#fn-name').textContent === n &&
    !document.querySelector('#function-pane').hidden, E.zoom);
  check(new URL(page.url()).searchParams.get('fn') === E.zoom, 'right-click on a frame opens its function');
  await page.keyboard.press('Escape');
  await page.waitForSelector('#function-pane', { state: 'hidden' });
  await page.keyboard.press('/');
  check(await page.evaluate(() => document.activeElement.id === 'search'), '/ focuses the search');
  await page.selectOption('#service', '');
  await waitGraph(page);
  check(!new URL(page.url()).searchParams.get('query').includes('service_name'), 'All services drops the matcher');
}

async function autocomplete(page) {
  await page.fill('#selector', '');
  await page.click('#selector');
  await page.keyboard.type('{');
  await page.waitForSelector('#suggest:not([hidden]) li');
  const names = await page.$$eval('#suggest li', (lis) => lis.map((l) => l.textContent));
  check(names.includes('env') && names.includes('service_name'), 'label names suggested: ' + names);
  await page.keyboard.type('env');
  await page.waitForFunction(() => [...document.querySelectorAll('#suggest li')].map((l) => l.textContent).join() === 'env');
  await page.keyboard.press('Tab');
  check((await page.inputValue('#selector')).startsWith('{env="'), 'Tab completes the label name');
  await page.waitForFunction(() => document.querySelectorAll('#suggest li').length === 2);
  const values = await page.$$eval('#suggest li', (lis) => lis.map((l) => l.textContent).sort());
  check(values.join() === 'canary,prod', 'label values suggested: ' + values);
  await page.keyboard.press('Tab');
  check((await page.inputValue('#selector')) === '{env="canary"}', 'value completes: ' + await page.inputValue('#selector'));
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('query').endsWith('{env="canary"}'));
  await waitGraph(page);
  // waitGraph may see the previous (all-env) graph before the new one replaces it on a busy
  // machine: wait for the canary's total, and report what was drawn if it never comes.
  await page.waitForFunction((t) => Number(document.querySelector('.flame-canvas')?.dataset.total) === t,
    E.canaryTotal, { timeout: 15000 }).catch(() => {});
  const total = await page.$eval('.flame-canvas', (c) => Number(c.dataset.total));
  check(total === E.canaryTotal, `canary total ${total} == ${E.canaryTotal}`);
}

async function chartDrag(page) {
  await page.goto(`${BASE}/?${q({ query: E.query })}`);
  await waitGraph(page);
  const b = await page.$eval('.ts-canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
  check(Number(await page.$eval('.ts-canvas', (c) => c.dataset.points)) > 0, 'the chart has points');
  await page.mouse.move(b.x + b.w * 0.3, b.y + b.h / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.w * 0.6, b.y + b.h / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction((f) => new URL(location.href).searchParams.get('from') !== f, String(E.from));
  const u = new URL(page.url()).searchParams;
  const f = Number(u.get('from')), t = Number(u.get('until'));
  check(f > E.from * 1000 && t < E.until * 1000 && t > f, `drag narrowed the range to ${f}..${t}`);
  check((await page.$eval('#range', (s) => s.value)) === 'custom', 'range picker shows a custom range');
}

async function diffView(page) {
  const p = { query: E.query, view: 'diff', left_from: E.diff.leftFrom, left_until: E.diff.leftUntil,
              right_from: E.diff.rightFrom, right_until: E.diff.rightUntil };
  await page.goto(`${BASE}/?${q(p)}`);
  await waitGraph(page, 'double');
  const total = await page.$eval('.flame-canvas', (c) => Number(c.dataset.total));
  check(total === E.diff.left + E.diff.right, `diff root spans both sides (${total})`);
  check((await page.textContent('#summary')).startsWith('Left ' + E.diff.leftText), 'diff summary');
  const n = await locate(page, E.zoom);
  await page.mouse.move(n.x, n.y);
  const tip = await page.textContent('.tooltip:not(.tooltip-side)');
  check(tip.includes('Left total') && tip.includes('Right total') && tip.includes('Change in share'), 'diff tooltip: ' + tip);
  const c = await pixelAt(page, n.left + 1.5, n.y);
  check(c[0] !== c[1] || c[1] !== c[2] || c[0] === 199, `diff node is coloured by change: ${c}`);
  await page.waitForFunction(() => Number(document.querySelector('.diff-table').dataset.rows) > 0);
  const dt = await page.$$eval('.diff-table tbody tr:first-child td', (tds) => tds.map((t) => t.textContent));
  check(dt.length === 4 && /pp$/.test(dt[3]), `the diff table lists functions with their change: ${dt}`);
  const cut = await page.$$eval('.diff-table tbody tr td:not(:first-child)',
    (tds) => tds.filter((t) => t.scrollWidth > t.clientWidth + 1).map((t) => t.textContent));
  check(cut.length === 0, `no value or share in the diff table is cut: ${cut.slice(0, 3)}`);
  check((await page.$eval('.diff-table', (t) => Number(t.dataset.rows))) === E.diff.functions,
    'one row per function of either side');
  await page.screenshot({ path: path.join(OUT, 'diff.png') });
  await page.selectOption('#cmp', 'absolute');
  check(new URL(page.url()).searchParams.get('cmp') === 'absolute', 'absolute mode is in the URL');
  const lf = await page.inputValue('#left-from');
  check(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(lf), `range fields show dates, not epoch numbers: ${lf}`);
  const cutDates = await page.$$eval('.diffbar input:not([type=radio])', (xs) => xs.filter((x) => x.value && x.scrollWidth > x.clientWidth).map((x) => x.value));
  check(cutDates.length === 0, `every range field shows its whole date: ${cutDates}`);
  await page.click('#diff-apply');
  check(new URL(page.url()).searchParams.get('left_from') === String(E.diff.leftFrom * 1000), 'a date field applies as unix ms');
  await waitGraph(page, 'double');
  check((await page.$eval('.flame-canvas', (c) => Number(c.dataset.total))) === E.diff.left + E.diff.right, 'same diff');

  // Side by side: each side's own flame graph below the diff, totals as each side's merge.
  await page.selectOption('#layout', 'side');
  await page.waitForFunction(() => document.querySelectorAll('.flame-canvas-side').length === 2 &&
    [...document.querySelectorAll('.flame-canvas-side')].every((c) => Number(c.dataset.total) > 0), null, { timeout: 20000 });
  const sides = await page.$$eval('.flame-canvas-side', (cs) => cs.map((c) => Number(c.dataset.total)));
  check(sides[0] === E.diff.left && sides[1] === E.diff.right, `side by side shows each side's total: ${sides}`);
  check(new URL(page.url()).searchParams.get('layout') === 'side', 'the layout is in the URL');
  await page.screenshot({ path: path.join(OUT, 'side-by-side.png'), fullPage: true });
  await page.selectOption('#layout', 'diff');
  await page.waitForSelector('#side-pane', { state: 'hidden' });
  // No ranges chosen: the diff compares the two halves of the data in the range.
  await page.goto(`${BASE}/?${q({ query: E.query, view: 'diff' })}`);
  await waitGraph(page, 'double');
  const u = new URL(page.url()).searchParams;
  check(Number(u.get('left_from')) >= E.from * 1000 && Number(u.get('right_until')) <= (E.until + 60) * 1000,
    `default halves within the data: ${u.get('left_from')}..${u.get('right_until')}`);
  const sum = await page.textContent('#summary');
  check(!/Left 0 ns|right 0 ns/.test(sum) && !(await page.isVisible('#status.empty')), `both halves have data: ${sum}`);
}

async function profilesView(page) {
  await page.goto(`${BASE}/?${q({ query: E.query, view: 'profiles' })}`);
  await page.waitForSelector('#profiles-body tr');
  const rows = await page.$$('#profiles-body tr');
  check(rows.length === E.profiles.count, `profiles listed: ${rows.length} == ${E.profiles.count}`);
  await page.screenshot({ path: path.join(OUT, 'profiles.png') });
  await page.click('#profiles-body tr:first-child button:has-text("Open")');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('profile'));
  await waitGraph(page);
  const total = await page.$eval('.flame-canvas', (c) => Number(c.dataset.total));
  check(total === E.profiles.firstTotal, `one profile opened: ${total} == ${E.profiles.firstTotal}`);
  check(await page.isVisible('#single-banner'), 'the single-profile banner shows');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const file = path.join(OUT, 'single.pb.gz');
  await dl.saveAs(file);
  check(fs.statSync(file).size > 100, 'pprof download');
  process.stdout.write(`download ${file}\n`);
}

// The heatmap: every profile a point in its time step and value bucket; a cell opens its
// largest profile in the single view.
async function heatmapView(page) {
  await page.goto(`${BASE}/?${q({ query: E.query, view: 'heatmap' })}`);
  await page.waitForFunction(() => Number(document.querySelector('.heatmap-canvas')?.dataset.points) > 0, null,
    { timeout: 20000 });
  const points = await page.$eval('.heatmap-canvas', (c) => Number(c.dataset.points));
  check(points === E.profiles.count, `heatmap points: ${points} == ${E.profiles.count} profiles`);
  await page.screenshot({ path: path.join(OUT, 'heatmap.png') });
  const target = await page.evaluate(() => { // the centre of the first cell with an exemplar, and its value
    const h = window.__hearth.heatmap, c = h.cells.find((x) => x.exemplar), g = h.geometry();
    const r = h.canvas.getBoundingClientRect();
    return { x: r.left + ((c.ts - h.start) / h.step + 0.5) * g.cw, y: r.top + g.H - (c.row + 0.5) * g.rh,
             value: Number(c.exemplar.value) };
  });
  await page.mouse.click(target.x, target.y);
  await page.waitForFunction(() => new URL(location.href).searchParams.get('profile'));
  await waitGraph(page);
  const total = await page.$eval('.flame-canvas', (c) => Number(c.dataset.total));
  check(total === target.value, `a heatmap cell opens its largest profile: ${total} == ${target.value}`);
}

// The fleet view: the top functions of every service, each opening the groups that spend it.
async function fleetView(page) {
  await page.goto(`${BASE}/?${q({ query: E.fleet.query, view: 'fleet', group_by: 'env' })}`);
  await page.waitForSelector('.fleet-table tbody tr');
  const rows = await page.$$eval('.fleet-table > tbody > tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  check(rows.length === E.fleet.rows, `fleet rows ${rows.length} == ${E.fleet.rows}`);
  check(rows[0][0] === E.fleet.top && rows[0][1].startsWith(E.fleet.selfText), `fleet top row ${rows[0]}`);
  check(rows[0][3].startsWith(`${E.fleet.groups.length} group`), `the row counts its groups: ${rows[0][3]}`);
  await page.click('.fleet-table > tbody > tr:first-child');
  const groups = await page.$$eval('.fleet-table tr.groups tr', (trs) => trs.map((tr) => tr.children[0].textContent));
  check(groups.join() === E.fleet.groups.map((g) => 'env=' + g).join(), `the groups, largest first: ${groups}`);
  await page.screenshot({ path: path.join(OUT, 'fleet.png') });
  await page.click('.fleet-table tr.groups tr:first-child button');
  await waitGraph(page);
  const u = new URL(page.url()).searchParams;
  check(u.get('view') === null && u.get('query').includes(`env="${E.fleet.groups[0]}"`) && u.get('fn') === E.fleet.top,
        `Open narrows the single view to the group and the function: ${u}`);
}

async function embed(page) {
  await page.goto(`${BASE}/embed?${q({ query: E.query, theme: 'dark' })}`);
  await waitGraph(page);
  check(!(await page.isVisible('.topbar')) && !(await page.isVisible('.querybar')) && !(await page.isVisible('.top-table')),
        'embed shows no chrome and no table');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(bg === 'rgb(13, 17, 23)', 'dark theme background: ' + bg);
  await page.screenshot({ path: path.join(OUT, 'embed-flamegraph-dark.png') });
  await page.goto(`${BASE}/embed?${q({ query: E.query, view: 'table', theme: 'light' })}`);
  await page.waitForSelector('.top-table tbody tr');
  check(!(await page.isVisible('.flame-canvas')), 'embed table view shows no graph');
  check((await page.textContent('.top-table tbody tr:first-child td')) === E.top.name, 'embed table top row');
  await page.goto(`${BASE}/embed?${q({ query: E.query, view: 'timeseries' })}`);
  await page.waitForFunction(() => Number(document.querySelector('.ts-canvas').dataset.points) > 0);
  check(!(await page.isVisible('.flame-canvas')) && (await page.isVisible('.ts-canvas')), 'embed time series alone');
  await page.screenshot({ path: path.join(OUT, 'embed-timeseries.png') });
}

async function states(page) {
  await page.goto(`${BASE}/?${q({ query: E.query.replace('}', ',env="x}') })}`);
  await page.waitForSelector('#status.error');
  check((await page.textContent('#status')).startsWith('Bad request'), 'bad selector: ' + await page.textContent('#status'));
  await page.goto(`${BASE}/?${q({ query: E.query, from: '1000000000', until: '1000000060' })}`);
  await page.waitForSelector('#status.empty');
  check((await page.textContent('#status')).startsWith('No data'), 'empty range: ' + await page.textContent('#status'));
  check(!(await page.isVisible('.toolbar')) && !(await page.isVisible('.top-table')), 'no toolbar or empty table when there is no data');
  await page.goto(`${BASE}/?${q({ query: E.query, tenant: 'someone-else' })}`);
  await page.waitForSelector('#status.empty');
  check((await page.textContent('#status')).includes('No profiles stored yet'), 'another tenant sees nothing');
  check(!(await page.isVisible('.toolbar')) && !(await page.isVisible('.top-table')) && !(await page.isVisible('.flame-canvas')),
    'an empty store shows its hint alone, no toolbar or empty table');
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
let rc = 0;
try {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && !m.text().includes('status of 4')) errors.push(m.text()); });
  for (const step of [singleView, chartAxes, groupBy, stackFilters, servicesAndFunctions, autocomplete, chartDrag, diffView, profilesView, heatmapView, fleetView, embed, states]) {
    await step(page);
    check(errors.length === 0, `${step.name}: no page errors (${errors.join('; ')})`);
  }
  console.log(`browser: ${passed} passed`);
} catch (e) {
  console.error(`browser: ${passed} passed, then ${e.stack}`);
  rc = 1;
} finally {
  await browser.close();
}
process.exit(rc);
