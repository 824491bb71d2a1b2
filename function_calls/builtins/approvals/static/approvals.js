// Approvals: the calls held for approval in the chats the user may see, each answered here
// (POST /admin/api/approvals/{id} {decision, reason}). The approvals built-in's page (its
// ConsoleView in ../console.py), served as /admin/api/pages/approvals.js.
import { chatPath, get, post } from "/admin/static/js/api.js";
import { h, replace, table, when } from "/admin/static/js/dom.js";
import { t } from "/admin/static/js/i18n.js";

export async function render(view, { navigate }) {
  const data = await get("/approvals");
  const notice = h("div#approval-notice", { hidden: true, role: "status" });
  const answer = async (a, decision, button) => {
    let reason = "";
    if (decision === "deny") {
      reason = window.prompt(t("approvals.deny_reason")) ?? "";
    }
    button.disabled = true;
    try {
      await post(`/approvals/${encodeURIComponent(a.id)}`, { decision, reason });
      navigate("/admin/approvals", { replaceState: true });
    } catch (error) {
      button.disabled = false;
      notice.hidden = false;
      notice.className = "notice err";
      notice.textContent = `${t("error.failed")}: ${error.message}`;
    }
  };
  const list = table([
    { label: "ID", value: (a) => h("code", null, a.id) },
    { label: t("approvals.call"), value: (a) => h("code", null, a.call) },
    { label: t("approvals.chat"), value: (a) => h("a", { href: `/admin/chats/${chatPath(a.platform, a.chat_id)}` }, `${a.platform}:${a.chat_id}`) },
    { label: t("approvals.asked_by"), value: (a) => `${a.sender_name || a.sender_id} (${a.source})` },
    { label: t("approvals.level"), value: (a) => a.level },
    { label: t("approvals.expires"), value: (a) => when(a.expires_at) },
    { label: "", value: (a) => h("span", null,
      h("button.approve", { type: "button", onclick: (e) => answer(a, "approve", e.currentTarget) }, t("approvals.approve")), " ",
      h("button.danger.deny", { type: "button", onclick: (e) => answer(a, "deny", e.currentTarget) }, t("approvals.deny"))) },
  ], data.approvals || [], { empty: t("common.none"), rowAttrs: (a) => ({ "data-approval": a.id }) });

  replace(view, h("h2", null, t("nav.approvals")), notice, h("section.card", null, list));
}
