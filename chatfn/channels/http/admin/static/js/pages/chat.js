// One chat: its effective settings and where each comes from, a form for the console's
// overrides (PATCH .../settings; "use config" sends null, which returns the key to config),
// reset context, and the history with tool calls, notices and images.
import { chatPath, currentSession, get, patch, post } from "../api.js";
import { h, json, money, num, replace, when } from "../dom.js";
import { t } from "../i18n.js";

export async function render(view, { params }) {
  const base = `/chats/${chatPath(params.platform, params.chatId)}`;
  const [chat, history] = await Promise.all([get(base), get(`${base}/history`)]);
  const notice = h("div#chat-notice", { hidden: true, role: "status" });
  const show = (text, ok) => {
    notice.hidden = false;
    notice.className = `notice ${ok ? "ok" : "err"}`;
    notice.textContent = text;
  };
  const settingsCard = h("section.card#settings-card");
  const draw = (current) => {
    replace(settingsCard, h("h3", null, t("chat.settings")),
      settingsForm(current, async (body) => {
        try {
          draw(await patch(`${base}/settings`, body));
          show(t("chat.saved"), true);
        } catch (error) {
          show(`${t("error.failed")}: ${error.message}`, false);
        }
      }, show));
  };
  draw(chat);

  const reset = h("button.danger#reset-context", {
    type: "button",
    onclick: async () => {
      if (!window.confirm(t("chat.reset_confirm"))) return;
      try {
        await post(`${base}/reset`);
        show(t("chat.reset_done"), true);
      } catch (error) {
        show(`${t("error.failed")}: ${error.message}`, false);
      }
    },
  }, t("chat.reset"));

  const today = chat.today || {};
  const summary = chat.summary;
  const historyBox = h("div.history");
  const older = h("button#older", { type: "button", hidden: !history.next_before }, t("chat.older"));
  let before = history.next_before;
  // Filter by fate (issue 40): "every declined message this week".
  const filter = () => {
    const found = {};
    if (fateChoice.value) found.fate = fateChoice.value;
    if (weekOnly.checked) found.days = 7;
    return found;
  };
  older.addEventListener("click", async () => {
    const page = await get(`${base}/history`, { ...filter(), before });
    historyBox.prepend(...historyEntries(page.messages || [], params));
    before = page.next_before;
    older.hidden = !before;
  });
  const fill = (page) => {
    replace(historyBox, ...historyEntries(page.messages || [], params));
    if (!(page.messages || []).length) historyBox.append(h("p.dim", null, t("common.none")));
    before = page.next_before;
    older.hidden = !before;
  };
  const refilter = async () => fill(await get(`${base}/history`, filter()));
  const fateChoice = h("select#fate-filter", { onchange: refilter },
    h("option", { value: "" }, t("chat.fate_all")),
    FATES.map((f) => h("option", { value: f }, t(`fate.${f}`))));
  const weekOnly = h("input#fate-week", { type: "checkbox", onchange: refilter });
  const filters = h("div.actions", null, h("label", null, t("chat.fate_filter"), " ", fateChoice),
    h("label", null, weekOnly, " ", t("chat.fate_week")));
  fill(history);

  replace(view,
    h("p", null, h("a", { href: "/admin/chats" }, `← ${t("nav.chats")}`)),
    h("h2", null, h("span#chat-title", null, chat.name || chat.chat_id),
      h("span.badge", null, chat.platform),
      h("span.badge", null, t(`chats.${chat.kind}`)),
      h("span.dim.mono", null, chat.chat_id)),
    notice,
    h("div.stats", null,
      stat(t("chat.today_messages"), num(today.messages)),
      stat(t("chat.today_calls"), num(today.model_calls)),
      stat(t("chat.today_tokens"), num(today.tokens)),
      stat(t("chat.today_cost"), money(today.cost))),
    h("div.grid.split", null,
      settingsCard,
      h("section.card", null,
        h("h3", null, t("chat.other_settings")), otherSettings(chat),
        h("h3", null, t("chat.context")),
        h("p.dim", null, summary ? t("chat.summary", { messages: summary.messages, tokens: summary.tokens, when: when(summary.created_at) })
          : t("chat.no_summary")),
        h("p.dim", null, t("chat.reset_help")), reset)),
    h("section.card#history", null, h("h3", null, t("chat.history")), filters, older, historyBox),
    replayCard(base, chat, show),
  );
}

