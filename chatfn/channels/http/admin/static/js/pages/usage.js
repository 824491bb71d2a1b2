// Usage: tokens and cost over time grouped by model, chat or user
// (GET /admin/api/usage?group_by=...&days=N), the top chats and users, and the CSV export.
import { BASE, chatPath, get, query } from "../api.js";
import { lineChart } from "../chart.js";
import { h, money, num, replace, table } from "../dom.js";
import { t } from "../i18n.js";
import { toEpoch } from "./overview.js";

const GROUPS = ["model", "chat", "user"];

export async function render(view, { search, navigate }) {
  const groupBy = GROUPS.includes(search.get("group_by")) ? search.get("group_by") : "model";
  const days = Number(search.get("days")) || 7;
  const data = await get("/usage", { group_by: groupBy, days });
  const go = (changes) => navigate(`/admin/usage${query({ group_by: groupBy, days, ...changes })}`);

  const toolbar = h("div.toolbar", null,
    h("label", null, t("usage.group_by"), " ",
      h("select#group-by", { onchange: (e) => go({ group_by: e.target.value }) },
        GROUPS.map((g) => h("option", { value: g, selected: g === groupBy }, t(`usage.by_${g}`))))),
    h("label", null, t("overview.range"), " ",
      h("select#days", { onchange: (e) => go({ days: e.target.value }) },
        [1, 7, 30, 90].map((d) => h("option", { value: d, selected: d === days }, t("overview.days", { n: d }))))),
    h("a#csv-export", { href: `${BASE}/usage${query({ group_by: groupBy, days, format: "csv" })}`, download: "" },
      `⬇ ${t("usage.csv")}`));

  const series = data.series || [];
  const times = series.map((b) => toEpoch(b.t));
  const keys = [...new Set(series.flatMap((b) => Object.keys(b.tokens || {})))];
  const labels = Object.fromEntries((data.groups || []).map((g) => [g.key, g.label || g.key]));
  // A bucket without a group's key had no request of it: 0 tokens; a cost of null is
  // unpriced and stays a gap.
  const lines = (field) => keys.map((key) => ({
    label: key === "other" ? t("usage.other") : labels[key] || key,
    values: series.map((b) => {
      const values = b[field] || {};
      return key in values ? values[key] : field === "tokens" ? 0 : null;
    }),
  }));
  const totals = data.totals || {};

  const keyCell = (g) => {
    if (groupBy === "chat" && g.platform) {
      return h("a", { href: `/admin/chats/${chatPath(g.platform, g.chat_id)}` }, g.label || g.key);
    }
    return h("span", null, g.label || g.key, g.label && g.label !== g.key ? h("div.dim.mono", null, g.key) : null);
  };
  const groups = table([
    { label: t(`usage.by_${groupBy}`), value: keyCell },
    { label: t("usage.requests"), class: "num", value: (g) => num(g.requests) },
    { label: t("usage.errors"), class: "num", value: (g) => num(g.errors) },
    { label: t("trace.prompt_tokens"), class: "num", value: (g) => num(g.prompt_tokens) },
    { label: t("trace.cached_tokens"), class: "num", value: (g) => num(g.cached_tokens) },
    { label: t("trace.completion_tokens"), class: "num", value: (g) => num(g.completion_tokens) },
    { label: t("overview.tokens"), class: "num", value: (g) => num(g.tokens) },
    { label: t("overview.cost"), class: "num", value: (g) => money(g.cost) },
  ], data.groups || [], { empty: t("common.none"), rowAttrs: (g) => ({ "data-key": g.key }) });
  const top = (rows, id) => table([
    { label: t("usage.name"), value: (r) => h("span", null, r.label || r.key,
      r.label && r.label !== r.key ? h("div.dim.mono", null, r.key) : null) },
    { label: t("overview.tokens"), class: "num", value: (r) => num(r.tokens) },
    { label: t("overview.cost"), class: "num", value: (r) => money(r.cost) },
  ], rows || [], { empty: t("common.none"), rowAttrs: (r) => ({ "data-key": r.key, "data-list": id }) });

  replace(view,
    h("h2", null, t("nav.usage")),
    toolbar,
    h("div.stats", null,
      h("div.stat", null, h("div.label", null, t("usage.requests")), h("div.value#usage-requests", null, num(totals.requests))),
      h("div.stat", null, h("div.label", null, t("overview.tokens")), h("div.value#usage-tokens", null, num(totals.tokens))),
      h("div.stat", null, h("div.label", null, t("trace.cached_tokens")), h("div.value", null, num(totals.cached_tokens))),
      h("div.stat", null, h("div.label", null, t("overview.cost")), h("div.value#usage-cost", null, money(totals.cost)))),
    h("div.grid", null,
      lineChart({ id: "chart-usage-tokens", title: t("usage.tokens_over_time"), times, series: lines("tokens"), format: (v) => num(v) }),
      lineChart({ id: "chart-usage-cost", title: t("usage.cost_over_time"), times, series: lines("cost"), format: (v) => money(v) })),
    h("section.card#usage-groups", null, h("h3", null, t("usage.groups")), groups),
    h("div.grid", null,
      h("section.card#top-chats", null, h("h3", null, t("usage.top_chats")), top(data.top_chats, "chats")),
      h("section.card#top-users", null, h("h3", null, t("usage.top_users")), top(data.top_users, "users"))),
  );
}
