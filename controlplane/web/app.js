// keyheat dashboard. Plain JavaScript, no build step, no dependency.
//
// Keys are attacker-controlled: everything the API returns reaches the DOM
// as text (textContent, createTextNode) or through safe attributes (title,
// value, SVG geometry), never as HTML. The page's Content-Security-Policy
// requires Trusted Types with no policy, so an innerHTML of a string
// would throw rather than parse.

const POLL_MS = Math.max(100, Number(document.querySelector('meta[name="keyheat-poll-ms"]')?.content) || 1000);
const PAGE_LIMIT = 1000; // the API's MaxLimit
const MAX_PAGES = 200; // 200,000 entries: beyond that the page shows the first ones
const HISTORY = 60; // samples kept per key for its sparkline
const ROW_H = 24; // px, as --row in app.css
const OVERSCAN = 8; // rows rendered above and below the visible ones
const ALERTS = 100;
const TOP_N = 10; // keys of the report's top shown
const STRIP_MS = 15 * 60 * 1000;
const SPLIT_FACTORS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const SVG = 'http://www.w3.org/2000/svg';
const TOKEN_KEY = 'keyheat.token';
const BY_KEY = 'keyheat.by';

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- state

const state = {
  entries: [], // the registry as last read, objects of GET /api/hotkeys
  view: [], // entries after the filters, in the table's order
  total: 0,
  truncated: false,
  hist: new Map(), // id -> {rates: number[]}
  apps: [],
  sort: { col: 'rate', dir: -1 },
  filter: { app: '', source: '', text: '' },
  lastOk: 0, // Date.now() of the last successful read of the registry
  lastErr: null, // the error of the last read, when it failed
  readMs: 0,
  pages: 0,
  report: null,
  reportErr: null,
  alerts: null,
  alertsErr: null,
  inFlight: false,
  again: false, // poll again as soon as the one in flight ends
  timer: 0,
  firstData: false,
};

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage refused (private mode): the token lasts for this request only
  }
  renderToken();
}

// api sends a request to the control plane and returns its JSON; an
// answer that is not 2xx throws ApiError with the API's error text.
async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const init = { method, headers, cache: 'no-store', credentials: 'same-origin', redirect: 'error' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'the API is unreachable (' + (e && e.message ? e.message : 'network error') + ')');
  }
  let data = null;
  const text = await resp.text();
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const msg = data && typeof data.error === 'string' ? data.error : resp.status + ' ' + resp.statusText;
    throw new ApiError(resp.status, msg);
  }
  if (data === null) throw new ApiError(resp.status, 'the API answered something that is not JSON');
  return data;
}

// readRegistry walks every page of GET /api/hotkeys.
async function readRegistry() {
  const out = [];
  let cursor = '';
  let total = 0;
  let pages = 0;
  for (;;) {
    const q = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (cursor) q.set('cursor', cursor);
    const page = await api('GET', 'api/hotkeys?' + q.toString());
    pages++;
    const hk = Array.isArray(page.hotkeys) ? page.hotkeys : [];
    for (let i = 0; i < hk.length; i++) out.push(hk[i]);
    total = page.total | 0;
    if (!page.next_cursor) return { entries: out, total, pages, truncated: false };
    if (pages >= MAX_PAGES) return { entries: out, total, pages, truncated: true };
    cursor = page.next_cursor;
  }
}

// ---------------------------------------------------------------- keys

// keyId names an entry across reads: its app and exact key.
function keyId(e) {
  return e.app + '\u0000' + (e.key_b64 ? 'b:' + e.key_b64 : 's:' + e.key);
}

function b64Bytes(s) {
  try {
    const bin = atob(s);
    const b = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
    return b;
  } catch {
    return new Uint8Array(0);
  }
}

const hex2 = (n) => n.toString(16).padStart(2, '0');

// Characters shown escaped in a UTF-8 key: controls, and the invisible or
// reordering ones a key could use to pass for another.
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;

