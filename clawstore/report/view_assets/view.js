// claw view: renders the inlined campaign summary. No framework, no network; run details load from shards on demand.
(function () {
  "use strict";
  const S = JSON.parse(document.getElementById("claw-summary").textContent);
  const main = document.getElementById("main");
  const LETTERS = "ABCDEFGHIJ";
  const COLOURS = ["#2457c5", "#d9480f", "#2b8a3e", "#862e9c"];
  const compare = S.campaigns.length > 1;
  // Run details live in shards beside the page (<page>.d/details-NNNNN.js, S.details.per runs each), each a script
  // calling clawDetails, loaded when a run page opens: from file:// a script element may load a file beside the page,
  // where reading it as data is refused.
  const shards = new Map();  // shard number -> its details, once loaded
  const loading = new Map();  // shard number -> Promise of its details
  window.clawDetails = function (token, number, details) {
    if (token === S.details.token) shards.set(number, details);
  };
  function loadShard(n) {
    if (!loading.has(n)) {
      const name = "details-" + String(n).padStart(5, "0") + ".js";
      loading.set(n, new Promise((resolve, reject) => {
        const el = document.createElement("script");
        el.src = encodeURIComponent(S.details.dir) + "/" + name;
        el.onload = () => (shards.has(n) ? resolve(shards.get(n))
          : reject(new Error(S.details.dir + "/" + name + " belongs to a later claw view of this path: reload the page")));
        el.onerror = () => reject(new Error(S.details.dir + "/" + name + " was not found: the run details are in the " +
          "folder " + S.details.dir + " beside this page; copy it with the page"));
        document.head.appendChild(el);
      }).finally(() => { if (!shards.has(n)) loading.delete(n); }));  // (a failed load is tried again next time)
    }
    return loading.get(n);
  }
  const detail = (i) => shards.get(Math.floor(i / S.details.per))[i % S.details.per];

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const num = (v, d) => (v === null || v === undefined ? "n/a" : Number(v).toFixed(d));
  const score = (v) => num(v, 2);
  // A cost nobody reported or priced is "unknown", never 0; a total with unknown parts shows what is
  // known of it and how much is not ("≥0.00120 (2 of 5 unknown)"), as claw report's text does.
  // A known cost as text, the twin of values/costs.py `usd`: `d` decimals when they show a digit of it that is not 0,
  // else as many as show its first two significant digits, never 1.2e-7 nor 0.00000 (a fraction of a cent read as free).
  const usd = (v, d) => {
    const n = Number(v), fixed = n.toFixed(d);
    if (!n || !isFinite(n) || /[1-9]/.test(fixed)) return fixed;
    const places = 1 - Math.floor(Math.log10(Math.abs(n)));
    return places > 100 ? n.toExponential(1) : n.toFixed(places).replace(/0+$/, "");  // (toFixed takes 100 at most)
  };
  const cost = (v) => (v === null || v === undefined ? "unknown" : usd(v, 5));
  const costText = (t, v) => (typeof t === "string" ? t.replace(/^\?/, "unknown") : cost(v));
  // In a table cell the notes go on a line of their own, so the leaderboard keeps its width.
  function costCell(t, v) {
    const text = costText(t, v);
    const at = text.indexOf(" (");
    return at < 0 ? text : h("span", {}, text.slice(0, at), h("br", {}), h("span", { class: "ci" }, text.slice(at + 1)));
  }
  // An unknown cost with a known part (an unfinished OpenClaw run: its transcript's answered requests): at least that.
  const sourced = (v, source, known) => ((v === null || v === undefined) && known ? "unknown, ≥" + cost(known) : cost(v)) +
    (source === "priced" ? " (priced)" : "");
  // Tokens unknown with a known part (an unfinished OpenClaw run): at least that, never a plain number read as whole.
  // Unknown tokens read "unknown" as an unknown cost does ("–" read as none); "–" only for a run that never ran.
  const ran = (d) => !["skip", "pending"].includes(d.action);
  const tokens = (v, known, wasRun) => (v === null || v === undefined
    ? (known ? "≥" + known : (wasRun ? "unknown" : "–")) : String(v));
  const latency = (v) => num(v, 1);
  const pct = (v) => (v === null || v === undefined ? "n/a" : (100 * v).toFixed(0) + "%");
  const verdict = (p) => (p === true ? h("span", { class: "pass" }, "pass") : p === false ? h("span", { class: "fail" }, "fail") : h("span", { class: "muted" }, "–"));
  const campaignName = (i) => (compare ? LETTERS[i] : "");
  const anchor = (caseId, modelId) => "#case/" + encodeURIComponent(caseId) + "/model/" + encodeURIComponent(modelId);
  function scoreColour(v) {
    if (v === null || v === undefined) return "#e3e5e8";
    const t = Math.max(0, Math.min(10, v)) / 10;
    return "hsl(" + Math.round(t * 120) + ", 65%, " + Math.round(78 - 8 * Math.abs(t - 0.5)) + "%)";
  }

  // ---- header: campaigns and filters
  const campaignsEl = document.getElementById("campaigns");
  S.campaigns.forEach((c, i) => {
    campaignsEl.appendChild(h("div", { "data-campaign": c.id },
      compare ? h("b", {}, LETTERS[i] + (i === 0 ? " (baseline): " : ": ")) : "Campaign ", h("code", {}, c.id),
      " · build " + (c.build_id || "?") + " (" + (c.state_text || c.state || "?") + ", finished " + (c.finished_at || "n/a") + ")",
      " · cost (USD) runs " + costText(c.run_cost_text, c.run_cost_usd) + " + evaluation " + costText(c.eval_cost_text, c.eval_cost_usd),
      c.untrusted ? h("div", { class: "untrusted" }, c.untrusted) : null,
      // (the report's lines under Head: the results never built, the models' cases differing)
      c.coverage_text ? h("div", { class: "coverage" }, c.coverage_text) : null,
      c.cases_differ_text ? h("div", { class: "coverage" }, c.cases_differ_text) : null));
  });
  const filters = { model: "", text: "", tag: "", verdict: "" };
  const models = [...new Set(S.models.map((m) => m.model_id))].sort();
  const fModel = document.getElementById("f-model");
  models.forEach((m) => fModel.appendChild(h("option", { value: m }, m)));
  const allTags = [...new Set(Object.values(S.tags).flat())].sort();
  const fTag = document.getElementById("f-tag");
  allTags.forEach((t) => fTag.appendChild(h("option", { value: t }, t)));
  if (!allTags.length) fTag.parentElement.title = "no tags: the case configs were not found when the page was written";
  const bind = (id, key) => {
    const update = (e) => { if (filters[key] !== e.target.value) { filters[key] = e.target.value; render(); } };
    document.getElementById(id).addEventListener("input", update);
    document.getElementById(id).addEventListener("change", update);
  };
  bind("f-model", "model"); bind("f-case", "text"); bind("f-tag", "tag"); bind("f-verdict", "verdict");

  function rowVisible(r) {
    const caseId = S.cases[r.case];
    if (filters.model && r.model_id !== filters.model) return false;
    if (filters.text && !caseId.toLowerCase().includes(filters.text.toLowerCase())) return false;
    if (filters.tag && !(S.tags[caseId] || []).includes(filters.tag)) return false;
    if (filters.verdict === "pass" && r.passed !== true) return false;
    if (filters.verdict === "fail" && r.passed !== false) return false;
    if (filters.verdict === "none" && r.passed !== null) return false;
    return true;
  }
  const filtered = () => S.rows.filter(rowVisible);

  // ---- leaderboard and chart
  // A model's cases, "1 of 3" (marked) when its campaign's models were built on different cases: its mean is not
  // comparable with theirs (the header says so).
  function casesCell(m) {
    const differ = ((S.campaigns[m.campaign] || {}).coverage || {}).cases_differ;
    if (!differ || m.expected_cases === null || m.expected_cases === undefined) return m.cases;
    return h("span", { class: m.cases < m.expected_cases ? "partial" : "", title: "results of " + m.cases + " of the " +
      m.expected_cases + " cases the campaign expects: the models' means are over different cases" },
      m.cases + " of " + m.expected_cases);
  }
  function leaderboard() {
    const shown = S.models.filter((m) => !filters.model || m.model_id === filters.model)
      .slice().sort((a, b) => (b.mean_score ?? -1) - (a.mean_score ?? -1) || a.model_id.localeCompare(b.model_id));
    const head = ["#", "Model", compare ? "Campaign" : null, "Mean score", "95% interval", "Pass rate", "95% interval", "Cases", "Failed runs",
      "Mean latency (s)", "Run cost", "Eval cost", "Total cost (USD)"].filter((x) => x !== null);
    const table = h("table", { id: "leaderboard" },
      h("thead", {}, h("tr", {}, head.map((c, i) => h("th", { class: i > 2 || (i === 2 && !compare) ? "num" : "" }, c)))),
      h("tbody", {}, shown.map((m, i) => h("tr", { "data-model": m.model_id, "data-campaign": m.campaign },
        h("td", { class: "num" }, i + 1),
        h("td", {}, h("a", { href: "#matrix", onclick: () => { fModel.value = m.model_id; filters.model = m.model_id; } }, m.model_id)),
        compare ? h("td", {}, campaignName(m.campaign)) : null,
        h("td", { class: "num", "data-col": "mean_score" }, score(m.mean_score)),
        h("td", { class: "num ci", "data-col": "score_interval" }, interval(m.score_interval, score)),
        h("td", { class: "num", "data-col": "pass_rate", title: m.passed + " of " + m.verdicts + " cases passed" },
          m.verdicts ? pct(m.pass_rate) + " (" + m.passed + "/" + m.verdicts + ")" : "n/a"),
        h("td", { class: "num ci", "data-col": "pass_interval" }, m.verdicts ? interval(m.pass_rate_interval, pct) : "n/a"),
        h("td", { class: "num", "data-col": "cases" }, casesCell(m)),
        h("td", { class: "num", "data-col": "runs_failed" }, m.runs_failed ? h("span", { class: "fail" }, m.runs_failed) : "0"),
        h("td", { class: "num", "data-col": "mean_latency_s" }, latency(m.mean_latency_s)),
        h("td", { class: "num", "data-col": "run_cost_usd" }, costCell(m.run_cost_text, m.run_cost_usd)),
        h("td", { class: "num", "data-col": "eval_cost_usd" }, costCell(m.eval_cost_text, m.eval_cost_usd)),
        h("td", { class: "num", "data-col": "total_cost_usd" }, costCell(m.total_cost_text, m.total_cost_usd))))));
    return [h("h2", {}, "Leaderboard"),
      h("p", { class: "hint" }, "Mean score: the mean final score (0–10) over the model's scored cases. Pass rate: cases whose final score reached the pass threshold in every repetition that has one (a repetition whose run failed has none and is not counted). Costs in USD include runs and their evaluation (judge calls); \"priced\": from the model's declared pricing, the provider reported none; \"unknown\": neither (never counted as 0). In brackets: the 95% interval over cases (scores: t over the case scores; pass rates: Wilson)."),
      table, ...statistics(shown), h("h2", {}, "Score vs cost"), chart(shown)];
  }

  // ---- statistics: intervals, paired comparison against the baseline, judge reliability
  function interval(iv, fmt) {
    if (!iv || iv.low === null || iv.high === null) return "n/a";
    return h("span", { title: "95% interval over " + iv.n + " cases" }, "[" + fmt(iv.low) + ", " + fmt(iv.high) + "] n=" + iv.n);
  }
  // Each dimension's mean over cases and pass@k / pass^k (run repetitions), each with its 95% interval.
  function dimensionStats(shown) {
    const models = shown.filter((m) => Object.keys(m.dimension_intervals || {}).length || m.pass_k);
    if (!models.length) return [];
    const dims = [...new Set(models.flatMap((m) => Object.keys(m.dimension_intervals || {})))];
    const k = Math.max(0, ...models.map((m) => (m.pass_k ? m.pass_k.k : 0)));
    const two = (v) => Number(v).toFixed(2);
    const share = (v) => (100 * v).toFixed(0) + "%";
    const withInterval = (iv, fmt) => (iv && iv.mean !== null && iv.mean !== undefined
      ? [fmt(iv.mean), h("br", {}), h("span", { class: "ci" }, interval(iv, fmt))] : "n/a");  // (narrow columns)
    const heads = [compare ? "Campaign" : null, "Model", ...dims, ...(k ? ["pass@" + k, "pass^" + k] : [])].filter((c) => c !== null);
    return [h("h2", {}, k ? "Dimensions and pass@" + k : "Dimensions"),
      h("p", { class: "hint" }, "Each dimension's mean final score over cases, in brackets its 95% interval (t over the case means)" +
        (k ? "; pass@" + k + ": cases passed at least once in " + k + " runs, pass^" + k + ": passed all " + k + " times (Wilson intervals)." : ".")),
      h("table", { id: "dimension-stats" },
        h("thead", {}, h("tr", {}, heads.map((c, i) => h("th", { class: i > (compare ? 1 : 0) ? "num" : "" }, c)))),
        h("tbody", {}, models.map((m) => h("tr", { "data-model": m.model_id, "data-campaign": m.campaign },
          compare ? h("td", {}, campaignName(m.campaign)) : null, h("td", {}, m.model_id),
          dims.map((d) => h("td", { class: "num", "data-col": "dim-" + d }, withInterval((m.dimension_intervals || {})[d], two))),
          k ? [h("td", { class: "num", "data-col": "pass_at_k" }, m.pass_k ? withInterval(m.pass_k.pass_at_k, share) : "n/a"),
               h("td", { class: "num", "data-col": "pass_all_k" }, m.pass_k ? withInterval(m.pass_k.pass_all_k, share) : "n/a")] : []))))];
  }
  const signed = (v) => (v === null || v === undefined ? "n/a" : (v >= 0 ? "+" : "") + Number(v).toFixed(2));
  function statistics(shown) {
    const out = [...dimensionStats(shown)];
    const paired = (S.paired || []).filter((p) => !filters.model || p.model_id === filters.model);
    if (paired.length) {
      out.push(h("h2", {}, "Paired comparison against A"),
        h("p", { class: "hint" }, "Over the cases both campaigns scored: the mean of B − A, its interval (bootstrap of the cases, Bonferroni-adjusted over models), the sign-flip permutation p-value, and the smallest true drop these cases find 4 times in 5 (MDE)."),
        h("table", { id: "paired" },
          h("thead", {}, h("tr", {}, ["Model", "Campaign", "Cases", "Δ score", "Interval", "p", "MDE (80%)", "Verdict"].map((c, i) => h("th", { class: i > 1 ? "num" : "" }, c)))),
          h("tbody", {}, paired.map((p) => {
            const verdict = p.high !== null && p.high < 0 ? "regressed" : p.low !== null && p.low > 0 ? "improved" : "within noise";
            return h("tr", { "data-model": p.model_id, "data-campaign": p.campaign },
              h("td", {}, p.model_id), h("td", {}, campaignName(p.campaign)), h("td", { class: "num" }, p.n),
              h("td", { class: "num", "data-col": "delta" }, signed(p.delta)),
              h("td", { class: "num", "data-col": "interval" }, p.low === null ? "n/a" : "[" + signed(p.low) + ", " + signed(p.high) + "]"),
              h("td", { class: "num" }, num(p.p_value, 3)), h("td", { class: "num" }, num(p.mde, 2)),
              h("td", { class: "num" }, h("span", { class: verdict === "regressed" ? "fail" : verdict === "improved" ? "pass" : "muted" }, verdict)));
          }))));
    }
    const judges = (S.judge_reliability || []).filter((j) => j.dimension === "overall");
    if (judges.length) {
      out.push(h("h2", {}, "Judge reliability"),
        h("p", { class: "hint" }, "How far a judge's repetitions of the same run disagree on the overall score: mean absolute difference between repetitions, ICC(1) (1: they always agree), and the share of runs whose pass/fail verdict changes between repetitions."),
        h("table", { id: "judge-reliability" },
          h("thead", {}, h("tr", {}, [compare ? "Campaign" : null, "Judge", "Runs", "Repetitions", "Mean |difference|", "ICC", "Verdict flips"].filter((x) => x !== null).map((c, i) => h("th", { class: i > (compare ? 1 : 0) ? "num" : "" }, c)))),
          h("tbody", {}, judges.map((j) => h("tr", {},
            compare ? h("td", {}, campaignName(j.campaign)) : null, h("td", {}, j.judge_run_id),
            h("td", { class: "num" }, j.runs), h("td", { class: "num" }, j.judge_repetitions),
            h("td", { class: "num" }, num(j.mad, 2)), h("td", { class: "num" }, num(j.icc, 2)),
            h("td", { class: "num" }, pct(j.flip_share)))))));
    }
    return out;
  }

  // A model nothing of whose cost is known (a self-hosted server without a price): its total reads "?" (costText).
  const costUnknown = (m) => typeof m.total_cost_text === "string" && m.total_cost_text.startsWith("?");
  function chart(shown) {
    const pts = shown.filter((m) => m.mean_score !== null);
    // The wholly unknown costs go in a lane of their own right of the cost axis, apart: at $0 they read as the cheapest.
    const lanePts = pts.filter(costUnknown), priced = pts.filter((m) => !costUnknown(m));
    const W = 720, H = 380, L = 58, R = 170, T = 16, B = 46;
    const LANE = lanePts.length ? 96 : 0, GAP = lanePts.length ? 22 : 0;
    const right = W - R - LANE - GAP;  // the cost axis's right end
    const svgNS = "http://www.w3.org/2000/svg";
    const s = (tag, attrs, text) => {
      const el = document.createElementNS(svgNS, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
      if (text !== undefined) el.textContent = text;
      return el;
    };
    const svg = s("svg", { class: "chart", id: "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img",
      "aria-label": "mean score against total cost, one point per model" });
    if (!pts.length) { svg.appendChild(s("text", { x: 20, y: 40 }, "no model has a final score yet")); return svg; }
    const maxX = Math.max(0, ...priced.map((m) => m.known_cost_usd)) * 1.15 || 1;
    const x = (v) => L + (v / maxX) * (right - L), y = (v) => T + (1 - v / 10) * (H - T - B);
    for (let g = 0; g <= 10; g += 2) {
      svg.appendChild(s("line", { class: "grid", x1: L, x2: right, y1: y(g), y2: y(g) }));
      svg.appendChild(s("text", { x: L - 8, y: y(g) + 4, "text-anchor": "end" }, g));
    }
    if (priced.length) for (let i = 0; i <= 4; i++) {
      const v = (maxX * i) / 4;
      svg.appendChild(s("line", { class: "grid", x1: x(v), x2: x(v), y1: T, y2: H - B }));
      const anchor = lanePts.length && i === 4 ? "end" : "middle";  // (the last clear of the lane's label)
      svg.appendChild(s("text", { x: x(v), y: H - B + 16, "text-anchor": anchor }, "$" + (v ? usd(v, 2) : "0")));
    }
    else svg.appendChild(s("text", { class: "muted", x: (L + right) / 2, y: (T + H - B) / 2, "text-anchor": "middle" }, "no model's cost is known"));
    svg.appendChild(s("line", { class: "axis", x1: L, x2: right, y1: H - B, y2: H - B }));
    svg.appendChild(s("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
    svg.appendChild(s("text", { x: (L + right) / 2, y: H - 8, "text-anchor": "middle" }, "total cost of the model's results (USD) — cheaper is left"));
    svg.appendChild(s("text", { x: 14, y: (T + H - B) / 2, transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", "text-anchor": "middle" }, "mean score (0–10) — better is up"));
    const laneX = right + GAP;
    if (lanePts.length) {
      svg.appendChild(s("rect", { class: "lane", x: laneX, y: T, width: LANE, height: H - T - B }));
      for (let g = 0; g <= 10; g += 2) svg.appendChild(s("line", { class: "grid", x1: laneX, x2: laneX + LANE, y1: y(g), y2: y(g) }));
      svg.appendChild(s("text", { x: laneX + LANE / 2, y: H - B + 16, "text-anchor": "middle" }, "cost unknown"));
    }
    const lat = pts.map((m) => m.mean_latency_s).filter((v) => v !== null);
    const lo = Math.min(...lat), hi = Math.max(...lat);
    const spread = (k) => laneX + (lanePts.length < 2 ? LANE / 2 : 20 + (k * (LANE - 40)) / (lanePts.length - 1));
    pts.forEach((m, i) => {
      const r = lat.length > 1 && hi > lo && m.mean_latency_s !== null ? 5 + 9 * (m.mean_latency_s - lo) / (hi - lo) : 8;
      const inLane = costUnknown(m);
      const cx = inLane ? spread(lanePts.indexOf(m)) : x(m.known_cost_usd), cy = y(m.mean_score);
      const atLeast = !inLane && m.total_cost_usd === null;  // part of its cost unknown: at least what is drawn
      const leftLabel = lanePts.length && !inLane && cx > L + 0.7 * (right - L);  // (not over the lane)
      const g = s("g", { "data-model": m.model_id });
      g.appendChild(s("title", {}, m.model_id + (compare ? " (" + campaignName(m.campaign) + ")" : "") + ": score " + score(m.mean_score) + ", cost " + costText(m.total_cost_text, m.total_cost_usd) + ", mean latency " + latency(m.mean_latency_s) + " s"));
      g.appendChild(s("circle", { cx: cx, cy: cy, r: r, fill: COLOURS[m.campaign % COLOURS.length], "fill-opacity": 0.7, stroke: "#222" }));
      if (atLeast) {
        const a = cx + r + 2, b = a + 14;
        g.appendChild(s("path", { class: "at-least", d: "M" + a + " " + cy + "H" + b + "M" + (b - 5) + " " + (cy - 4) + "L" + b + " " + cy + "L" + (b - 5) + " " + (cy + 4) }));
      }
      const gap = r + 4 + (atLeast && !leftLabel ? 16 : 0);
      g.appendChild(s("text", { x: leftLabel ? cx - gap : cx + gap, y: cy + 4 + 11 * (i % 2), "text-anchor": leftLabel ? "end" : "start" },
        m.model_id + (compare ? " · " + campaignName(m.campaign) : "") + (atLeast ? " (cost " + costText(m.total_cost_text) + ")" : "")));
      svg.appendChild(g);
    });
    const legend = ["circle size: mean latency"];
    if (pts.some((m) => !costUnknown(m) && m.total_cost_usd === null)) legend.push("→ cost at least this", "   (part of it unknown)");
    legend.forEach((t, k) => svg.appendChild(s("text", { x: W - R + 12, y: T + 12 + 16 * k }, t)));
    const top = T + 16 * legend.length;
    if (compare) S.campaigns.forEach((c, i) => {
      svg.appendChild(s("circle", { cx: W - R + 18, cy: top + 18 + 18 * i, r: 6, fill: COLOURS[i % COLOURS.length] }));
      svg.appendChild(s("text", { x: W - R + 30, y: top + 22 + 18 * i }, "campaign " + LETTERS[i]));
    });
    return svg;
  }

  // ---- models x cases matrix
  function matrix() {
    const rows = filtered();
    const caseIdx = [...new Set(rows.map((r) => r.case))].sort((a, b) => S.cases[a].localeCompare(S.cases[b]));
    const lines = new Map();
    for (const r of rows) {
      const key = r.campaign + "\u0000" + r.model_id;
      if (!lines.has(key)) lines.set(key, { model: r.model_id, campaign: r.campaign, cells: new Map() });
      lines.get(key).cells.set(r.case, r);
    }
    const ordered = [...lines.values()].sort((a, b) => a.model.localeCompare(b.model) || a.campaign - b.campaign);
    const legend = h("div", { class: "legend hint" }, "Colour = final score: ",
      [0, 2, 4, 6, 8, 10].map((v) => h("span", { style: "background:" + scoreColour(v) }, v)),
      h("span", { style: "background:" + scoreColour(null), width: "auto" }, "none"),
      " · a red outline marks a failed verdict · click a cell to open the run.");
    const table = h("table", { class: "matrix", id: "matrix" },
      h("thead", {}, h("tr", {}, h("th", {}, "model \\ case"), caseIdx.map((c) => h("th", { class: "case", title: S.cases[c] }, S.cases[c])))),
      h("tbody", {}, ordered.map((line) => h("tr", { "data-model": line.model },
        h("th", {}, line.model + (compare ? " · " + campaignName(line.campaign) : "")),
        caseIdx.map((c) => {
          const r = line.cells.get(c);
          if (!r) return h("td", { class: "cell" });
          const label = r.score === null ? (r.status === "ok" ? "–" : "✗") : r.score.toFixed(1);
          return h("td", { class: "cell", style: "background:" + scoreColour(r.score) + (r.passed === false ? ";outline:2px solid #c0392b;outline-offset:-2px" : ""),
            "data-case": S.cases[c], title: S.cases[c] + " · " + r.model_id + ": score " + score(r.score) + ", " + r.status },
            h("a", { href: anchor(S.cases[c], r.model_id) }, label));
        })))));
    return [h("h2", {}, "Models × cases"), legend, h("div", { class: "matrix-wrap" }, table)];
  }

  // ---- all runs, paged
  let page = 0;
  function runs() {
    const rows = filtered();
    const per = 100, pages = Math.max(1, Math.ceil(rows.length / per));
    page = Math.min(page, pages - 1);
    const slice = rows.slice(page * per, page * per + per);
    const pager = h("div", { class: "pager" },
      h("button", { onclick: () => { page = Math.max(0, page - 1); render(); }, disabled: page === 0 }, "‹ previous"),
      "page " + (page + 1) + " of " + pages,
      h("button", { onclick: () => { page = Math.min(pages - 1, page + 1); render(); }, disabled: page >= pages - 1 }, "next ›"));
    return [h("h2", {}, "All runs"), pager, h("table", { id: "runs" },
      h("thead", {}, h("tr", {}, ["Model", "Case", compare ? "Campaign" : null, "Score", "Verdict", "Status", "Latency (s)", "Cost (USD)"]
        .filter((x) => x !== null).map((c) => h("th", {}, c)))),
      h("tbody", {}, slice.map((r) => h("tr", { "data-model": r.model_id, "data-case": S.cases[r.case] },
        h("td", {}, r.model_id), h("td", {}, h("a", { href: anchor(S.cases[r.case], r.model_id) }, S.cases[r.case])),
        compare ? h("td", {}, campaignName(r.campaign)) : null,
        h("td", { class: "num" }, score(r.score)), h("td", {}, verdict(r.passed)),
        h("td", { class: r.status === "ok" ? "" : "fail" }, r.status),
        h("td", { class: "num" }, latency(r.latency_s)), h("td", { class: "num" }, costText(r.cost_text, r.cost_usd))))))];
  }

  // ---- one model x case: every repetition's conversation, checks, judgements, aggregation
  function fact(label, value) { return h("div", {}, h("b", {}, label), value); }
  function text(v) { return h("pre", {}, typeof v === "string" ? v : JSON.stringify(v, null, 2)); }

  function conversation(d) {
    if (!d.artifact_stored) return h("p", { class: "muted" }, "The run's artifact is not in the store (never written, or collected).");
    return h("div", { class: "conversation" }, d.conversation.map((e) => {
      if (e.type === "message") return h("div", { class: "msg " + e.role }, h("div", { class: "who" }, e.role), text(e.content ?? ""));
      if (e.type === "tool_call") return h("div", { class: "msg tool_call" }, h("div", { class: "who" }, "tool call · " + e.tool + (e.id ? " · " + e.id : "")), text(e.arguments ?? ""));
      if (e.type === "tool_result") return h("div", { class: "msg tool_result" }, h("div", { class: "who" }, "tool result · " + (e.status || "") + (e.id ? " · " + e.id : "")), text(e.output ?? ""));
      if (e.type === "final") return h("div", { class: "msg final" }, h("div", { class: "who" }, "final answer"), text(e.content ?? ""));
      return h("div", { class: "msg" }, h("div", { class: "who" }, "runner · " + e.name), text(e.detail ?? ""));
    }));
  }

  // An OpenClaw run's answer is what it left in its workspace: the diff against the agent's template.
  function workspaceDiff(d) {
    if (d.workspace_diff === null || d.workspace_diff === undefined) return null;
    return h("div", {}, h("h3", {}, "Workspace diff"),
      d.workspace_diff ? text(d.workspace_diff) : h("p", { class: "muted" }, "The run changed no file of the agent's workspace."));
  }

  function judgement(j) {
    const dims = Object.entries(j.dimensions || {});
    return h("div", { class: "judge", "data-judge": j.judge_run_id + "#" + j.repetition },
      h("div", {}, h("b", {}, "Judge " + j.judge_run_id + " · repetition " + j.repetition), " · " + (j.judge_model || ""),
        " · overall ", h("b", {}, score(j.overall)), " · " + j.status + " · cost " + sourced(j.cost_usd, j.cost_source)),
      j.error ? h("div", { class: "fail" }, j.error) : null,
      j.summary ? h("div", { class: "judge-summary" }, j.summary) : null,
      j.overall_evidence && j.overall_evidence.length ? h("ul", {}, j.overall_evidence.map((e) => h("li", {}, e))) : null,
      dims.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "dimension"), h("th", { class: "num" }, "score"), h("th", {}, "evidence"))),
        h("tbody", {}, dims.map(([d, v]) => h("tr", {}, h("td", {}, d), h("td", { class: "num" }, score(v.score)),
          h("td", {}, (v.evidence || []).length ? h("ul", {}, v.evidence.map((e) => h("li", {}, e))) : h("span", { class: "muted" }, "–")))))) : null);
  }

  function runPanel(d) {
    const res = d.result;
    return h("section", { class: "run", "data-repetition": d.repetition, "data-campaign": d.campaign },
      h("h3", {}, (compare ? "Campaign " + campaignName(d.campaign) + " · " : "") + "Repetition " + d.repetition),
      h("div", { class: "facts" },
        fact("run status", h("span", { class: d.status === "success" ? "pass" : "fail" }, d.status)),
        fact("final score", res ? score(res.final_score) : "n/a"), fact("verdict", verdict(res ? res.passed : null)),
        fact("latency (s)", num(d.latency_s, 2)), fact("tokens in / out", tokens(d.tokens.input, d.tokens.input_known, ran(d)) + " / " + tokens(d.tokens.output, d.tokens.output_known, ran(d))),
        fact("run cost (USD)", sourced(d.run_cost_usd, d.run_cost_source, d.run_cost_known_usd)),
        fact("evaluation cost (USD)", cost(d.eval_cost_usd) + (d.eval_cost_sources && d.eval_cost_sources.priced ? " (" + d.eval_cost_sources.priced + " priced)" : "")),
        fact("model sent", d.requested_model || "–"), fact("build action", d.action || "–")),
      d.error ? h("p", { class: "fail" }, "Error: " + d.error) : null,
      h("h3", {}, "Conversation"), conversation(d),
      workspaceDiff(d),
      h("h3", {}, "Deterministic checks"),
      d.checks.length ? h("table", { class: "checks" }, h("thead", {}, h("tr", {}, ["check", "kind", "outcome", "message", "dimensions"].map((c) => h("th", {}, c)))),
        h("tbody", {}, d.checks.map((c) => h("tr", {}, h("td", {}, c.check_id), h("td", {}, c.kind || ""),
          h("td", { class: c.outcome === "passed" ? "pass" : "fail" }, c.outcome), h("td", {}, c.message || ""), h("td", {}, (c.dimensions || []).join(", "))))))
        : h("p", { class: "muted" }, "No deterministic check ran."),
      h("h3", {}, "Judge reasoning"),
      d.judgements.length ? d.judgements.map(judgement) : h("p", { class: "muted" }, "No judgement stored."),
      h("h3", {}, "Aggregation"),
      res ? h("p", { class: "aggregation" }, "method " + res.aggregation_method + " over " + res.judge_successful + " of " + res.judge_iterations +
        " judge iterations → final score " + score(res.final_score) + (res.pass_threshold !== null ? " against the pass threshold " + num(10 * res.pass_threshold, 1) + " (pass_threshold " + res.pass_threshold + ")" : ", no pass threshold") +
        " → ", verdict(res.passed), " · checks " + (res.checks_passed ?? 0) + "/" + (res.checks_total ?? 0) + " passed") : h("p", { class: "muted" }, "No result (not evaluated)."));
  }

  function runPage(caseId, modelId) {
    const rows = S.rows.filter((r) => S.cases[r.case] === caseId && r.model_id === modelId);
    if (!rows.length) return [h("h2", {}, "No run for case " + caseId + " and model " + modelId)];
    const needed = [...new Set(rows.flatMap((r) => r.runs.map((i) => Math.floor(i / S.details.per))))];
    if (!needed.every((n) => shards.has(n))) {
      const hash = location.hash;
      const status = h("p", { class: "muted", id: "run-loading" }, "Loading the run's details…");
      Promise.all(needed.map(loadShard)).then(() => { if (location.hash === hash) render(); },
        (e) => { status.className = "fail"; status.textContent = "Cannot show the run's details: " + e.message; });
      return [h("h2", {}, "Case ", h("code", {}, caseId), " · model ", h("code", {}, modelId)), status];
    }
    const out = [h("h2", { id: "run-title" }, "Case ", h("code", {}, caseId), " · model ", h("code", {}, modelId)),
      h("p", { class: "hint" }, "Tags: " + ((S.tags[caseId] || []).join(", ") || "none") + " · link to this page: " + anchor(caseId, modelId))];
    for (const r of rows) {
      if (r.problems.length) out.push(h("ul", { class: "fail" }, r.problems.map((p) => h("li", {}, p))));
      for (const i of r.runs) out.push(runPanel(detail(i)));
    }
    return out;
  }

  function render() {
    const hash = decodeURIComponent(location.hash || "#leaderboard");
    const m = /^#case\/(.*)\/model\/(.*)$/.exec(location.hash);
    let view = "leaderboard";
    let content;
    if (m) { view = "run"; content = runPage(decodeURIComponent(m[1]), decodeURIComponent(m[2])); }
    else if (hash === "#matrix") { view = "matrix"; content = matrix(); }
    else if (hash === "#runs") { view = "runs"; content = runs(); }
    else content = leaderboard();
    for (const n of ["leaderboard", "matrix", "runs"]) document.getElementById("nav-" + n).classList.toggle("active", n === view);
    const shown = filtered().length;
    document.getElementById("f-count").textContent = shown + " of " + S.rows.length + " model × case rows match";
    main.replaceChildren(...[content].flat());
    document.body.setAttribute("data-view", view);
  }
  window.addEventListener("hashchange", () => { page = 0; render(); window.scrollTo(0, 0); });
  render();
  performance.mark("claw-rendered");  // bench/view_bench.py reads it: the first view is on screen
})();
