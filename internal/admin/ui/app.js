// Sluice dashboard: reads the admin JSON API; no external resources.
'use strict';

const app = document.getElementById('app');
const statusEl = document.getElementById('status');

// who is who the dashboard acts as (GET /api/session): the operator, or
// a principal signed in, with its session's CSRF token; null until known.
let who = null;

class SignInNeeded extends Error {}

async function api(path, opts) {
  opts = Object.assign({}, opts);
  // X-Sluice-UI: a refusal comes without the browser's own prompt (this
  // page signs in); X-Sluice-CSRF: a session's changes carry its token.
  opts.headers = Object.assign({'X-Sluice-UI': '1'}, opts.headers,
    who && who.csrf && opts.method && opts.method !== 'GET' ? {'X-Sluice-CSRF': who.csrf} : {});
  const r = await fetch(path, opts);
  const body = await r.json();
  if (r.status === 401) throw new SignInNeeded((body && body.message) || r.statusText);
  if (!r.ok) throw new Error((body && body.message) || r.statusText);
  return body;
}

// post sends a change: JSON, as the admin API requires of every change
// (a cross-site form cannot).
function post(path, body, method) {
  return api(path, {method: method || 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body || {})});
}

// signInPage asks for a principal's access key and secret, or the admin
// token, and trades them for a session (the secret goes to the server
// once, and is not kept here).
function signInPage(why) {
  who = null;
  nav('');
  document.getElementById('whoami').textContent = '';
  app.innerHTML = '<h2>Sign in</h2><form id="signin" class="signin">' +
    '<label>Access key ID <input id="signin-key" autocomplete="username"></label>' +
    '<label>Secret access key <input id="signin-secret" type="password" autocomplete="current-password"></label>' +
    '<p class="note">or, for the operator:</p>' +
    '<label>Admin token <input id="signin-token" type="password"></label>' +
    '<button id="signin-submit" type="submit">Sign in</button><p id="signin-error" class="bad"></p></form>' +
    '<p class="note">' + esc(why || '') + '</p>';
  document.getElementById('signin').addEventListener('submit', async ev => {
    ev.preventDefault();
    const key = document.getElementById('signin-key').value, secret = document.getElementById('signin-secret').value;
    const token = document.getElementById('signin-token').value;
    try {
      who = await post('/api/session', token ? {token} : {access_key_id: key, secret_access_key: secret});
      app.textContent = 'Loading…'; // the form goes: render shows the pages again
      if (location.hash !== '#/') location.hash = '#/'; else render();
    } catch (e) {
      document.getElementById('signin-error').textContent = e.message;
    }
  });
}

async function signOut() {
  try { await post('/api/session', {}, 'DELETE'); } catch (e) { /* signed out already */ }
  signInPage('Signed out.');
}

// whoami shows who the dashboard acts as, with a sign-out for a session.
function whoami() {
  const el = document.getElementById('whoami');
  if (!who || (!who.principal && !who.csrf)) { el.textContent = ''; return; }
  el.innerHTML = 'signed in as <b>' + esc(who.principal || 'the operator') + '</b> · <a href="#" id="signout">sign out</a>';
  document.getElementById('signout').onclick = ev => { ev.preventDefault(); signOut(); };
}

// banners show what the store reports that an operator must act on: the
// disk alarm while it is raised, and messages lost under the queues since
// the server started (bodies that could not be read back, and releases
// the store could tell were wrong), which are never dropped silently.
async function banners() {
  if (!who.operator) return; // the store's figures are the operator's
  const st = await api('/api/store');
  const el = document.getElementById('alarm');
  const mib = b => (b / (1 << 20)).toFixed(0) + ' MiB';
  el.hidden = !st.disk_alarm;
  el.textContent = st.disk_alarm ? 'Disk alarm: new messages are refused (' + mib(st.disk_free_bytes) + ' free, reserve ' +
    mib(st.disk_reserve_bytes) + '); receives, deletes and purges go on.' : '';
  const lost = [];
  if (st.unreadable > 0) {
    lost.push(st.unreadable === 1 ? '1 message could not be read back from disk and was dropped.'
      : st.unreadable + ' messages could not be read back from disk and were dropped.');
  }
  if (st.bad_releases > 0) {
    lost.push(st.bad_releases + ' message ' + (st.bad_releases === 1 ? 'body was' : 'bodies were') +
      ' released that the store did not hold (a bug: please report it; nothing was freed for them).');
  }
  const un = document.getElementById('unreadable');
  un.hidden = !lost.length;
  un.textContent = lost.length ? lost.join(' ') + ' Check the disk, then stop the server and run sluice verify --data-dir <dir> ' +
    'to check the messages left (docs/operations.md: messages that cannot be read back).' : '';
}

