// Turn trace: everything recorded for one incoming message (GET /admin/api/turns/...): each
// model request, each tool call, the limits checked and the deliveries made, in time order.
import { chatPath, get } from "../api.js";
import { h, money, ms, num, replace, table, when } from "../dom.js";
import { t } from "../i18n.js";
import { toolCall } from "./chat.js";

export async function render(view, { params }) {
  const chat = chatPath(params.platform, params.chatId);
  const turn = await get(`/turns/${chat}/${encodeURIComponent(params.messageId)}`);
  const message = turn.message || {};

  const requests = table([
    { label: t("trace.round"), class: "num", value: (r) => r.round },
    { label: t("trace.model"), value: (r) => h("span", null, r.model, h("div.dim.mono", null, r.model_id || "")) },
    { label: t("trace.latency"), class: "num", value: (r) => ms(r.latency_ms) },
    { label: t("trace.prompt_tokens"), class: "num", value: (r) => num(r.prompt_tokens) },
    { label: t("trace.cached_tokens"), class: "num", value: (r) => num(r.cached_tokens) },
    { label: t("trace.completion_tokens"), class: "num", value: (r) => num(r.completion_tokens) },
    { label: t("trace.finish"), value: (r) => r.finish_reason || "—" },
    { label: t("trace.outcome"), value: (r) => h("span", { class: `badge ${r.outcome === "ok" ? "ok" : "err"}` }, r.outcome) },
    { label: t("trace.cost"), class: "num", value: (r) => money(r.cost) },
  ], turn.model_requests || [], { empty: t("common.none") });

  const limits = table([
    { label: t("trace.scope"), value: (l) => l.scope },
    { label: t("trace.metric"), value: (l) => l.metric },
    { label: t("trace.window"), value: (l) => l.window },
    { label: t("trace.value"), class: "num", value: (l) => `${num(l.value, 4)} / ${l.limit === null ? "∞" : num(l.limit, 4)}` },
    { label: t("trace.outcome"), value: (l) => h("span", { class: `badge ${l.outcome === "ok" ? "ok" : "warn"}` }, l.outcome) },
  ], turn.limits || [], { empty: t("common.none") });

  const deliveries = table([
    { label: "#", class: "num", value: (d) => d.event_id },
    { label: t("delivery.state"), value: (d) => h("span", { class: `badge ${stateClass(d.state)}` }, d.state) },
    { label: t("delivery.attempts"), class: "num", value: (d) => d.attempts },
    { label: t("delivery.text"), value: (d) => d.text },
    { label: t("delivery.updated"), value: (d) => when(d.updated_at) },
  ], turn.deliveries || [], { empty: t("common.none") });

  replace(view,
    h("p", null, h("a", { href: `/admin/chats/${chat}` }, `← ${params.platform}:${params.chatId}`)),
    h("h2", null, t("trace.title"), h("span.dim.mono", null, `#${turn.message_id}`)),
    h("section.card#turn-message", null,
      h("div.meta.dim", null, `${message.sender_name || message.sender_id || ""} · ${when(message.time)}`),
      h("div.text", null, message.text || ""),
      h("dl.kv", null,
        h("dt", null, t("trace.received")), h("dd", null, when(turn.received_at)),
        h("dt", null, t("trace.finished")), h("dd", null, when(turn.finished_at)),
        h("dt", null, t("trace.duration")), h("dd", null, ms(turn.duration_ms)))),
    h("section.card#model-requests", null, h("h3", null, t("trace.model_requests")), requests),
    h("section.card#tool-calls", null, h("h3", null, t("trace.tool_calls")),
      (turn.tool_calls || []).length ? turn.tool_calls.map((c) => toolCall(c, true)) : h("p.dim", null, t("common.none"))),
    h("section.card#limits", null, h("h3", null, t("trace.limits")), limits),
    h("section.card#deliveries", null, h("h3", null, t("trace.deliveries")), deliveries),
    h("section.card#replies", null, h("h3", null, t("trace.replies")),
      (turn.replies || []).map((r) => h("div", { class: `entry ${r.role}` },
        h("div.meta", null, when(r.time)), h("div.text", null, r.text)))),
  );
}

export function stateClass(state) {
  return state === "delivered" ? "ok" : state === "pending" ? "warn" : "err";
}
