// Audit: every change made in the console and every login (GET /admin/api/audit), newest first.
import { chatPath, get } from "../api.js";
import { h, replace, table, when } from "../dom.js";
import { t } from "../i18n.js";

export async function render(view) {
  const data = await get("/audit", { limit: 200 });
  const detail = (e) => {
    const d = e.detail;
    if (d && typeof d === "object" && "key" in d) return `${d.key}: ${JSON.stringify(d.old)} → ${JSON.stringify(d.new)}`;
    return d === null || d === undefined ? "" : typeof d === "object" ? JSON.stringify(d) : String(d);
  };
  replace(view,
    h("h2", null, t("nav.audit")),
    h("section.card", null, table([
      { label: t("audit.time"), value: (e) => when(e.time) },
      { label: t("audit.user"), value: (e) => h("span", null, e.user, h("div.dim.mono", null, e.address || "")) },
      { label: t("audit.action"), value: (e) => h("span.badge", null, e.action) },
      { label: t("chats.chat"), value: (e) => e.platform
        ? h("a", { href: `/admin/chats/${chatPath(e.platform, e.chat_id)}` }, `${e.platform}:${e.chat_id}`) : "" },
      { label: t("audit.detail"), value: (e) => h("span.mono", null, detail(e)) },
    ], data.entries || [], { empty: t("common.none") })),
  );
}
