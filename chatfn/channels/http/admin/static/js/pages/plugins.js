// Plugins and MCP: each plugin's status line and functions, each MCP server's state
// (GET /admin/api/plugins; unscoped users only, a scoped one sees the 403 message).
import { get } from "../api.js";
import { h, replace, table } from "../dom.js";
import { t } from "../i18n.js";

export async function render(view) {
  const data = await get("/plugins");
  const stateBadge = (state) => h("span", { class: `badge ${stateClass(state)}` }, state);
  const plugins = table([
    { label: t("plugins.name"), value: (p) => h("span", null, p.name, p.builtin ? h("span.badge", null, t("plugins.builtin")) : null) },
    { label: t("plugins.state"), value: (p) => stateBadge(p.state) },
    { label: t("plugins.status"), value: (p) => p.status || "" },
    { label: t("plugins.functions"), value: (p) => h("span.mono", null, (p.functions || []).join(", ")) },
  ], data.plugins || [], { empty: t("common.none"), rowAttrs: (p) => ({ "data-plugin": p.name }) });
  const mcp = table([
    { label: t("plugins.name"), value: (s) => s.name },
    { label: t("plugins.state"), value: (s) => stateBadge(s.state) },
    { label: t("plugins.tools"), value: (s) => h("span.mono", null, (s.tools || []).join(", ")) },
    { label: t("plugins.detail"), value: (s) => s.detail || "" },
  ], data.mcp_servers || [], { empty: t("common.none"), rowAttrs: (s) => ({ "data-mcp": s.name }) });
  replace(view,
    h("h2", null, t("nav.plugins")),
    h("section.card#plugin-list", null, h("h3", null, t("plugins.plugins")), plugins),
    h("section.card#mcp-list", null, h("h3", null, t("plugins.mcp")), mcp),
  );
}

/** A plugin's or server's state as a colour: working, off on purpose, failed, or in between
 * (a missing key, connecting, degraded: it says why in its status line). */
function stateClass(state) {
  if (["ok", "on", "connected"].includes(state)) return "ok";
  if (["off", "stopped"].includes(state)) return "";
  if (state === "failed") return "err";
  return "warn";
}
