// Delivery: outbox rows not delivered (pending, expired, failed) per channel and chat, with
// "retry now" (POST /admin/api/delivery/{id}/retry).
import { chatPath, get, post, query } from "../api.js";
import { age, h, num, replace, table, when } from "../dom.js";
import { t } from "../i18n.js";
import { stateClass } from "./turn.js";

const STATES = ["", "pending", "expired", "failed", "all"];

export async function render(view, { search, navigate }) {
  const state = STATES.includes(search.get("state")) ? search.get("state") || "" : "";
  const data = await get("/delivery", { state });
  const notice = h("div#delivery-notice", { hidden: true, role: "status" });
  const say = (text, ok) => {
    notice.hidden = false;
    notice.className = `notice ${ok ? "ok" : "err"}`;
    notice.textContent = text;
  };
  const retry = async (row, button) => {
    button.disabled = true;
    try {
      const answer = await post(`/delivery/${encodeURIComponent(row.event_id)}/retry`);
      say(t("delivery.retried", { id: row.event_id, state: answer.state }), true);
      const cell = button.closest("tr").querySelector(".state");
      if (cell) replace(cell, h("span", { class: `badge ${stateClass(answer.state)}` }, answer.state));
    } catch (error) {
      button.disabled = false;
      say(`${t("error.failed")}: ${error.message}`, false);
    }
  };
  const chatLink = (r) => h("a", { href: `/admin/chats/${chatPath(r.platform, r.chat_id)}` }, `${r.platform}:${r.chat_id}`);
  const summary = table([
    { label: t("chats.chat"), value: chatLink },
    { label: t("delivery.pending"), class: "num", value: (s) => num(s.pending) },
    { label: t("delivery.expired"), class: "num", value: (s) => num(s.expired) },
    { label: t("delivery.failed"), class: "num", value: (s) => num(s.failed) },
    { label: t("health.oldest_pending"), value: (s) => when(s.oldest_pending_at) },
  ], data.summary || [], { empty: t("delivery.all_delivered") });
  const rows = table([
    { label: "#", class: "num", value: (r) => r.event_id },
    { label: t("chats.chat"), value: chatLink },
    { label: t("delivery.state"), class: "state", value: (r) => h("span", { class: `badge ${stateClass(r.state)}` }, r.state) },
    { label: t("delivery.attempts"), class: "num", value: (r) => num(r.attempts) },
    { label: t("delivery.text"), value: (r) => h("span", null, r.notice ? h("span.badge", null, t("role.notice")) : null, " ", r.text) },
    { label: t("delivery.age"), value: (r) => age(r.age_seconds) },
    { label: t("delivery.updated"), value: (r) => when(r.updated_at) },
    { label: "", value: (r) => r.state === "delivered" ? ""
      : h("button.retry", { type: "button", onclick: (e) => retry(r, e.currentTarget) }, t("delivery.retry")) },
  ], data.rows || [], { empty: t("common.none"), rowAttrs: (r) => ({ "data-event": r.event_id }) });

  replace(view,
    h("h2", null, t("nav.delivery")),
    h("div.toolbar", null, h("label", null, t("delivery.state"), " ",
      h("select#delivery-state", { onchange: (e) => navigate(`/admin/delivery${query({ state: e.target.value })}`) },
        STATES.map((s) => h("option", { value: s, selected: s === state }, t(`delivery.state_${s || "open"}`)))))),
    notice,
    h("section.card#delivery-summary", null, h("h3", null, t("delivery.per_chat")), summary),
    h("section.card#delivery-rows", null, h("h3", null, t("delivery.rows")), rows),
  );
}
