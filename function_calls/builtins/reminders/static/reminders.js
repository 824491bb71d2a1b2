// Reminders: the active (or all) reminders of the chats the user may see, each cancellable
// (DELETE /admin/api/reminders/{id}). The reminders built-in's page (its ConsoleView in
// ../console.py), served as /admin/api/pages/reminders.js: the console's helpers are imported
// by their absolute paths.
import { chatPath, del, get, query } from "/admin/static/js/api.js";
import { h, num, replace, table, when } from "/admin/static/js/dom.js";
import { t } from "/admin/static/js/i18n.js";

export async function render(view, { search, navigate }) {
  const status = search.get("status") === "all" ? "all" : "active";
  const data = await get("/reminders", { status });
  const notice = h("div#reminder-notice", { hidden: true, role: "status" });
  const cancel = async (r, button) => {
    if (!window.confirm(t("reminders.cancel_confirm", { text: r.text }))) return;
    button.disabled = true;
    try {
      await del(`/reminders/${encodeURIComponent(r.id)}`);
      navigate(`/admin/reminders${query({ status: status === "all" ? "all" : "" })}`, { replaceState: true });
    } catch (error) {
      button.disabled = false;
      notice.hidden = false;
      notice.className = "notice err";
      notice.textContent = `${t("error.failed")}: ${error.message}`;
    }
  };
  const list = table([
    { label: t("reminders.text"), value: (r) => r.text },
    { label: t("reminders.chat"), value: (r) => h("a", { href: `/admin/chats/${chatPath(r.platform, r.chat_id)}` }, r.chat_name || `${r.platform}:${r.chat_id}`) },
    { label: t("reminders.creator"), value: (r) => r.creator_name || r.creator_id },
    { label: t("reminders.when"), value: (r) => h("span", null, r.spec || r.kind, h("div.dim", null, r.timezone || "")) },
    { label: t("reminders.next_run"), value: (r) => when(r.next_run) },
    { label: t("reminders.fired"), class: "num", value: (r) => num(r.fired_count) },
    { label: t("reminders.status"), value: (r) => h("span", { class: `badge ${r.status === "active" ? "ok" : ""}` }, r.status) },
    { label: "", value: (r) => r.status === "active"
      ? h("button.danger.cancel-reminder", { type: "button", onclick: (e) => cancel(r, e.currentTarget) }, t("reminders.cancel"))
      : "" },
  ], data.reminders || [], { empty: t("common.none"), rowAttrs: (r) => ({ "data-reminder": r.id }) });

  replace(view,
    h("h2", null, t("nav.reminders")),
    h("div.toolbar", null,
      h("label", null, h("input#show-all", { type: "checkbox", checked: status === "all",
        onchange: (e) => navigate(`/admin/reminders${e.target.checked ? "?status=all" : ""}`) }), " ", t("reminders.show_all"))),
    notice,
    h("section.card", null, list),
  );
}