/** Rehearse a model switch on this chat's recorded turns (issue 40.5): owners only, since it
 * asks models; the report's turns side by side; nothing is sent to the chat. */
function replayCard(base, chat, show) {
  const me = currentSession() || {};
  if (!me.owner) return null;
  const models = (chat.choices || {}).models || [];
  const model = h("select#replay-model", null, models.map((m) => h("option", { value: m }, m)));
  const against = h("select#replay-against", null,
    h("option", { value: "recorded" }, t("replay.recorded")),
    models.map((m) => h("option", { value: m }, m)));
  const persona = h("select#replay-persona", null,
    h("option", { value: "" }, t("replay.chat_prompt")),
    ((chat.choices || {}).personas || []).map((p) => h("option", { value: p }, p)));
  const limit = h("input#replay-limit", { type: "number", min: 1, max: 20, value: 5 });
  const out = h("div#replay-report");
  const run = h("button#replay-run", {
    type: "button",
    onclick: async () => {
      run.disabled = true;
      try {
        const report = await post(`${base}/replay`,
          { model: model.value, against: against.value, limit: Number(limit.value),
            persona: persona.value || null });
        replace(out, ...replayReport(report));
      } catch (error) {
        show(`${t("error.failed")}: ${error.message}`, false);
      } finally {
        run.disabled = false;
      }
    },
  }, t("replay.run"));
  return h("section.card#replay", null, h("h3", null, t("replay.title")),
    h("p.dim", null, t("replay.help")),
    h("div.actions", null, h("label", null, t("replay.model"), " ", model),
      h("label", null, t("replay.against"), " ", against),
      h("label", null, t("replay.persona"), " ", persona),
      h("label", null, t("replay.limit"), " ", limit), run),
    out);
}

function replayReport(report) {
  const total = report.summary;
  const side = (s) => h("td", null,
    h("div", null, (s.calls || []).map((c) =>
      h("div.mono", null, `${c.function} ${JSON.stringify(c.arguments)} (${c.how})`))),
    h("div", null, s.answer),
    s.error ? h("div.err", null, s.error) : null,
    s.refusals.length ? h("div.err", null, s.refusals.join("; ")) : null,
    h("div.dim", null, `${num(s.tokens.prompt)} + ${num(s.tokens.completion)} · ${money(s.cost)}`));
  return [
    h("p", null, t("replay.summary", { turns: total.turns, differ: total.differ })),
    h("table", null,
      h("tr", null, h("th", null, t("replay.turn")), h("th", null, report.replay.model),
        h("th", null, report.replay.against)),
      report.turns.map((turn) => h("tr", null,
        h("td", null, h("div", null, turn.message.text),
          h("div.dim", null, `${when(turn.message.time)} · ${turn.differs.join(", ")}`)),
        side(turn.model), side(turn.against)))),
  ];
}

function stat(label, value) {
  return h("div.stat", null, h("div.label", null, label), h("div.value", null, value));
}

/** Settings the console shows but does not edit (history size, mentions, ...). */
function otherSettings(chat) {
  const editable = new Set(chat.editable || []);
  const rows = Object.entries(chat.settings || {}).filter(([key]) => !editable.has(key) && key !== "reset");
  return h("dl.kv", null, rows.map(([key, entry]) => [
    h("dt", null, t(`setting.${key}`)),
    h("dd", null, shortValue(entry.value), " ", h("span.source", null, `(${entry.source || "default"})`)),
  ]));
}

function shortValue(value) {
  const text = display(value);
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
}