// unreadableClass marks a queue that lost messages.
function unreadableClass(n) { return n > 0 ? 'bad' : ''; }

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}

function age(s) {
  if (!s) return '0s';
  if (s < 1) return (s * 1000).toFixed(0) + 'ms';
  if (s < 120) return s.toFixed(1) + 's';
  if (s < 7200) return (s / 60).toFixed(1) + 'm';
  return (s / 3600).toFixed(1) + 'h';
}

function ageClass(s) { return s > 300 ? 'bad' : s > 30 ? 'warn' : ''; }

// spark draws an inline SVG line of values.
function spark(values, w, h, color) {
  w = w || 120; h = h || 28; color = color || '#2a6fdb';
  if (!values.length) return '<svg width="' + w + '" height="' + h + '"></svg>';
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? w / (values.length - 1) : w;
  const pts = values.map((v, i) => (i * step).toFixed(1) + ',' + (h - 2 - (v / max) * (h - 4)).toFixed(1)).join(' ');
  return '<svg class="spark" width="' + w + '" height="' + h + '"><polyline fill="none" stroke="' + color +
    '" stroke-width="1.5" points="' + pts + '"/></svg>';
}

// niceTicks covers 0..max with about n steps of 1, 2 or 5 × 10^k.
function niceTicks(max, n) {
  if (!(max > 0)) max = 1;
  const raw = max / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(v => v >= raw);
  const top = Math.ceil(max / step - 1e-9) * step;
  const ticks = [];
  for (let i = 0; i * step <= top + step / 2; i++) ticks.push(i * step);
  return {top, ticks};
}

// fmtValue renders a value in the chart's unit.
function fmtValue(v, unit) {
  if (unit === 'seconds') return age(v);
  return Math.round(v).toLocaleString('en-US') + (unit ? ' ' + unit : '');
}

function two(n) { return String(n).padStart(2, '0'); }

// clock renders a unix time as local HH:MM, with seconds for short spans.
function clock(t, seconds) {
  const d = new Date(t * 1000);
  return two(d.getHours()) + ':' + two(d.getMinutes()) + (seconds ? ':' + two(d.getSeconds()) : '');
}

