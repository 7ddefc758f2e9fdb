// The live page: one EventSource for the figures, fetch for the actions.
// Plain script, no dependencies; every value from the crawl goes into the
// page as text, never as HTML.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const points = [];
  const maxPoints = 3600;
  let sortKey = "mean_latency_ns", sortAsc = false, lastHosts = [];

  function withToken(path) {
    return token ? path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : path;
  }
  function api(path, opts) {
    opts = opts || {};
    opts.headers = Object.assign({}, opts.headers, token ? { "X-Magpie-Token": token } : {});
    return fetch(path, opts);
  }

  function fmtInt(n) { return Number(n || 0).toLocaleString("en-US"); }
  function fmtRate(n) { return (n || 0) >= 100 ? Math.round(n).toString() : (n || 0).toFixed(1); }
  function fmtBytes(n) {
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GiB";
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
    if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
    return n + " B";
  }
  function fmtDur(ns) {
    let s = Math.floor(ns / 1e9);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    return (h ? h + "h" : "") + (h || m ? m + "m" : "") + s + "s";
  }
  function fmtMs(ns) { return ns ? Math.round(ns / 1e6) + " ms" : "–"; }
  function fmtWait(h) {
    if (!h.wait_until) return "";
    const s = Math.max(0, (Date.parse(h.wait_until) - Date.now()) / 1000);
    return h.wait_reason + " " + (s >= 60 ? Math.round(s / 60) + "m" : s.toFixed(1) + "s");
  }
  function sum(m) { return Object.values(m || {}).reduce((a, b) => a + b, 0); }

  function message(text, isError) {
    const m = $("message");
    m.textContent = text;
    m.className = isError ? "error" : "";
    m.hidden = !text;
  }

  function setTotals(s) {
    const st = s.stats;
    $("total-pages").textContent = fmtInt(st.responses);
    $("total-rate-now").textContent = fmtRate(s.point.pages);
    $("total-rate-avg").textContent = fmtRate(st.pages_per_second);
    $("total-failed").textContent = fmtInt(sum(st.failed));
    $("total-failed-kinds").textContent = Object.entries(st.failed || {}).sort().map(([k, v]) => k + " " + v).join(", ");
    $("total-queued").textContent = fmtInt(s.queued);
    $("total-inflight").textContent = fmtInt(s.in_flight);
    $("total-notstarted").textContent = fmtInt(st.not_started);
    $("total-changes").textContent = fmtInt(((st.recrawl || {}).changed || 0) + ((st.recrawl || {}).gone || 0));
    $("total-elapsed").textContent = fmtDur(st.elapsed_ns);
    $("total-memory").textContent = fmtBytes(s.memory);
    const state = st.paused ? "paused" : st.pending > 0 ? "running" : "idle";
    const badge = $("state");
    badge.textContent = state;
    badge.className = "badge " + state;
    $("btn-pause").hidden = st.paused;
    $("btn-resume").hidden = !st.paused;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function renderHosts() {
    const rows = lastHosts.slice().sort((a, b) => {
      let x = a[sortKey], y = b[sortKey];
      if (sortKey === "wait_until") { x = x ? Date.parse(x) : 0; y = y ? Date.parse(y) : 0; }
      const c = typeof x === "string" ? x.localeCompare(y) : (x || 0) - (y || 0);
      return sortAsc ? c : -c;
    });
    const body = $("hosts").tBodies[0];
    body.replaceChildren();
    for (const h of rows) {
      const tr = document.createElement("tr");
      tr.dataset.host = h.host;
      cell(tr, h.host, "host");
      cell(tr, fmtInt(h.queued), "num");
      cell(tr, fmtInt(h.in_flight), "num");
      cell(tr, fmtInt(h.done), "num");
      cell(tr, fmtInt(h.failed), "num");
      cell(tr, fmtMs(h.mean_latency_ns), "num");
      cell(tr, fmtWait(h), "wait");
      cell(tr, h.robots, "robots");
      body.appendChild(tr);
    }
    for (const th of $("hosts").tHead.rows[0].cells) {
      th.classList.toggle("sorted", th.dataset.key === sortKey);
      th.classList.toggle("asc", th.dataset.key === sortKey && sortAsc);
    }
  }

  function renderFailures(list) {
    const body = $("failures").tBodies[0];
    body.replaceChildren();
    for (const f of list || []) {
      const tr = document.createElement("tr");
      cell(tr, new Date(f.time).toLocaleTimeString(), "time");
      cell(tr, f.kind, "kind");
      cell(tr, f.status ? String(f.status) : "–", "num status");
      cell(tr, f.url, "url").title = f.error;
      cell(tr, f.referrer || "(start URL)", "url referrer");
      body.appendChild(tr);
    }
  }

  function renderFrontier(fr) {
    const ol = $("frontier");
    ol.replaceChildren();
    for (const e of fr.entries || []) {
      const li = document.createElement("li");
      li.textContent = (e.method !== "GET" ? e.method + " " : "") + e.url + (e.priority ? "  (priority " + e.priority + ")" : "");
      ol.appendChild(li);
    }
    const note = $("frontier-note");
    note.textContent = fr.error || ((fr.entries || []).length ? "" : "nothing waiting");
    note.hidden = !note.textContent;
  }

  function drawChart(canvas, key, color) {
    const win = Number($("window").value);
    const data = points.slice(-win);
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    canvas.width = Math.max(1, Math.round(w * dpr));
    canvas.height = Math.max(1, Math.round(h * dpr));
    const g = canvas.getContext("2d");
    g.scale(dpr, dpr);
    g.clearRect(0, 0, w, h);
    let top = 1;
    for (const p of data) top = Math.max(top, p[key]);
    g.strokeStyle = "#e3e6eb";
    g.fillStyle = "#667085";
    g.font = "11px system-ui, sans-serif";
    g.beginPath(); g.moveTo(0, h - 14.5); g.lineTo(w, h - 14.5); g.stroke();
    g.fillText(fmtRate(top), 2, 11);
    const now = data.length ? data[data.length - 1].t : Date.now();
    // A young crawl fills the width: the span shown grows to the window.
    const span = data.length ? Math.min(win * 1000, Math.max(60000, now - data[0].t)) : win * 1000;
    const x = (t) => w - ((now - t) / span) * w;
    const y = (v) => (h - 16) - (v / top) * (h - 30);
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.beginPath();
    data.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p[key])) : g.moveTo(x(p.t), y(p[key]))));
    g.stroke();
    g.fillStyle = "#667085";
    g.fillText(fmtDur(span * 1e6) + " ago", 2, h - 2);
    canvas.dataset.points = String(data.length);
  }
  function drawCharts() {
    drawChart($("chart-pages"), "pages", "#2563eb");
    drawChart($("chart-failures"), "failures", "#c0362c");
  }

  function addPoint(p) {
    if (!p || !p.t || (points.length && points[points.length - 1].t >= p.t)) return;
    points.push(p);
    if (points.length > maxPoints) points.splice(0, points.length - maxPoints);
  }

  function onSnapshot(s) {
    setTotals(s);
    addPoint(s.point);
    drawCharts();
    lastHosts = s.hosts || [];
    renderHosts();
    renderFailures(s.failures);
    renderFrontier(s.frontier);
    document.body.dataset.updated = s.time;
  }

  async function post(path, form) {
    const body = form ? new URLSearchParams(new FormData(form)) : undefined;
    try {
      const r = await api(path, { method: "POST", body });
      const j = await r.json().catch(() => ({}));
      if (!r.ok) { message(j.error || r.statusText, true); return false; }
      message("", false);
      return true;
    } catch (e) {
      message(String(e), true);
      return false;
    }
  }

  $("btn-pause").onclick = () => post("api/pause");
  $("btn-resume").onclick = () => post("api/resume");
  $("btn-stop").onclick = async () => {
    if (!confirm("Stop the crawl? Requests in flight finish; the rest is not fetched.")) return;
    if (await post("api/stop")) message("crawl stopped", false);
  };
  $("form-block").onsubmit = async (ev) => {
    ev.preventDefault();
    if (await post("api/block", ev.target)) { message("blocked " + ev.target.host.value, false); ev.target.reset(); }
  };
  $("form-add").onsubmit = async (ev) => {
    ev.preventDefault();
    if (await post("api/add", ev.target)) { message("added " + ev.target.url.value, false); ev.target.reset(); }
  };
  for (const th of $("hosts").tHead.rows[0].cells) {
    th.onclick = () => {
      if (sortKey === th.dataset.key) sortAsc = !sortAsc;
      else { sortKey = th.dataset.key; sortAsc = sortKey === "host" || sortKey === "robots"; }
      renderHosts();
    };
  }
  $("window").onchange = drawCharts;
  window.addEventListener("resize", drawCharts);

  api("api/series").then((r) => (r.ok ? r.json() : [])).then((list) => {
    for (const p of list || []) addPoint(p);
    drawCharts();
  }).finally(() => {
    const es = new EventSource(withToken("api/events"));
    es.onmessage = (ev) => onSnapshot(JSON.parse(ev.data));
    es.onerror = () => { const b = $("state"); b.textContent = "disconnected"; b.className = "badge stopped"; };
  });
})();