/** The overrides form: one row per editable key, the effective value's source beside it. */
function settingsForm(chat, save, show) {
  const settings = chat.settings || {};
  const choices = chat.choices || {};
  const keys = chat.editable || [];
  const fields = {};
  const rows = keys.map((key) => {
    const entry = settings[key] || { value: null, source: "default", override: null };
    const field = editor(key, entry.value, choices, (chat.keys || {})[key]);
    const useConfig = h("input", { type: "checkbox", name: `${key}-config`, checked: !entry.override });
    field.node.addEventListener("input", () => { useConfig.checked = false; });
    field.node.addEventListener("change", () => { useConfig.checked = false; });
    fields[key] = { field, useConfig, entry };
    const label = t(`setting.${key}`);
    return [
      h("label.key", { for: `set-${key}` }, label === `setting.${key}` ? key : label),
      h("div.field", { "data-key": key },
        field.node,
        h("div.row", null,
          h("label", null, useConfig, " ", t("chat.use_config")),
          h("span", { class: `source${entry.override ? " console" : ""}`, "data-source": key },
            t("chat.source"), ": ", entry.source || "default"))),
    ];
  });
  const form = h("form.settings#settings-form", null, rows,
    h("div.actions", null, h("button.primary#save-settings", { type: "submit" }, t("chat.save"))));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = {};
    try {
      for (const [key, { field, useConfig, entry }] of Object.entries(fields)) {
        if (useConfig.checked) {
          if (entry.override) body[key] = null;
          continue;
        }
        const value = field.read();
        if (!entry.override || JSON.stringify(value) !== JSON.stringify(entry.override.value)) body[key] = value;
      }
    } catch (error) {
      show(error.message, false);
      return;
    }
    if (!Object.keys(body).length) show(t("chat.nothing_changed"), true);
    else save(body);
  });
  return form;
}

/** The control for one key, starting at the effective value, and how to read it back; a
 * plugin's key by the form its declaration gives (`declared.form`: choice, bool, number, list,
 * text or json). */
function editor(key, value, choices, declared) {
  const id = `set-${key}`;
  const select = (options) => {
    const node = h("select", { id, name: key },
      options.map((o) => h("option", { value: o, selected: String(o) === String(value) }, String(o))));
    return { node, read: () => node.value };
  };
  if (key === "model") return select(choices.models || [value]);
  if (key === "language") return select(choices.languages || ["en", "zh"]);
  if (key === "respond_in_groups") return select(choices.respond_in_groups || ["at", "always", "never"]);
  if (key === "persona") {
    const list = h("datalist", { id: "persona-choices" }, (choices.personas || []).map((p) => h("option", { value: p })));
    const input = h("input", { id, name: key, value: value ?? "", list: "persona-choices", maxlength: 8000 });
    return { node: h("div.row", null, input, list), read: () => input.value.trim() };
  }
  if (key === "functions") return functionsEditor(id, value || {}, choices.functions || []);
  if (key === "limits") return limitsEditor(id, value || {});
  return declaredEditor(id, key, value, choices[key] || (declared && declared.choices), declared);
}

function declaredEditor(id, key, value, options, declared) {
  const form = declared ? declared.form : "text";
  if (form === "choice" && options) {
    const node = h("select", { id, name: key },
      options.map((o) => h("option", { value: String(o), selected: String(o) === String(value) }, String(o))));
    return { node, read: () => options.find((o) => String(o) === node.value) ?? node.value };
  }
  if (form === "bool") {
    const node = h("input", { id, name: key, type: "checkbox", checked: Boolean(value) });
    return { node, read: () => node.checked };
  }
  if (form === "number") {
    const node = h("input", { id, name: key, type: "number", step: "any", value: value ?? "" });
    return { node, read: () => Number(node.value) };
  }
  if (form === "list") {
    const node = h("input", { id, name: key, value: (value || []).join(", ") });
    return { node, read: () => names(node.value) };
  }
  if (form === "json") {
    const node = h("input", { id, name: key, value: value === null || value === undefined ? "" : JSON.stringify(value) });
    return { node, read: () => JSON.parse(node.value) };
  }
  const input = h("input", { id, name: key, value: value ?? "" });
  return { node: input, read: () => input.value };
}

const names = (text) => text.split(/[\s,]+/).filter(Boolean);

/** functions: {enabled: [names] | null, disabled: [names]} as two comma-separated lists. */
function functionsEditor(id, value, known) {
  const list = h("datalist", { id: "function-choices" }, known.map((f) => h("option", { value: f })));
  const enabled = h("input", { id, name: "functions-enabled", value: (value.enabled || []).join(", "),
    placeholder: t("chat.functions_all"), list: "function-choices" });
  const disabled = h("input", { name: "functions-disabled", value: (value.disabled || []).join(", "),
    placeholder: t("chat.functions_none") });
  const node = h("div.field", null,
    h("label.dim", null, t("chat.functions_enabled")), enabled,
    h("label.dim", null, t("chat.functions_disabled")), disabled, list,
    known.length ? h("div.dim", null, t("chat.functions_known"), ": ", known.join(", ")) : null);
  return {
    node,
    read: () => ({ enabled: enabled.value.trim() ? names(enabled.value) : null, disabled: names(disabled.value) }),
  };
}