// plot draws a history as a line with labelled axes: values in unit on
// the y axis, local time on the x axis. The series rides along in data
// attributes for the hover read-out (see showReadout).
function plot(points, value, opts) {
  const W = opts.w || 440, H = opts.h || 170, L = 58, R = 12, T = 10, B = 36;
  const pw = W - L - R, ph = H - T - B;
  const ys = points.map(value);
  let t0 = points.length ? points[0].t : 0, t1 = points.length ? points[points.length - 1].t : 0;
  // Samples within one second (a fresh server, a test) spread by index.
  const byIndex = !(t1 > t0);
  const xOf = (p, i) => byIndex ? (points.length > 1 ? i / (points.length - 1) : 0.5) : (p.t - t0) / (t1 - t0);
  const {top, ticks} = niceTicks(Math.max(0, ...ys), 4);
  const yOf = v => T + ph - (v / top) * ph;
  let g = '';
  ticks.forEach(v => {
    const y = yOf(v).toFixed(1);
    g += '<line class="grid" x1="' + L + '" x2="' + (L + pw) + '" y1="' + y + '" y2="' + y + '"/>' +
      '<text class="tick" x="' + (L - 6) + '" y="' + y + '" dy="0.32em" text-anchor="end">' + esc(fmtValue(v, opts.unit === 'seconds' ? 'seconds' : '')) + '</text>';
  });
  const nx = Math.min(5, Math.max(2, points.length));
  let prev = null;
  for (let i = 0; i < nx && points.length; i++) {
    const f = nx > 1 ? i / (nx - 1) : 0.5, x = (L + f * pw).toFixed(1);
    let label = byIndex ? clock(t0, true) : clock(t0 + f * (t1 - t0), t1 - t0 < 600);
    if (label === prev) label = ''; // samples within a second: one label, not five alike
    else prev = label;
    g += '<line class="axis" x1="' + x + '" x2="' + x + '" y1="' + (T + ph) + '" y2="' + (T + ph + 4) + '"/>' +
      '<text class="tick" x="' + x + '" y="' + (T + ph + 16) + '" text-anchor="' + (i === 0 ? 'start' : i === nx - 1 ? 'end' : 'middle') + '">' + label + '</text>';
  }
  const pts = points.map((p, i) => (L + xOf(p, i) * pw).toFixed(1) + ',' + yOf(ys[i]).toFixed(1)).join(' ');
  const series = points.map((p, i) => [+(L + xOf(p, i) * pw).toFixed(1), p.t, ys[i]]);
  return '<svg class="plot" width="' + W + '" height="' + H + '" data-unit="' + esc(opts.unit) + '" data-series="' + esc(JSON.stringify(series)) + '"' +
    ' data-top="' + T + '" data-bottom="' + (T + ph) + '" data-left="' + L + '" data-right="' + (L + pw) + '">' + g +
    '<line class="axis" x1="' + L + '" x2="' + L + '" y1="' + T + '" y2="' + (T + ph) + '"/>' +
    '<line class="axis" x1="' + L + '" x2="' + (L + pw) + '" y1="' + (T + ph) + '" y2="' + (T + ph) + '"/>' +
    '<text class="label" transform="translate(12,' + (T + ph / 2) + ') rotate(-90)" text-anchor="middle">' + esc(opts.unit) + '</text>' +
    '<text class="label" x="' + (L + pw / 2) + '" y="' + (H - 4) + '" text-anchor="middle">time (local)</text>' +
    (points.length ? '<polyline fill="none" stroke="' + (opts.color || '#2a6fdb') + '" stroke-width="1.5" points="' + pts + '"/>'
      : '<text class="tick" x="' + (L + pw / 2) + '" y="' + (T + ph / 2) + '" text-anchor="middle">no samples yet</text>') +
    '<g class="readout" visibility="hidden"><line class="cursor" y1="' + T + '" y2="' + (T + ph) + '"/><circle r="3"/>' +
    '<text class="readout-text" y="' + (T + 12) + '"></text></g></svg>';
}

// showReadout marks the sample nearest the pointer and writes its time
// and value; one listener serves every plot the page draws.
function showReadout(e) {
  const svg = e.target.closest && e.target.closest('svg.plot');
  document.querySelectorAll('svg.plot g.readout').forEach(r => {
    if (!svg || !svg.contains(r)) r.setAttribute('visibility', 'hidden');
  });
  if (!svg) return;
  const series = JSON.parse(svg.dataset.series || '[]');
  if (!series.length) return;
  const x = e.clientX - svg.getBoundingClientRect().left;
  let best = series[0];
  series.forEach(s => { if (Math.abs(s[0] - x) < Math.abs(best[0] - x)) best = s; });
  const top = +svg.dataset.top, bottom = +svg.dataset.bottom;
  const maxV = niceTicks(Math.max(0, ...series.map(s => s[2])), 4).top;
  const y = bottom - (best[2] / maxV) * (bottom - top);
  const r = svg.querySelector('g.readout');
  r.querySelector('line').setAttribute('x1', best[0]);
  r.querySelector('line').setAttribute('x2', best[0]);
  r.querySelector('circle').setAttribute('cx', best[0]);
  r.querySelector('circle').setAttribute('cy', y.toFixed(1));
  const text = r.querySelector('text');
  text.textContent = clock(best[1], true) + '  ' + fmtValue(best[2], svg.dataset.unit);
  const right = best[0] > (+svg.dataset.left + +svg.dataset.right) / 2;
  text.setAttribute('x', best[0] + (right ? -6 : 6));
  text.setAttribute('text-anchor', right ? 'end' : 'start');
  r.setAttribute('visibility', 'visible');
}

