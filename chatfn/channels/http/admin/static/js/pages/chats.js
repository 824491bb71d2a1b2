// Chats: every chat the bot has seen (GET /admin/api/chats), searchable and filtered by
// platform, group/private and recent activity; a row opens the chat's page. The filters live
// in the URL so a filtered list can be bookmarked and Back works.
import { chatPath, get, query } from "../api.js";
import { h, money, num, replace, table, when } from "../dom.js";
import { t } from "../i18n.js";

const PAGE = 50;

export async function render(view, { search, navigate }) {
  const filters = {
    q: search.get("q") || "",
    platform: search.get("platform") || "",
    kind: search.get("kind") || "",
    active_days: search.get("active_days") || "",
  };
  const offset = Math.max(0, Number(search.get("offset")) || 0);
  const data = await get("/chats", { ...filters, limit: PAGE, offset });
  const chats = data.chats || [];
  const platforms = data.platforms || [...new Set(chats.map((c) => c.platform))];

  const apply = (event) => {
    event.preventDefault();
    const form = new FormData(event.target.closest("form"));
    const params = new URLSearchParams();
    for (const [key, value] of form) if (value) params.set(key, value);
    const text = params.toString();
    navigate(`/admin/chats${text ? `?${text}` : ""}`);
  };
  const select = (name, options) => h("select", { name, onchange: apply, "aria-label": t(`chats.filter_${name}`) },
    options.map(([value, label]) => h("option", { value, selected: value === filters[name] }, label)));
  const toolbar = h("form.toolbar#chat-filters", { onsubmit: apply },
    h("input", { type: "search", name: "q", value: filters.q, placeholder: t("chats.search") }),
    select("platform", [["", t("chats.all_platforms")], ...platforms.map((p) => [p, p])]),
    select("kind", [["", t("chats.all_kinds")], ["group", t("chats.group")], ["private", t("chats.private")]]),
    select("active_days", [["", t("chats.any_time")], ["1", t("chats.active_in", { n: 1 })],
      ["7", t("chats.active_in", { n: 7 })], ["30", t("chats.active_in", { n: 30 })]]),
    h("button", { type: "submit" }, t("chats.apply")));

  const link = (c) => h("a.chat-link", { href: `/admin/chats/${chatPath(c.platform, c.chat_id)}` }, c.name || c.chat_id);
  const list = table([
    { label: t("chats.chat"), value: (c) => h("span", null, link(c),
      c.name && c.name !== c.chat_id ? h("div.dim.mono", null, c.chat_id) : null) },
    { label: t("chats.platform"), value: (c) => c.platform },
    { label: t("chats.kind"), value: (c) => h("span.badge", null, t(`chats.${c.kind}`)) },
    { label: t("chats.model"), value: (c) => h("span", null, c.model || "—",
      (c.overrides || []).length ? h("span.badge", { title: c.overrides.join(", ") }, t("chats.overridden", { n: c.overrides.length })) : null) },
    { label: t("chats.messages"), class: "num", value: (c) => num(c.messages) },
    { label: t("chats.tokens_7d"), class: "num", value: (c) => num(c.tokens_7d) },
    { label: t("chats.cost_7d"), class: "num", value: (c) => money(c.cost_7d) },
    { label: t("chats.pending"), class: "num", value: (c) => c.pending ? h("span.badge.warn", null, num(c.pending)) : "0" },
    { label: t("chats.last_active"), value: (c) => when(c.last_active) },
  ], chats, { empty: t("common.none"), rowAttrs: (c) => ({ "data-chat": `${c.platform}:${c.chat_id}` }) });

  const total = data.total ?? chats.length;
  const page = (to) => navigate(`/admin/chats${query({ ...filters, offset: to || "" })}`);
  const pager = total > PAGE ? h("div.toolbar#chat-pages", null,
    h("button", { type: "button", disabled: offset === 0, onclick: () => page(Math.max(0, offset - PAGE)) }, "←"),
    h("span.dim", null, `${offset + 1}–${offset + chats.length} / ${total}`),
    h("button", { type: "button", disabled: offset + chats.length >= total, onclick: () => page(offset + PAGE) }, "→")) : null;

  replace(view, h("h2", null, t("nav.chats"), h("span.dim", null, t("chats.count", { n: total }))),
    toolbar, h("section.card", null, list, pager));
}