/** limits: {per_chat: {...}, per_user: {...}} as a grid of numbers; empty means no limit. */
function limitsEditor(id, value) {
  const scopes = ["per_chat", "per_user"];
  const metrics = [...new Set(scopes.flatMap((s) => Object.keys(value[s] || {})))];
  if (!metrics.length) metrics.push("messages_per_minute", "model_calls_per_day", "tokens_per_day", "cost_per_day");
  const inputs = {};
  const rows = metrics.map((metric) => h("tr", null, h("td", null, t(`limit.${metric}`)),
    scopes.map((scope) => {
      const current = (value[scope] || {})[metric];
      const input = h("input", { type: "number", min: 0, step: "any", name: `${scope}.${metric}`,
        id: scope === "per_chat" && metric === metrics[0] ? id : null,
        value: current === null || current === undefined ? "" : String(current), placeholder: "∞" });
      inputs[`${scope}.${metric}`] = input;
      return h("td", null, input);
    })));
  const node = h("table.limits", null,
    h("thead", null, h("tr", null, h("th"), scopes.map((s) => h("th", null, t(`limit.${s}`))))),
    h("tbody", null, rows));
  return {
    node,
    read: () => Object.fromEntries(scopes.map((scope) => [scope, Object.fromEntries(metrics.map((metric) => {
      const text = inputs[`${scope}.${metric}`].value.trim();
      return [metric, text === "" ? null : Number(text)];
    }))])),
  };
}

function display(value) {
  if (value === null || value === undefined || value === "") return "—";
  if (Array.isArray(value)) return value.join(", ") || "—";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A message's fates (function_calls/fates.py), for the filter. */
const FATES = ["answered", "function", "declined", "not_addressed", "ignored", "held", "failed", "expired"];

/** History rows: messages with their fate, the tool calls each turn made, notices and images. */
function historyEntries(messages, params) {
  return messages.map((m) => {
    const trace = m.trace && m.message_id
      ? h("a.trace-link", { href: `/admin/turns/${chatPath(params.platform, params.chatId)}/${encodeURIComponent(m.message_id)}` }, t("chat.trace"))
      : null;
    const fate = m.fate && FATES.includes(m.fate.fate)
      ? h("span", { class: `badge fate ${["declined", "failed", "expired"].includes(m.fate.fate) ? "err" : "ok"}`,
        "data-fate": m.fate.fate, title: m.fate.detail || "" }, t(`fate.${m.fate.fate}`))
      : null;
    return h("div", { class: `entry ${m.role}`, "data-role": m.role, "data-id": m.id },
      h("div.meta", null, h("strong", null, m.role === "user" ? m.sender_name || m.sender_id : t(`role.${m.role}`)),
        h("span", null, when(m.time)), fate, trace),
      m.text ? h("div.text", null, m.text) : null,
      (m.images || []).map((src) => image(src)),
      (m.tool_calls || []).map((c) => toolCall(c)));
  });
}

/** An image: only data:image/ and http(s) URLs become <img>; anything else is named. */
function image(src) {
  if (typeof src === "string" && /^(data:image\/|https?:)/i.test(src)) {
    return h("img", { src, alt: t("chat.image"), loading: "lazy", referrerpolicy: "no-referrer" });
  }
  return h("div.dim", null, `[${t("chat.image")}]`);
}

/** A tool call, folded: outcome, function and duration; arguments and result inside. */
export function toolCall(c, open = false) {
  const ok = c.outcome === "ok";
  return h("details.entry.tool_call", { "data-function": c.function, open },
    h("summary", null, h("span", { class: `badge ${ok ? "ok" : "err"}` }, c.outcome), " ",
      h("code", null, c.function), " ",
      h("span.dim", null, `${c.source ? `${c.source} · ` : ""}${Math.round(c.duration_ms || 0)} ms`)),
    h("div.dim", null, t("trace.arguments")), h("pre", null, json(c.arguments)),
    c.detail ? [h("div.dim", null, t("trace.result")), h("pre", null, json(c.detail))] : null);
}