// clusterSection shows the cluster this node is part of (nothing for a
// single node): its members, who owns the catalog, and this node's
// failovers and hand-overs.
function clusterSection(cl) {
  if (!cl) return '';
  return '<h2>Cluster</h2><p id="cluster" class="note">This node: <b>' + esc(cl.node) + '</b> · members: ' +
    cl.members.map(esc).join(', ') + ' · catalog owned by ' + esc(cl.catalog_owner || 'nobody yet') +
    ' · partitions owned here: ' + cl.owned + ' · failovers here: ' + cl.failovers + ' · hand-overs: ' + cl.handovers +
    ' · lease renewals unanswered: ' + cl.lease_renew_failures + '</p>';
}

// freshFirst says what the backlog mode is doing for queue q.
function freshFirst(q) {
  const who = q.fresh_first_tenants === 1 && (q.tenants || []).length > 1 ? ' for 1 tenant' :
    (q.fresh_first_tenants > 1 ? ' for ' + q.fresh_first_tenants + ' tenants' : '');
  return 'Sluice is serving fresh traffic first' + who + ' (a backlog stands since ' + new Date(q.fresh_first_since).toLocaleTimeString() +
    '); ' + q.old_messages.toLocaleString('en-US') + ' older messages drain behind it, the oldest ' + age(q.old_oldest_age_seconds) + ' old.';
}

async function queuesPage() {
  const [qs, cl] = await Promise.all([api('/api/queues'), api('/api/cluster').catch(() => null)]);
  const hist = await Promise.all(qs.map(q => api('/api/queues/' + encodeURIComponent(q.name) + '/history').catch(() => [])));
  let rows = '';
  qs.forEach((q, i) => {
    const h = hist[i];
    rows += '<tr data-queue="' + esc(q.name) + '"><td><a href="#/queue/' + encodeURIComponent(q.name) + '">' + esc(q.name) + '</a>' +
      (q.dead_letter_sources ? ' <span class="note">DLQ of ' + esc(q.dead_letter_sources.join(', ')) + '</span>' : '') +
      (q.fresh_first_tenants ? ' <span class="fresh-first" title="' + esc(freshFirst(q)) + '">fresh first</span>' : '') + '</td>' +
      '<td class="num visible">' + q.visible + '</td><td class="num">' + q.in_flight + '</td><td class="num">' + q.delayed + '</td>' +
      '<td>' + spark(h.map(p => p.visible + p.in_flight + p.delayed)) + '</td>' +
      '<td class="num ' + ageClass(q.oldest_age_seconds) + '">' + age(q.oldest_age_seconds) + '</td>' +
      '<td>' + spark(h.map(p => p.oldest_age_seconds), 120, 28, '#b35c00') + '</td>' +
      '<td class="num">' + q.noisy_tenants + '</td><td class="num">' + q.throttled + '</td>' +
      '<td class="num">' + Object.values(q.dropped || {}).reduce((a, b) => a + b, 0) + '</td>' +
      '<td class="num unreadable ' + unreadableClass(q.unreadable) + '">' + q.unreadable + '</td>' +
      (cl ? '<td class="owner">' + esc(cl.owners[q.name] || '—') + '</td>' : '') + '</tr>';
  });
  app.innerHTML = clusterSection(cl) + '<h2>Queues</h2><table id="queues"><thead><tr><th>Queue</th><th>Visible</th><th>In flight</th><th>Delayed</th>' +
    '<th>Depth (1h)</th><th>Oldest</th><th>Oldest age (1h)</th><th>Noisy tenants</th><th>Throttled</th><th>Dropped</th>' +
    '<th>Unreadable</th>' + (cl ? '<th>Owner</th>' : '') + '</tr></thead><tbody>' +
    (rows || '<tr><td colspan="12" class="note">No queues yet.</td></tr>') + '</tbody></table>';
}