// shownKey is the text a key is displayed as, and whether it is escaped:
// a key that is not UTF-8 (key_b64) shows printable ASCII as it is and
// every other byte as \xHH; a UTF-8 key shows as it is unless it holds a
// backslash or an invisible character, which make it escaped too. Escaped
// text doubles the key's own backslashes, so two keys never show alike.
function shownKey(e) {
  if (e.key_b64) {
    let s = '';
    for (const c of b64Bytes(e.key_b64)) {
      s += c >= 0x20 && c < 0x7f && c !== 0x5c ? String.fromCharCode(c) : c === 0x5c ? '\\\\' : '\\x' + hex2(c);
    }
    return { text: s, escaped: true };
  }
  const k = String(e.key);
  INVISIBLE.lastIndex = 0;
  if (!INVISIBLE.test(k) && !k.includes('\\')) return { text: k, escaped: false };
  // Backslashes doubled first: the four characters \xff of a key must not
  // read as the byte 0xff, nor a typed \u{200c} as that character.
  const bs = k.replace(/\\/g, '\\\\');
  INVISIBLE.lastIndex = 0;
  return { text: bs.replace(INVISIBLE, (c) => '\\u{' + c.charCodeAt(0).toString(16) + '}'), escaped: true };
}

// keyPath is a key as one path segment, percent-escaped; its dots too, so
// that the keys "." and ".." are not path steps.
function keyPath(key) {
  return encodeURIComponent(key).replace(/\./g, '%2E');
}

// ---------------------------------------------------------------- formats

const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 });
const whole = new Intl.NumberFormat('en');
const fmtRate = (r) => (r > 0 ? (r < 10 ? r.toFixed(1) : compact.format(r)) : '—');
const pct = (x) => (x * 100 >= 10 ? (x * 100).toFixed(0) : (x * 100).toFixed(1)) + '%';

function fmtDur(ms) {
  if (!(ms >= 0)) return '';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm' + (s % 60 ? ' ' + (s % 60) + 's' : '');
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h' + (m % 60 ? ' ' + (m % 60) + 'm' : '');
  return Math.floor(h / 24) + 'd';
}

