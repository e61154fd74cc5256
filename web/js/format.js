// format.js - unit-aware number formatting and stable colours.
//
// Units come from the profile type id (name:sample_type:sample_unit:period_type:period_unit),
// never from agent-sent hints: nanoseconds become ms/s/min, bytes KiB/MiB/GiB, and
// counts get k/M suffixes.

export function sampleUnit(typeId) {
  const parts = (typeId || '').split(':');
  return parts.length >= 3 ? parts[2] : 'count';
}

// Three significant digits, no trailing decimals a reader does not need: 350 ms, 35.2 ms, 3.52 ms.
function sig3(x) {
  const a = Math.abs(x);
  return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

export function formatValue(v, unit) {
  const a = Math.abs(v);
  if (unit === 'nanoseconds') {
    if (a >= 60e9) return sig3(v / 60e9) + ' min';
    if (a >= 1e9) return sig3(v / 1e9) + ' s';
    if (a >= 1e6) return sig3(v / 1e6) + ' ms';
    if (a >= 1e3) return sig3(v / 1e3) + ' µs';
    return Math.round(v) + ' ns';
  }
  if (unit === 'bytes') {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0, x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return (i ? sig3(x) : Math.round(x)) + ' ' + units[i];
  }
  if (a >= 1e9) return sig3(v / 1e9) + ' G';
  if (a >= 1e6) return sig3(v / 1e6) + ' M';
  if (a >= 1e4) return sig3(v / 1e3) + ' k';
  return String(Math.round(v));
}

// "1 profile", "2 profiles".
export function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function percent(part, whole) {
  if (!whole) return '0%';
  const p = (100 * part) / whole;
  return (p >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%';
}

// The package part of a frame name, so all functions of a package share a hue:
// "net/http.(*conn).serve" -> "net/http", "std::vector<int>::push_back" -> "std",
// "java.util.HashMap.get" -> "java.util.HashMap".
export function packageOf(name) {
  const slash = name.lastIndexOf('/');
  const rest = name.slice(slash + 1);
  const cpp = rest.indexOf('::');
  if (cpp > 0) return name.slice(0, slash + 1 + cpp);
  const dot = slash >= 0 ? rest.indexOf('.') : rest.lastIndexOf('.');
  return dot > 0 ? name.slice(0, slash + 1 + dot) : name;
}

function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return h >>> 0;
}

// A warm palette, stable per package across reloads and views.
export function colorFor(name) {
  const h = hash(packageOf(name));
  const hue = 10 + (h % 50);              // red..yellow
  const sat = 55 + ((h >>> 8) % 30);
  const light = 55 + ((h >>> 16) % 15);
  return `hsl(${hue},${sat}%,${light}%)`;
}

// Diff colour: red grew, green shrank, intensity by the size of the change
// (a change of `full` or more is fully saturated).
export function diffColor(change, full) {
  const t = Math.max(-1, Math.min(1, change / (full || 1)));
  const k = Math.abs(t);
  if (k < 0.02) return 'hsl(0,0%,78%)';
  const light = 85 - 40 * k;
  return t > 0 ? `hsl(0,80%,${light}%)` : `hsl(120,55%,${light}%)`;
}

export function formatTime(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// A readable name for a profile type id (name:sample_type:sample_unit:period_type:period_unit),
// as Pyroscope's and Grafana's pickers show them; the id itself stays in the tooltip.
const TYPE_NAMES = {
  'process_cpu:cpu': 'CPU', 'process_cpu:samples': 'CPU samples', 'wall:wall': 'Wall time',
  'memory:inuse_space': 'Heap: in-use bytes', 'memory:inuse_objects': 'Heap: in-use objects',
  'memory:alloc_space': 'Allocations: bytes', 'memory:alloc_objects': 'Allocations: objects',
  'goroutine:goroutine': 'Goroutines', 'goroutines:goroutine': 'Goroutines',
  'mutex:contentions': 'Mutex: contentions', 'mutex:delay': 'Mutex: delay',
  'block:contentions': 'Block: contentions', 'block:delay': 'Block: delay',
  'exception:exception': 'Exceptions',
};

export function typeName(id) {
  const p = (id || '').split(':');
  const known = TYPE_NAMES[p[0] + ':' + p[1]];
  if (known) return known;
  return p.length >= 2 ? `${p[0]}: ${p[1]}` : id;
}