async function queuePage(name) {
  const enc = encodeURIComponent(name);
  const [q, h, peek] = await Promise.all([api('/api/queues/' + enc), api('/api/queues/' + enc + '/history'),
    api('/api/queues/' + enc + '/messages?max=20')]);
  const card = (k, v, cls) => '<div class="card"><div class="v ' + (cls || '') + '">' + v + '</div><div class="k">' + k + '</div></div>';
  let html = '<h2>' + esc(name) + (q.fifo ? ' <span class="note">FIFO</span>' : '') + '</h2>' +
    (q.fresh_first_tenants ? '<div class="banner fresh-first" id="fresh-first">' + esc(freshFirst(q)) + '</div>' : '') +
    '<div class="cards">' + card('order', esc(q.order)) +
    card('visible', q.visible) + card('in flight', q.in_flight) + card('delayed', q.delayed) +
    card('oldest', age(q.oldest_age_seconds), ageClass(q.oldest_age_seconds)) +
    card('oldest among quiet tenants', age(q.quiet_oldest_age_seconds), ageClass(q.quiet_oldest_age_seconds)) +
    card('oldest among noisy tenants', age(q.noisy_oldest_age_seconds), ageClass(q.noisy_oldest_age_seconds)) +
    card('noisy tenants', q.noisy_tenants) + card('throttled', q.throttled) + card('sidelined', q.sidelined) +
    card('retried', q.retried) + card('dead-lettered', q.dead_lettered) + card('redriven', q.redriven) + card('dropped', Object.values(q.dropped || {}).reduce((a, b) => a + b, 0)) +
    card('unreadable', q.unreadable, unreadableClass(q.unreadable)) + '</div>';
  html += '<div class="charts"><div class="chart"><h3>Depth, last hour</h3>' + plot(h, p => p.visible + p.in_flight + p.delayed, {unit: 'messages'}) +
    '</div><div class="chart"><h3>Age of oldest, last hour</h3>' + plot(h, p => p.oldest_age_seconds, {unit: 'seconds', color: '#b35c00'}) + '</div></div>';
  const lanes = Object.entries(q.lanes || {});
  html += '<h3>Lanes</h3><table><thead><tr><th>Lane</th><th>Ready</th></tr></thead><tbody>' +
    (lanes.map(([l, n]) => '<tr><td>' + esc(l) + '</td><td class="num">' + n + '</td></tr>').join('') || '<tr><td colspan="2" class="note">Nothing ready.</td></tr>') +
    '</tbody></table>';
  const tenants = q.tenants || [];
  html += '<h3>Tenants (largest backlogs)</h3><table id="tenants"><thead><tr><th>Tenant</th><th>Ready</th><th>In flight</th><th>Oldest</th><th>Backlog (1h)</th><th>Oldest age (1h)</th><th>State</th><th>Shards</th></tr></thead><tbody>' +
    (tenants.map(t => '<tr><td>' + esc(t.name || '(none)') + '</td><td class="num">' + t.ready + '</td><td class="num">' + t.in_flight +
      '</td><td class="num ' + ageClass(t.oldest_age_ns / 1e9) + '">' + age(t.oldest_age_ns / 1e9) + '</td><td>' +
      spark(h.map(p => (p.tenants && p.tenants[t.name] ? p.tenants[t.name].ready : 0))) + '</td><td>' +
      spark(h.map(p => (p.tenants && p.tenants[t.name] ? p.tenants[t.name].oldest_age_seconds : 0)), 120, 28, '#b35c00') + '</td><td>' +
      [t.fresh_first ? 'fresh first since ' + new Date(t.fresh_first_since).toLocaleTimeString() + ' (' + ((t.lanes || {}).backlog || 0) + ' older behind, the oldest ' + age(t.old_oldest_age_ns / 1e9) + ')' : '',
        t.spilled ? 'over receive rate' : '', t.capped ? 'at in-flight cap' : ''].filter(Boolean).join(', ') + '</td><td>' +
      esc((t.shards || []).join(', ')) + '</td></tr>').join('') || '<tr><td colspan="8" class="note">No tenant holds messages.</td></tr>') +
    '</tbody></table>';
  const msgs = peek.messages || [];
  html += '<h3>Messages <span class="note">(peeked: they stay in the queue)</span></h3>' +
    '<p><button id="redrive">Redrive all' + (q.dead_letter_sources ? ' to source' : '') + '</button> ' +
    '<button id="purge" class="danger">Purge all</button> <span id="action" class="note"></span></p>' +
    '<table id="messages"><thead><tr><th>Sent</th><th>Tenant</th><th>Body</th><th>Receives</th><th>Reason</th><th>Last error</th><th>Source</th></tr></thead><tbody>' +
    (msgs.map(m => '<tr><td>' + esc(new Date(m.sent).toLocaleString()) + '</td><td>' + esc(m.tenant || '') + '</td><td class="msg">' + esc(m.body) +
      '</td><td class="num">' + m.receive_count + '</td><td>' + esc(m.reason || '') + '</td><td>' + esc(m.last_error || '') + '</td><td>' +
      esc((m.source_arn || '').split(':').pop()) + '</td></tr>').join('') || '<tr><td colspan="7" class="note">No messages.</td></tr>') +
    '</tbody></table>';
  app.innerHTML = html;
  document.getElementById('redrive').onclick = async () => {
    const out = document.getElementById('action');
    try {
      const r = await post('/api/queues/' + enc + '/redrive');
      out.textContent = 'Redrive started (' + r.task_handle.slice(0, 8) + '…)';
      setTimeout(render, 500);
    } catch (e) { out.textContent = 'Redrive failed: ' + e.message; }
  };
  document.getElementById('purge').onclick = async () => {
    const out = document.getElementById('action');
    if (!confirm('Delete every message of ' + name + '?')) return;
    try {
      const r = await post('/api/queues/' + enc + '/purge');
      out.textContent = 'Purged ' + r.purged + ' messages';
      setTimeout(render, 300);
    } catch (e) { out.textContent = 'Purge failed: ' + e.message; }
  };
}

