// Overview: the bot's traffic, model calls, tokens, cost, error rate and latency as charts
// (GET /admin/api/overview?days=N), and its health right now.
import { currentSession, get } from "../api.js";
import { lineChart } from "../chart.js";
import { age, h, money, ms, num, pct, replace, when } from "../dom.js";
import { t } from "../i18n.js";

const RANGES = [1, 7, 30];

export async function render(view, { search, navigate }) {
  const days = Number(search.get("days")) || 7;
  const data = await get("/overview", { days });
  const buckets = data.series || [];
  const times = buckets.map((b) => toEpoch(b.t));
  const column = (key) => buckets.map((b) => (b[key] === undefined ? null : b[key]));
  const errorRate = buckets.map((b) => (b.model_calls ? b.model_errors / b.model_calls : 0));
  const totals = data.totals || {};

  const range = h("div.toolbar", null,
    h("span.dim", null, t("overview.range")),
    RANGES.map((d) => h("button", {
      type: "button", class: d === days ? "primary" : null, "data-days": d,
      onclick: () => navigate(`/admin/?days=${d}`),
    }, t("overview.days", { n: d }))),
    h("span.dim", null, t(`overview.bucket_${data.bucket || "hour"}`)));

  const stat = (key, value) => h("div.stat", { "data-stat": key },
    h("div.label", null, t(`overview.${key}`)), h("div.value", null, value));
  const stats = h("div.stats", null,
    stat("messages_in", num(totals.messages_in)),
    stat("messages_out", num(totals.messages_out)),
    stat("model_calls", num(totals.model_calls)),
    stat("tokens", num(totals.tokens)),
    stat("cost", money(totals.cost)),
    stat("error_rate", pct(totals.error_rate)),
    stat("latency_p50", ms(totals.latency_p50_ms)),
    stat("latency_p95", ms(totals.latency_p95_ms)),
    stat("active_chats", num(totals.active_chats)));

  const charts = h("div.grid", null,
    lineChart({ id: "chart-messages", title: t("overview.chart_messages"), times, series: [
      { label: t("overview.messages_in"), values: column("messages_in") },
      { label: t("overview.messages_out"), values: column("messages_out") }] }),
    lineChart({ id: "chart-calls", title: t("overview.chart_calls"), times, series: [
      { label: t("overview.model_calls"), values: column("model_calls") },
      { label: t("overview.active_chats"), values: column("active_chats") }] }),
    lineChart({ id: "chart-tokens", title: t("overview.chart_tokens"), times, format: (v) => num(v),
      series: [{ label: t("overview.tokens"), values: column("tokens") }] }),
    lineChart({ id: "chart-cost", title: t("overview.chart_cost"), times, format: (v) => money(v),
      series: [{ label: t("overview.cost"), values: column("cost") }] }),
    lineChart({ id: "chart-errors", title: t("overview.chart_errors"), times, format: (v) => pct(v),
      series: [{ label: t("overview.error_rate"), values: errorRate }] }),
    lineChart({ id: "chart-latency", title: t("overview.chart_latency"), times, format: (v) => ms(v),
      series: [
        { label: "p50", values: column("latency_p50_ms") },
        { label: "p95", values: column("latency_p95_ms") }] }));

  replace(view, h("h2", null, t("nav.overview")), range, stats,
    data.health ? health(data.health, (currentSession() || {}).panels || []) : null, charts);
}

/** Health: channels, the plugins' lists (`panels`, from the session: MCP servers), outbox
 * backlog, oldest pending, event-loop lag, workers. */
function health(data, panels) {
  const badge = (good, text) => h("span", { class: `badge ${good ? "ok" : "err"}` }, text);
  const channels = (data.channels || []).map((c) =>
    h("li", { "data-channel": c.name }, badge(c.connected, c.connected ? t("health.up") : t("health.down")), " ", c.name,
      c.detail ? h("span.dim", null, ` ${c.detail}`) : null));
  // Each plugin's list (a `HealthList` of its console view): a heading, then one line per item.
  const lists = panels.filter((p) => /^[a-z][a-z0-9_-]*$/.test(p.view) && Array.isArray(data[p.key])).map((p) => {
    const items = data[p.key].map((s) =>
      h("li", { [`data-${p.view}`]: s.name }, badge((p.good || []).includes(s.state), t(`${p.states}${s.state}`)), " ", s.name,
        s.detail ? h("span.dim", null, ` ${s.detail}`) : null));
    return [h("h3.dim", null, t(p.title)), h("ul", null, items.length ? items : h("li.dim", null, "—"))];
  });
  const workers = (data.workers || []).map((w) =>
    h("li", null, badge(w.alive, w.alive ? t("health.up") : t("health.down")), " ", w.id,
      h("span.dim", null, ` ${w.host} · ${when(w.seen_at)}`)));
  const outbox = data.outbox || {};
  const lag = data.event_loop_lag_ms;
  const backlog = (outbox.pending || 0) + (outbox.expired || 0) + (outbox.failed || 0);
  return h("section.card.health#health", null,
    h("h3", null, t("health.title"), " ", h("span.dim", null, `${t(`health.role_${data.role}`)} · ${t("health.since")} ${when(data.started_at)}`)),
    h("div.grid", null,
      h("div", null, h("h3.dim", null, t("health.channels")), h("ul", null, channels.length ? channels : h("li.dim", null, "—")),
        lists,
        workers.length ? [h("h3.dim", null, t("health.workers")), h("ul", null, workers)] : null),
      h("dl.kv", null,
        h("dt", null, t("health.outbox_pending")),
        h("dd#outbox-pending", null, h("a", { href: "/admin/delivery", class: `badge ${backlog ? "warn" : "ok"}` }, num(outbox.pending))),
        h("dt", null, t("health.outbox_expired")), h("dd", null, num(outbox.expired)),
        h("dt", null, t("health.outbox_failed")), h("dd", null, num(outbox.failed)),
        h("dt", null, t("health.oldest_pending")), h("dd", null, outbox.oldest_pending_at
          ? `${when(outbox.oldest_pending_at)} (${age(outbox.oldest_pending_seconds)})` : "—"),
        h("dt", null, t("health.loop_lag")), h("dd", null,
          lag === null || lag === undefined ? "—" : h("span", { class: `badge ${lag > 100 ? "warn" : "ok"}` }, ms(lag))))));
}

/** Bucket start (ISO text or epoch seconds) as epoch seconds for the charts. */
export function toEpoch(value) {
  return typeof value === "number" ? value : Math.floor(new Date(value).getTime() / 1000);
}