function fmtClock(t) {
  const d = new Date(t);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

const time = (iso) => {
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : 0;
};

// ---------------------------------------------------------------- DOM

function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

function svg(tag, attrs) {
  const n = document.createElementNS(SVG, tag);
  for (const k in attrs) n.setAttribute(k, String(attrs[k]));
  return n;
}

function clear(n) {
  while (n.firstChild) n.removeChild(n.firstChild);
}

// ---------------------------------------------------------------- the registry

// applyRegistry stores a read of the registry and records each key's rate
// in its history.
function applyRegistry(r) {
  state.entries = r.entries;
  state.total = r.total;
  state.truncated = r.truncated;
  state.pages = r.pages;
  const seen = new Map();
  const apps = new Set();
  for (const e of r.entries) {
    const id = keyId(e);
    e._id = id;
    let h = state.hist.get(id);
    if (!h) h = { rates: [], shown: shownKey(e), onset: '', onsetMs: 0, expires: '', expiresMs: 0 };
    // What is derived from an entry's strings is kept with its history:
    // a read of 10,000 entries parses only what changed.
    if (h.onset !== e.onset) {
      h.onset = e.onset;
      h.onsetMs = time(e.onset);
    }
    if (h.expires !== (e.expires || '')) {
      h.expires = e.expires || '';
      h.expiresMs = e.expires ? time(e.expires) : 0;
    }
    e._shown = h.shown;
    e._onset = h.onsetMs;
    e._expires = h.expiresMs;
    h.rates.push(Number(e.rate) || 0);
    if (h.rates.length > HISTORY) h.rates.shift();
    seen.set(id, h);
    apps.add(e.app);
  }
  // Keys gone from the registry lose their history.
  state.hist = seen;
  const list = [...apps].sort();
  if (list.join('\u0000') !== state.apps.join('\u0000')) {
    state.apps = list;
    renderApps();
  }
  recompute();
}

const cmpStr = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

const sorters = {
  app: (a, b) => cmpStr(a.app, b.app) || cmpStr(a._id, b._id),
  key: (a, b) => cmpStr(a._shown.text, b._shown.text) || cmpStr(a.app, b.app),
  source: (a, b) => cmpStr(a.source, b.source) || cmpStr(a._id, b._id),
  mitigation: (a, b) => cmpStr(a.mitigation, b.mitigation) || cmpStr(a._id, b._id),
  rate: (a, b) => a.rate - b.rate || cmpStr(b._id, a._id),
  peak: (a, b) => a.peak_rate - b.peak_rate || cmpStr(b._id, a._id),
  onset: (a, b) => b._onset - a._onset || cmpStr(b._id, a._id),
  expires: (a, b) => (a._expires || Infinity) - (b._expires || Infinity) || cmpStr(a._id, b._id),
};

// recompute filters and sorts the registry into the table's rows.
function recompute() {
  const f = state.filter;
  const text = f.text.toLowerCase();
  let view = state.entries;
  if (f.app || f.source || text) {
    view = view.filter(
      (e) =>
        (!f.app || e.app === f.app) &&
        (!f.source || e.source === f.source) &&
        (!text || e._shown.text.toLowerCase().includes(text) || e.key_hash === text),
    );
  } else {
    view = view.slice();
  }
  const cmp = sorters[state.sort.col] || sorters.rate;
  const dir = state.sort.dir;
  view.sort((a, b) => dir * cmp(a, b));
  state.view = view;
  $('hk-spacer').style.height = view.length * ROW_H + 'px';
  renderCounts();
  renderRows();
}

function renderCounts() {
  const c = $('counts');
  clear(c);
  let det = 0;
  let man = 0;
  for (const e of state.entries) {
    if (e.source === 'manual') man++;
    else det++;
  }
  const part = (n, label) => {
    c.append(el('b', '', whole.format(n)), document.createTextNode(' ' + label + '  '));
  };
  part(state.entries.length, state.entries.length === 1 ? 'key' : 'keys');
  part(det, 'detector');
  part(man, 'manual');
  part(state.apps.length, state.apps.length === 1 ? 'app' : 'apps');
  if (state.view.length !== state.entries.length) part(state.view.length, 'shown');
  if (state.truncated) c.append(el('span', 'expiring', 'first ' + whole.format(state.entries.length) + ' of ' + whole.format(state.total)));
  const empty = $('hk-empty');
  if (state.view.length > 0) empty.hidden = true;
  else if (state.firstData) {
    empty.hidden = false;
    empty.textContent = state.entries.length ? 'no key matches the filters' : 'no hot keys: the registry is empty';
  }
}

function renderApps() {
  const sel = $('f-app');
  const cur = sel.value;
  while (sel.options.length > 1) sel.remove(1);
  const dl = $('apps');
  clear(dl);
  for (const a of state.apps) {
    const o = document.createElement('option');
    o.value = a;
    o.textContent = a;
    sel.append(o);
    const d = document.createElement('option');
    d.value = a;
    dl.append(d);
  }
  sel.value = state.apps.includes(cur) ? cur : '';
  if (sel.value !== cur) {
    state.filter.app = '';
  }
}

// The virtualised table: a spacer as tall as every row, and a pool of row
// elements placed over the rows in view. Scrolling moves the pool, so the
// DOM holds a screenful of rows whatever the registry's size.
const pool = [];

function makeRow() {
  const r = el('div', 'hk-row row-grid');
  r.setAttribute('role', 'row');
  const c = {
    app: el('span', 'app'),
    key: el('span', 'key'),
    source: el('span', 'badge'),
    mit: el('span', 'mit'),
    rate: el('span', 'num rate'),
    spark: svg('svg', { class: 'spark', viewBox: '0 0 84 16', preserveAspectRatio: 'none', 'aria-hidden': 'true' }),
    peak: el('span', 'num'),
    onset: el('span', 'num'),
    expires: el('span', 'num'),
    acts: el('span', 'acts'),
  };
  c.area = svg('polygon', { class: 'area', points: '' });
  c.line = svg('polyline', { points: '' });
  c.spark.append(c.area, c.line);
  c.promote = el('button', 'promote', 'Promote');
  c.promote.type = 'button';
  c.demote = el('button', 'demote', 'Demote');
  c.demote.type = 'button';
  c.acts.append(c.promote, c.demote);
  const sparkCell = el('span', 'sparkcell');
  sparkCell.append(c.spark);
  r.append(c.app, c.key, c.source, c.mit, c.rate, sparkCell, c.peak, c.onset, c.expires, c.acts);
  for (const n of r.children) n.setAttribute('role', 'cell');
  r._c = c;
  c.promote.addEventListener('click', () => r._entry && openForm('promote', r._entry));
  c.demote.addEventListener('click', () => r._entry && openForm('demote', r._entry));
  $('hk-scroll').append(r);
  return r;
}

function sparkPoints(rates) {
  if (rates.length < 2) return ['', ''];
  let max = 0;
  for (const v of rates) if (v > max) max = v;
  if (max <= 0) return ['', ''];
  const step = 84 / (HISTORY - 1);
  const x0 = 84 - (rates.length - 1) * step;
  let pts = '';
  for (let i = 0; i < rates.length; i++) {
    const x = x0 + i * step;
    const y = 15 - (rates[i] / max) * 14;
    pts += (i ? ' ' : '') + x.toFixed(1) + ',' + y.toFixed(1);
  }
  return [pts, x0.toFixed(1) + ',16 ' + pts + ' 84,16'];
}

function fillRow(r, e, now) {
  const c = r._c;
  r._entry = e;
  c.app.textContent = e.app;
  c.app.title = e.app;
  c.key.textContent = e._shown.text;
  c.key.className = e._shown.escaped ? 'key escaped' : 'key';
  c.key.title = e._shown.escaped ? e._shown.text + '\n(shown escaped; hash ' + e.key_hash + ')' : e._shown.text + '\nhash ' + e.key_hash;
  c.source.textContent = e.source;
  c.source.className = 'badge src-' + (e.source === 'manual' ? 'manual' : 'detector');
  c.mit.textContent = e.mitigation === 'split' && e.split_factor ? 'split ×' + e.split_factor : e.mitigation;
  c.mit.className = 'mit mit-' + e.mitigation;
  c.rate.textContent = fmtRate(e.rate);
  c.peak.textContent = fmtRate(e.peak_rate);
  c.onset.textContent = e._onset ? fmtDur(now - e._onset) : '';
  c.onset.title = e.onset || '';
  const left = e._expires ? e._expires - now : -1;
  c.expires.textContent = e._expires ? fmtDur(Math.max(0, left)) : '—';
  c.expires.className = left >= 0 && left < 60000 ? 'num expiring' : 'num';
  c.expires.title = e.expires ? 'ttl ' + e.ttl + ', ends ' + e.expires : 'until the detector says it cooled';
  const h = state.hist.get(e._id);
  const [line, area] = sparkPoints(h ? h.rates : []);
  c.line.setAttribute('points', line);
  c.area.setAttribute('points', area);
}

let rafPending = false;

function scheduleRows() {
  if (rafPending) return;
  rafPending = true;
  requestAnimationFrame(() => {
    rafPending = false;
    renderRows();
  });
}

function renderRows() {
  const sc = $('hk-scroll');
  const view = state.view;
  const first = Math.max(0, Math.floor(sc.scrollTop / ROW_H) - OVERSCAN);
  const last = Math.min(view.length, Math.ceil((sc.scrollTop + sc.clientHeight) / ROW_H) + OVERSCAN);
  const need = Math.max(0, last - first);
  while (pool.length < need) pool.push(makeRow());
  const now = Date.now();
  for (let j = 0; j < pool.length; j++) {
    const r = pool[j];
    const i = first + j;
    if (i < last) {
      r.hidden = false;
      r.style.transform = 'translateY(' + i * ROW_H + 'px)';
      fillRow(r, view[i], now);
    } else {
      r.hidden = true;
      r._entry = null;
    }
  }
}

function renderSortHeads() {
  for (const b of document.querySelectorAll('.thead [data-sort]')) {
    if (b.dataset.sort === state.sort.col) b.dataset.dir = state.sort.dir > 0 ? 'asc' : 'desc';
    else delete b.dataset.dir;
  }
}

// ---------------------------------------------------------------- report

function barItem(list, label, value, share, max, cls) {
  const li = el('li', cls || '');
  const track = el('span', 'track');
  const bar = el('span', 'bar');
  bar.style.width = (max > 0 ? Math.max(0.5, (share / max) * 100) : 0) + '%';
  track.append(bar, label);
  li.append(track, el('span', 'v', value), el('span', 'pct', pct(share)));
  list.append(li);
}

// colItem adds a column of a column chart: its height is share over the
// largest share, its label under it.
function colItem(list, label, title, share, max, cls) {
  const li = el('li', cls || '');
  li.title = title;
  const well = el('span', 'well');
  const fill = el('span', 'fill');
  fill.style.height = (max > 0 ? Math.max(1, (share / max) * 100) : 0) + '%';
  well.append(fill);
  li.append(el('span', 'cv', pct(share)), well, el('span', 'cl', label));
  list.append(li);
}

function keyLabel(app, keyObj) {
  const l = el('span', 'lbl');
  if (app) l.append(el('span', 'app', app));
  const s = shownKey(keyObj);
  const k = el('span', s.escaped ? 'k escaped' : 'k', s.text);
  l.title = (app ? app + ' · ' : '') + s.text;
  l.append(k);
  return l;
}

function renderReport() {
  const r = state.report;
  const empty = $('report-empty');
  const body = $('report-body');
  const meta = $('report-meta');
  if (!r) {
    body.hidden = true;
    empty.hidden = false;
    const e = state.reportErr;
    empty.textContent = !e || e.status === 404 ? 'no reports yet' : 'reports unavailable: ' + e.message;
    meta.textContent = '';
    return;
  }
  empty.hidden = true;
  body.hidden = false;
  const secs = Math.max(0.001, (r.end_ms - r.start_ms) / 1000);
  meta.textContent = fmtClock(r.start_ms) + '–' + fmtClock(r.end_ms) + (r.partial ? ' · partial' : '') + (r.approximate ? ' · approximate' : '');
  const sum = $('report-summary');
  clear(sum);
  const fig = (label, v) => {
    const s = el('span', '', label + ' ');
    s.append(el('b', '', v));
    sum.append(s);
  };
  fig('events', whole.format(r.events || 0));
  fig('rate', compact.format((r.events || 0) / secs) + '/s');
  fig('distinct', compact.format(r.distinct || 0));
  if (r.skew) {
    fig('top-1', pct(r.skew.top1_share || 0));
    fig('top-10', pct(r.skew.top10_share || 0));
  }
  const top = $('top-list');
  clear(top);
  const tops = (r.top || []).slice(0, TOP_N);
  const maxTop = tops.reduce((m, k) => Math.max(m, k.share || 0), 0);
  for (const k of tops) barItem(top, keyLabel(k.app, k), compact.format(k.count), k.share || 0, maxTop);
  if (!tops.length) top.append(el('li', 'muted', 'no keys in this window'));

  const skew = r.skew || {};
  const parts = skew.partitions || [];
  $('part-skew').textContent = parts.length ? 'max/mean ' + (skew.max_mean || 0).toFixed(2) + ' · gini ' + (skew.gini || 0).toFixed(2) : '';
  const pl = $('part-list');
  clear(pl);
  const maxPart = parts.reduce((m, p) => Math.max(m, p.share || 0), 0);
  const mean = parts.length ? 1 / parts.length : 0;
  for (const p of parts) {
    const share = p.share || 0;
    colItem(pl, String(p.partition), (p.topic || '') + '/' + p.partition + ': ' + whole.format(p.events || 0) + ' events, ' + pct(share),
      share, maxPart, share > 2 * mean ? 'skewed' : '');
  }
  const nodes = skew.nodes || [];
  const slots = skew.hot_slots || [];
  $('redis-block').hidden = !nodes.length && !slots.length;
  $('node-skew').textContent = nodes.length ? 'max/mean ' + (skew.node_max_mean || 0).toFixed(2) + ' · gini ' + (skew.node_gini || 0).toFixed(2) : '';
  const nl = $('node-list');
  clear(nl);
  const maxNode = nodes.reduce((m, n) => Math.max(m, n.share || 0), 0);
  for (const n of nodes) {
    const share = n.share || 0;
    colItem(nl, n.node, n.node + ' (slots ' + n.first_slot + '–' + n.last_slot + '): ' + whole.format(n.events || 0) + ' events, ' + pct(share),
      share, maxNode, nodes.length && share > 1.5 / nodes.length ? 'skewed' : '');
  }
  const sl = $('slot-list');
  clear(sl);
  for (const s of slots.slice(0, 24)) {
    const chip = el('span', 'chip', 'slot ');
    chip.append(el('b', '', String(s.slot)), document.createTextNode(' · ' + compact.format(s.events)));
    sl.append(chip);
  }
}

// ---------------------------------------------------------------- alerts

function renderAlerts() {
  const list = $('alert-list');
  const empty = $('alerts-empty');
  const strip = $('alert-strip');
  clear(list);
  clear(strip);
  const alerts = state.alerts || [];
  const e = state.alertsErr;
  empty.hidden = alerts.length > 0;
  empty.textContent = !e || e.status === 404 ? 'no alerts yet' : 'alerts unavailable: ' + e.message;
  $('alerts-meta').textContent = alerts.length ? alerts.length + ' recent' : '';
  const now = Date.now();
  const w = strip.clientWidth || 360;
  strip.setAttribute('viewBox', '0 0 ' + w + ' 30');
  strip.append(svg('line', { class: 'axis', x1: 0, y1: 22, x2: w, y2: 22 }));
  for (let m = 15; m >= 0; m -= 5) {
    const x = w - (m * 60000 * w) / STRIP_MS;
    const t = svg('text', { class: 'tick', x: Math.min(w - 2, Math.max(2, x)), y: 10, 'text-anchor': m === 15 ? 'start' : m === 0 ? 'end' : 'middle' });
    t.textContent = m ? '−' + m + 'm' : 'now';
    strip.append(t);
  }
  for (const a of alerts) {
    const t = a.detected_ms || 0;
    const age = now - t;
    if (age < 0 || age > STRIP_MS) continue;
    const typ = ['hot', 'update', 'cooled'].includes(a.type) ? a.type : 'update';
    strip.append(svg('circle', { class: 'ev-' + typ, cx: (w - (age * w) / STRIP_MS).toFixed(1), cy: 22, r: typ === 'hot' ? 3.5 : 2.5 }));
  }
  for (const a of alerts.slice(0, ALERTS)) {
    const li = el('li');
    const typ = ['hot', 'update', 'cooled'].includes(a.type) ? a.type : 'update';
    li.append(el('span', 't', a.detected_ms ? fmtClock(a.detected_ms) : ''));
    const b = el('span', 'badge type-' + typ, String(a.type || ''));
    li.append(b);
    li.append(keyLabel(a.app, a));
    li.lastChild.className = 'what';
    const r = el('span', 'r', fmtRate(a.rate) + '/s' + (a.threshold ? ' ≥ ' + fmtRate(a.threshold) : ''));
    r.title = 'rule ' + (a.rule || '') + ', ' + (a.topic || '') + '/' + (a.partition === -1 ? 'cluster' : a.partition);
    li.append(r);
    list.append(li);
  }
}

// ---------------------------------------------------------------- status

function renderStatus() {
  const st = $('status');
  const txt = $('status-text');
  const now = Date.now();
  const ago = state.lastOk ? fmtDur(now - state.lastOk) + ' ago' : 'never';
  const at = state.lastOk ? fmtClock(state.lastOk) : '';
  const every = 'polling every ' + (POLL_MS >= 1000 ? POLL_MS / 1000 + ' s' : POLL_MS + ' ms');
  let s;
  let msg;
  const err = state.lastErr;
  if (document.hidden) {
    s = 'paused';
    msg = 'paused while the tab is hidden · last update ' + (at || 'never');
  } else if (err && err.status === 503) {
    s = 'loading';
    msg = 'API reachable, the registry is still being read: ' + err.message;
  } else if (err && err.status === 401) {
    s = 'down';
    msg = 'API reachable but reads need the token: ' + err.message;
  } else if (err) {
    s = 'down';
    msg = (err.status ? 'API error ' + err.status + ': ' : '') + err.message + ' · last update ' + (at ? at + ', ' + ago : 'never');
  } else if (!state.lastOk) {
    s = 'connecting';
    msg = 'connecting…';
  } else if (now - state.lastOk > Math.max(5000, 5 * POLL_MS)) {
    s = 'stale';
    msg = 'API reachable · last update ' + at + ', ' + ago;
  } else {
    s = 'live';
    msg = 'live · API reachable · updated ' + at + ' · ' + every + ' · read ' + state.pages + (state.pages === 1 ? ' page' : ' pages') + ' in ' + Math.round(state.readMs) + ' ms';
  }
  st.dataset.state = s;
  txt.textContent = msg;
  st.title = msg;
}

function renderToken() {
  const has = !!token();
  $('token-state').textContent = has ? 'token set for this tab' : 'no token';
  $('token-btn').textContent = has ? 'Forget token' : 'Set token';
}

// ---------------------------------------------------------------- polling

async function poll() {
  clearTimeout(state.timer);
  state.timer = 0;
  if (document.hidden) {
    renderStatus();
    return;
  }
  if (state.inFlight) {
    state.again = true;
    return;
  }
  state.inFlight = true;
  const t0 = performance.now();
  const [reg, rep, al] = await Promise.allSettled([
    readRegistry(),
    api('GET', 'api/reports/latest?scope=cluster'),
    api('GET', 'api/alerts?limit=' + ALERTS),
  ]);
  const t1 = performance.now();
  if (reg.status === 'fulfilled') {
    state.readMs = t1 - t0;
    state.lastOk = Date.now();
    state.lastErr = null;
    state.firstData = true;
    applyRegistry(reg.value);
  } else {
    state.lastErr = reg.reason;
  }
  if (rep.status === 'fulfilled' && rep.value && typeof rep.value === 'object' && 'start_ms' in rep.value) {
    state.report = rep.value;
    state.reportErr = null;
  } else if (rep.status === 'rejected') {
    // A report already shown stays while the API is briefly unreachable;
    // a 404 means none exists (yet).
    if (rep.reason.status === 404 || !state.report) {
      state.report = null;
      state.reportErr = rep.reason;
    }
  }
  if (al.status === 'fulfilled' && Array.isArray(al.value.alerts)) {
    state.alerts = al.value.alerts;
    state.alertsErr = null;
  } else if (al.status === 'rejected' && (al.reason.status === 404 || !state.alerts)) {
    state.alerts = null;
    state.alertsErr = al.reason;
  }
  renderReport();
  renderAlerts();
  renderStatus();
  const t2 = performance.now();
  if (reg.status === 'fulfilled') {
    // For anyone profiling the page: how long the last read took to
    // apply and render, and when the registry first showed.
    performance.clearMeasures('keyheat:render');
    performance.measure('keyheat:render', { start: t1, end: t2, detail: { entries: state.entries.length } });
    if (!performance.getEntriesByName('keyheat:first-data').length) {
      performance.mark('keyheat:first-data', { detail: { entries: state.entries.length, readMs: t1 - t0, renderMs: t2 - t1 } });
    }
  }
  state.inFlight = false;
  if (state.again) {
    state.again = false;
    poll();
    return;
  }
  // The next read starts POLL_MS after this one started, or, when this one
  // took longer (a large registry, a loaded server), after a quarter of
  // POLL_MS: the page never keeps the server reading without a pause.
  if (!document.hidden) state.timer = setTimeout(poll, Math.max(POLL_MS / 4, POLL_MS - (t2 - t0)));
}

// ---------------------------------------------------------------- actions

let formMode = null; // 'promote', 'demote' or 'token'
let formEntry = null; // the entry acted on; null for "Promote a key…"

function show(id, on) {
  $(id).hidden = !on;
}

function openForm(mode, entry) {
  formMode = mode;
  formEntry = entry || null;
  const needToken = !token();
  $('act-title').textContent = mode === 'token' ? 'API token' : mode === 'promote' ? (entry ? 'Promote key' : 'Promote a key') : 'Demote key';
  $('act-submit').textContent = mode === 'token' ? 'Keep for this tab' : mode === 'promote' ? 'Promote' : 'Demote';
  $('act-submit').className = mode === 'demote' ? 'danger primary' : 'primary';
  show('row-key', mode !== 'token');
  show('row-app', mode !== 'token');
  show('row-mit', mode === 'promote');
  show('row-ttl', mode !== 'token');
  show('row-by', mode !== 'token');
  show('row-reason', mode !== 'token');
  show('row-token', mode === 'token' || needToken);
  const shownEl = $('f-key-shown');
  const keyIn = $('f-key');
  if (entry) {
    keyIn.hidden = true;
    shownEl.hidden = false;
    shownEl.textContent = entry._shown.text;
    shownEl.className = entry._shown.escaped ? 'keyval escaped' : 'keyval';
    $('f-app-in').value = entry.app;
    $('f-app-in').readOnly = true;
    if (mode === 'promote' && entry.mitigation && entry.mitigation !== 'none') $('f-mit').value = entry.mitigation;
    if (entry.split_factor) $('f-split').value = String(entry.split_factor);
  } else {
    keyIn.hidden = false;
    keyIn.value = '';
    shownEl.hidden = true;
    $('f-app-in').readOnly = false;
    $('f-app-in').value = state.filter.app || '';
  }
  $('f-by').value = (() => {
    try {
      return sessionStorage.getItem(BY_KEY) || '';
    } catch {
      return '';
    }
  })();
  $('f-reason').value = '';
  $('f-token').value = '';
  syncSplit();
  $('act-error').hidden = true;
  $('modal').hidden = false;
  const focus = mode === 'token' ? $('f-token') : entry ? (mode === 'promote' ? $('f-mit') : $('f-ttl')) : keyIn;
  focus.focus();
}

function closeForm() {
  $('modal').hidden = true;
  formMode = null;
  formEntry = null;
}

function syncSplit() {
  show('row-split', formMode === 'promote' && $('f-mit').value === 'split');
}

function formError(msg) {
  const e = $('act-error');
  e.textContent = msg;
  e.hidden = false;
}

function toast(msg) {
  const t = el('div', 'toast', msg);
  $('toasts').append(t);
  setTimeout(() => t.remove(), 6000);
}

async function submitForm(ev) {
  ev.preventDefault();
  const mode = formMode;
  const tokIn = $('f-token').value.trim();
  if (mode === 'token') {
    if (!tokIn) return formError('type the API token (api.token of the server)');
    setToken(tokIn);
    closeForm();
    poll();
    return;
  }
  if (!$('row-token').hidden) {
    if (!tokIn) return formError('changes need the API token: type it (kept in this tab only)');
    setToken(tokIn);
  }
  const app = $('f-app-in').value;
  const ttl = $('f-ttl').value.trim();
  const by = $('f-by').value.trim();
  const reason = $('f-reason').value.trim();
  try {
    if (by) sessionStorage.setItem(BY_KEY, by);
  } catch {
    // not remembered
  }
  const entry = formEntry;
  let route;
  let keyText;
  if (entry) {
    keyText = entry._shown.text;
    route = entry.key_b64 ? { b64: entry.key_b64 } : { key: entry.key };
  } else {
    keyText = $('f-key').value;
    if (!keyText) return formError('type the key to promote');
    route = { key: keyText };
  }
  const submit = $('act-submit');
  submit.disabled = true;
  try {
    let res;
    if (mode === 'promote') {
      const body = { app, mitigation: $('f-mit').value, ttl };
      if (body.mitigation === 'split') body.split_factor = Number($('f-split').value);
      if (by) body.by = by;
      if (reason) body.reason = reason;
      const path = route.b64 ? 'api/hotkeys/promote?' + new URLSearchParams({ key_b64: route.b64 }) : 'api/hotkeys/' + keyPath(route.key) + '/promote';
      res = await api('POST', path, body);
    } else {
      const q = new URLSearchParams({ app, ttl });
      if (by) q.set('by', by);
      if (reason) q.set('reason', reason);
      if (route.b64) q.set('key_b64', route.b64);
      const path = route.b64 ? 'api/hotkeys?' + q : 'api/hotkeys/' + keyPath(route.key) + '?' + q;
      res = await api('DELETE', path);
    }
    closeForm();
    toast(
      (mode === 'promote' ? 'Promoted ' : 'Demoted ') + app + ' · ' + keyText + ' for ' + res.ttl +
        ' (partition ' + res.partition + ', offset ' + res.offset + ')',
    );
    poll();
  } catch (e) {
    if (e.status === 401) setToken('');
    formError((e.status ? e.status + ': ' : '') + e.message);
    if (e.status === 401) show('row-token', true);
  } finally {
    submit.disabled = false;
  }
}

// ---------------------------------------------------------------- wiring

function init() {
  const split = $('f-split');
  for (const f of SPLIT_FACTORS) {
    const o = document.createElement('option');
    o.value = String(f);
    o.textContent = String(f);
    split.append(o);
  }
  split.value = '4';
  $('f-mit').addEventListener('change', syncSplit);
  $('act-form').addEventListener('submit', submitForm);
  $('act-cancel').addEventListener('click', closeForm);
  $('modal').addEventListener('click', (e) => {
    if (e.target === $('modal')) closeForm();
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !$('modal').hidden) closeForm();
  });
  $('token-btn').addEventListener('click', () => {
    if (token()) setToken('');
    else openForm('token');
  });
  $('promote-new').addEventListener('click', () => openForm('promote', null));
  $('f-app').addEventListener('change', (e) => {
    state.filter.app = e.target.value;
    recompute();
  });
  $('f-source').addEventListener('change', (e) => {
    state.filter.source = e.target.value;
    recompute();
  });
  $('f-text').addEventListener('input', (e) => {
    state.filter.text = e.target.value;
    recompute();
  });
  for (const b of document.querySelectorAll('.thead [data-sort]')) {
    b.addEventListener('click', () => {
      const col = b.dataset.sort;
      if (state.sort.col === col) state.sort.dir = -state.sort.dir;
      else state.sort = { col, dir: col === 'app' || col === 'key' || col === 'source' || col === 'mitigation' || col === 'expires' ? 1 : -1 };
      renderSortHeads();
      recompute();
    });
  }
  $('hk-scroll').addEventListener('scroll', scheduleRows, { passive: true });
  window.addEventListener('resize', () => {
    scheduleRows();
    renderAlerts();
  });
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      clearTimeout(state.timer);
      state.timer = 0;
      renderStatus();
    } else {
      poll();
    }
  });
  // The status line's "ago" and the table's countdowns move between reads.
  setInterval(() => {
    if (document.hidden) return;
    renderStatus();
    renderRows();
  }, 1000);
  renderSortHeads();
  renderToken();
  poll();
}

init();