// fig renders a figure, or a dash when the page does not have it.
function fig(v) { return v === undefined || v === null ? '—' : String(v); }

// subscriptionRows lists a topic's subscriptions, each with its queue's
// backlog. The topic hands every publish to each queue as it comes, so a
// subscriber that falls behind shows in its queue: messages waiting and
// an oldest message growing old (class "behind"); a queue that does not
// exist refuses every delivery (dead-lettered when the subscription has
// a dead-letter queue, dropped otherwise).
function subscriptionRows(t) {
  return t.subscriptions.map(s => {
    const b = s.backlog;
    const queue = s.queue_missing ? esc(s.queue) : '<a href="#/queue/' + encodeURIComponent(s.queue) + '">' + esc(s.queue) + '</a>';
    const dlq = s.dead_letter_queue ? '<a href="#/queue/' + encodeURIComponent(s.dead_letter_queue) + '">' + esc(s.dead_letter_queue) + '</a>' : '—';
    const backlog = b ? '<td class="num visible">' + b.visible + '</td><td class="num in-flight">' + b.in_flight + '</td><td class="num">' + b.delayed +
      '</td><td class="num oldest ' + ageClass(b.oldest_age_seconds) + '">' + age(b.oldest_age_seconds) + '</td>'
      : '<td colspan="4" class="missing bad">queue missing: deliveries ' + (s.dead_letter_queue ? 'dead-lettered' : 'refused') + '</td>';
    const behind = !b || ageClass(b.oldest_age_seconds) ? ' class="behind"' : '';
    return '<tr data-sub="' + esc(s.id) + '" data-queue="' + esc(s.queue) + '"' + behind + '><td>' + queue + '</td>' +
      '<td>' + (s.raw_message_delivery ? 'raw' : 'envelope') + '</td><td>' + (s.has_filter_policy ? 'yes' : '—') + '</td><td>' + dlq + '</td>' +
      backlog + '<td class="note">' + esc(s.id) + '</td></tr>';
  }).join('') || '<tr><td colspan="9" class="note">No subscriptions.</td></tr>';
}

// slowest is the subscription to look at first: one whose queue is
// missing, else the one whose queue's oldest message is oldest.
function slowest(t) {
  const missing = t.subscriptions.filter(s => !s.backlog);
  if (missing.length) return '<td class="slowest bad">' + esc(missing.map(s => s.queue).join(', ')) + ' missing</td><td class="num">—</td>';
  let worst = null;
  t.subscriptions.forEach(s => { if (!worst || s.backlog.oldest_age_seconds > worst.backlog.oldest_age_seconds) worst = s; });
  if (!worst) return '<td class="slowest note">no subscriptions</td><td class="num">—</td>';
  const a = worst.backlog.oldest_age_seconds;
  return '<td class="slowest">' + esc(worst.queue) + '</td><td class="num oldest ' + ageClass(a) + '">' + age(a) + '</td>';
}

// topicsPage shows every topic with what became of its publishes, then
// each topic's subscriptions with their queues' backlogs. In a cluster
// /api/topics has the figures of the topics this node owns; the owner of
// each other topic answers for it.
async function topicsPage() {
  const ts = await api('/api/topics');
  await Promise.all(ts.filter(t => !t.figures).map(async t => {
    const one = await api('/api/topics/' + encodeURIComponent(t.name)).catch(() => null);
    if (one) t.figures = one.figures;
  }));
  let rows = '', subs = '';
  ts.forEach(t => {
    const f = t.figures || {};
    rows += '<tr data-topic="' + esc(t.name) + '"><td>' + esc(t.name) + (t.fifo ? ' <span class="note">FIFO</span>' : '') + '</td>' +
      '<td class="num">' + t.subscriptions.length + '</td><td class="num published">' + fig(f.published) + '</td>' +
      '<td class="num">' + fig(f.delivered) + '</td><td class="num">' + fig(f.filtered) + '</td>' +
      '<td class="num ' + (f.refused > 0 ? 'bad' : '') + '">' + fig(f.refused) + '</td>' +
      '<td class="num ' + (f.dead_lettered > 0 ? 'warn' : '') + '">' + fig(f.dead_lettered) + '</td>' +
      '<td class="num held">' + fig(f.held) + '</td>' + slowest(t) + '</tr>';
    subs += '<h3>' + esc(t.name) + (t.fifo ? ' <span class="note">FIFO</span>' : '') + '</h3>' +
      '<table class="subscriptions" data-topic="' + esc(t.name) + '"><thead><tr><th>Queue</th><th>Delivery</th><th>Filter policy</th>' +
      '<th>Dead-letter queue</th><th>Visible</th><th>In flight</th><th>Delayed</th><th>Oldest</th><th>Subscription</th></tr></thead><tbody>' +
      subscriptionRows(t) + '</tbody></table>';
  });
  app.innerHTML = '<h2>Topics</h2><table id="topics"><thead><tr><th>Topic</th><th>Subscriptions</th><th>Published</th><th>Delivered</th>' +
    '<th>Filtered</th><th>Refused</th><th>Dead-lettered</th><th title="publishes held for subscriptions whose queues have not taken them yet">Held</th>' +
    '<th>Slowest subscription</th><th>Its oldest</th></tr></thead><tbody>' +
    (rows || '<tr><td colspan="10" class="note">No topics yet.</td></tr>') + '</tbody></table>' +
    (ts.length ? '<p class="note">Delivered, filtered, refused and dead-lettered count each publish once per subscription. ' +
      'Held: publishes the topic holds for queues that have not taken them yet. A subscriber that falls behind shows in its queue: ' +
      'messages waiting, and an old oldest message.</p><h2>Subscriptions</h2>' + subs : '');
}

// nav marks the page shown.
function nav(page) {
  document.querySelectorAll('#nav a').forEach(a => a.classList.toggle('here', a.dataset.page === page));
}

async function render() {
  const m = location.hash.match(/^#\/queue\/(.+)$/);
  if (document.getElementById('signin')) return; // signing in: the form stays
  try {
    if (!who) who = await api('/api/session');
    whoami();
    await banners();
    if (m) {
      nav('queues');
      await queuePage(decodeURIComponent(m[1]));
    } else if (location.hash === '#/topics') {
      nav('topics');
      await topicsPage();
    } else {
      nav('queues');
      await queuesPage();
    }
    statusEl.textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    if (e instanceof SignInNeeded) {
      signInPage(e.message);
      return;
    }
    statusEl.textContent = 'error: ' + e.message;
  }
}

app.addEventListener('mousemove', showReadout);
app.addEventListener('mouseleave', showReadout);
window.addEventListener('hashchange', render);
render();
setInterval(render, 5000);
