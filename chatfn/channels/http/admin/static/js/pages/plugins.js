// The Plugins page (docs/admin-api.md "Plugins"; unscoped users only): each plugin with its
// state, metadata and health, on/off for the bot and for one chat, its settings form made from
// its settings model (secrets write-only), the market from plugins.index_url (search, details,
// install, upgrade, remove: owners only, where admin.allow_plugin_install is on, each install
// after the same confirmation as `chatfn plugin install`), and the lists the plugins' health
// answers hold (their console views' `health`: the MCP servers).
import { ApiError, currentSession, del, get, post, request } from "../api.js";
import { h, replace, table } from "../dom.js";
import { t } from "../i18n.js";
import { restartButton } from "../restart.js";

export async function render(view) {
  const data = await get("/plugins");
  const note = h("p#plugin-note.muted", { role: "status" });
  const settingsBox = h("section.card#plugin-settings", { hidden: true });
  const confirmBox = h("section.card#plugin-confirm", { hidden: true });
  const market = data.market || {};
  const mayInstall = Boolean(market.allow_install && market.owner);
  const say = (text, bad = false) => {
    const el = document.getElementById("plugin-note") || note; // the page may be drawn again
    el.textContent = text;
    el.className = bad ? "err" : "muted";
  };
  const failed = (err) => say(err instanceof ApiError ? err.message : String(err), true);
  const rerender = () => render(view).catch(failed);
  const done = (out) => {
    const what = t(`plugins.done.${out.done}`);
    say(out.restart ? `${out.plugin}: ${what}. ${t("plugins.restart_needed")}: ${out.restart}` : `${out.plugin}: ${what}`, Boolean(out.restart));
  };

  const stateBadge = (state) => h("span", { class: `badge ${stateClass(state)}` }, state);
  // A plugin's homepage comes from its package or an index: untrusted, so a link only when
  // it is an http(s) URL (never javascript: or data:), else plain text.
  const homepageLink = (url) => (/^https?:\/\//i.test(url)
    ? h("a", { href: url, rel: "noopener noreferrer", target: "_blank" }, url)
    : h("span.mono", null, url));
  // What an installed plugin says of itself (PluginMeta): description, chatfn range, author,
  // homepage, under its name.
  const about = (meta) => (meta ? h("div.muted.plugin-about", null,
    [meta.description, `chatfn ${meta.chatfn || t("plugins.any")}`, meta.author ? `${t("plugins.by")} ${meta.author}` : ""]
      .filter(Boolean).join(" · "),
    meta.homepage ? [" · ", homepageLink(meta.homepage)] : null) : null);
  // Its @plugin.health while it runs (detail), one "key: value" line each.
  const health = (p) => h("div.plugin-health", null, Object.entries(p.health || {}).map(([key, value]) =>
    h("div.mono", { "data-health": key }, `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`)));
  const actions = (p) => {
    const buttons = [];
    if (!p.required) { // a built-in too, unless it is always on
      const on = p.state !== "off";
      buttons.push(h("button", {
        type: "button", "data-action": "toggle",
        onclick: async () => {
          try { done(await post(`/plugins/${enc(p.name)}/state`, { on: !on })); await keepNote(rerender); } catch (err) { failed(err); }
        },
      }, on ? t("plugins.turn_off") : t("plugins.turn_on")));
    }
    if (p.settings) {
      buttons.push(h("button", { type: "button", "data-action": "settings", onclick: () => openSettings(p.name).catch(failed) }, t("plugins.settings")));
    }
    if ((p.functions || []).length) buttons.push(chatSwitch(p));
    // A package by its distribution; a plugin file by its name (the server removes only a
    // file that is a version the index lists, and says why not otherwise).
    const removable = p.meta && p.meta.distribution ? p.meta.distribution : (!p.builtin ? p.name : null);
    if (mayInstall && removable) {
      buttons.push(h("button.danger", {
        type: "button", "data-action": "remove",
        onclick: async () => {
          if (!window.confirm(t("plugins.remove_confirm", { name: removable }))) return;
          try {
            const out = await del(`/market/${enc(removable)}`);
            say(`${out.package} ${out.version}: ${t("plugins.removed")}`);
            await keepNote(rerender);
          } catch (err) { failed(err); }
        },
      }, t("plugins.remove")));
    }
    return h("div.row", null, buttons);
  };

  const chatSwitch = (p) => {
    const input = h("input", { name: "chat", placeholder: "platform:chat_id", size: 16, "aria-label": t("plugins.chat") });
    const send = (on) => async () => {
      try {
        const out = await post(`/plugins/${enc(p.name)}/chat`, { chat: input.value.trim(), on });
        say(`${p.name}: ${out.chat} ${on ? t("plugins.on_in_chat") : t("plugins.off_in_chat")}`);
      } catch (err) { failed(err); }
    };
    return h("span.row.chat-switch", { "data-chat-switch": p.name }, input,
      h("button", { type: "button", "data-action": "chat-off", onclick: send(false) }, t("plugins.off_in_chat_button")),
      h("button", { type: "button", "data-action": "chat-on", onclick: send(true) }, t("plugins.on_in_chat_button")));
  };

  async function openSettings(name) {
    const form = await get(`/plugins/${enc(name)}/settings`);
    const props = (form.schema && form.schema.properties) || {};
    const fields = Object.entries(props).map(([key, schema]) => field(key, schema, form));
    const save = async (event) => {
      event.preventDefault();
      const values = {};
      try {
        for (const f of fields) {
          const value = f.read();
          if (value !== undefined) values[f.key] = value;
        }
        const out = await request("PUT", `/plugins/${enc(name)}/settings`, { values });
        done(out);
        await openSettings(name);
      } catch (err) { failed(err); }
    };
    replace(settingsBox,
      h("h3", null, t("plugins.settings_of", { name })),
      h("form#plugin-settings-form", { onsubmit: save, "data-plugin": name },
        fields.map((f) => h("label.field", { for: `ps-${f.key}` }, h("span", null, f.label), f.node, f.hint)),
        h("div.row", null,
          h("button", { type: "submit" }, t("plugins.save")),
          h("button", { type: "button", onclick: () => { settingsBox.hidden = true; } }, t("plugins.close")))));
    settingsBox.hidden = false;
    settingsBox.scrollIntoView({ block: "nearest" });
  }

  async function search(q) {
    let found;
    try {
      found = await get("/market", { q });
    } catch (err) {
      replace(marketResults, h("p.err", null, err.message));
      return;
    }
    replace(marketResults, table([
      { label: t("plugins.name"), value: (p) => h("span", null, h("strong", null, p.name), " ", h("span.muted", null, p.distribution || "")) },
      { label: t("plugins.summary"), value: (p) => p.summary || "" },
      { label: t("plugins.latest"), value: (p) => p.latest || "" },
      { label: t("plugins.installed"), value: (p) => p.installed || t("plugins.not_installed") },
      { label: t("plugins.tags"), value: (p) => (p.tags || []).join(", ") },
      { label: "", value: (p) => marketActions(p) },
    ], found.plugins || [], { empty: t("plugins.market_empty"), rowAttrs: (p) => ({ "data-market": p.name }) }));
  }

  const marketActions = (p) => {
    const details = h("div.details", { hidden: true },
      (p.versions || []).map((v) => h("div.mono", { "data-version": v.version },
        `${v.version}  chatfn ${v.chatfn || "any"}  ${t("plugins.permissions")}: ${(v.permissions || []).join(", ") || t("plugins.none")}`,
        (v.files || []).map((f) => h("div", null, `${f.filename || ""} sha256 ${f.sha256}`)))),
      p.homepage ? homepageLink(p.homepage) : null);
    const buttons = [h("button", { type: "button", "data-action": "details", onclick: () => { details.hidden = !details.hidden; } }, t("plugins.details"))];
    if (mayInstall && p.latest && p.installed !== p.latest) {
      const upgrade = Boolean(p.installed);
      buttons.push(h("button", {
        type: "button", "data-action": upgrade ? "upgrade" : "install",
        onclick: () => ask(p, upgrade).catch(failed),
      }, upgrade ? t("plugins.upgrade") : t("plugins.install")));
    }
    return h("div", null, h("div.row", null, buttons), details);
  };

  async function ask(p, upgrade) {
    say(t("plugins.fetching", { name: p.distribution || p.name }));
    // A plugin file (kind: file) is asked for by its name, a package by its distribution.
    const which = p.kind === "file" ? { name: p.name } : { distribution: p.distribution };
    const plan = await post("/market/plan", { ...which, version: p.latest, upgrade });
    say("");
    const answer = async (yes) => {
      try {
        const out = await post("/market/confirm", { token: plan.token, yes });
        confirmBox.hidden = true;
        if (!out.installed) { say(t("plugins.not_installed_answer")); return; }
        const restart = (out.changes || []).filter((c) => c.restart).map((c) => `${c.plugin}: ${c.restart}`);
        const text = `${out.package} ${out.version}: ${t("plugins.installed_now")}`;
        await keepNote(rerender);
        say(restart.length ? `${text}. ${t("plugins.restart_needed")}: ${restart.join("; ")}` : text, restart.length > 0);
      } catch (err) { failed(err); }
    };
    replace(confirmBox,
      h("h3", null, upgrade ? t("plugins.confirm_upgrade") : t("plugins.confirm_install")),
      h("dl.facts", null,
        h("dt", null, t("plugins.package")), h("dd#confirm-package", null, `${plan.package} ${plan.version}`),
        h("dt", null, t("plugins.permissions")), h("dd#confirm-permissions", null, (plan.permissions || []).join(", ") || t("plugins.none")),
        h("dt", null, "sha256"), h("dd#confirm-sha256.mono", null, plan.sha256)),
      h("pre#confirm-lines.mono", null, (plan.lines || []).join("\n")),
      h("div.row", null,
        h("button", { type: "button", "data-action": "confirm-yes", onclick: () => answer(true) }, t("plugins.install_yes")),
        h("button", { type: "button", "data-action": "confirm-no", onclick: () => answer(false) }, t("plugins.cancel"))));
    confirmBox.hidden = false;
    confirmBox.scrollIntoView({ block: "nearest" });
  }

  const plugins = table([
    { label: t("plugins.name"), value: (p) => [h("span", null, p.name, p.builtin ? h("span.badge", null, t("plugins.builtin")) : null), about(p.meta)] },
    { label: t("plugins.version"), value: (p) => (p.meta && p.meta.version) || "" },
    { label: t("plugins.state"), value: (p) => stateBadge(p.state) },
    { label: t("plugins.status"), value: (p) => [p.status || "", p.restart ? h("div.warn", null, `${t("plugins.restart_needed")}: ${p.restart}`) : null] },
    { label: t("plugins.permissions"), value: (p) => ((p.meta && p.meta.permissions) || []).join(", ") },
    { label: t("plugins.functions"), value: (p) => h("span.mono", null, (p.functions || []).join(", ")) },
    { label: t("plugins.health"), value: health },
    { label: "", value: actions },
  ], data.plugins || [], { empty: t("common.none"), rowAttrs: (p) => ({ "data-plugin": p.name }) });
  const notLoaded = table([
    { label: t("plugins.name"), value: (s) => s.name },
    { label: t("plugins.why"), value: (s) => s.why },
  ], data.not_loaded || [], { empty: t("common.none") });
  // Each plugin's list of its health answer (a `HealthList` of its console view, from the
  // session: the MCP servers) as a table: name, state, its own columns, detail.
  const list = (value) => (Array.isArray(value) ? value.join(", ") : value === undefined || value === null ? "" : String(value));
  const lists = ((currentSession() || {}).panels || []).filter((p) => /^[a-z][a-z0-9_-]*$/.test(p.view) && Array.isArray(data[p.key])).map((p) =>
    h(`section.card#${p.view}-list`, null, h("h3", null, t(p.title)), table([
      { label: t("plugins.name"), value: (s) => s.name },
      { label: t("plugins.state"), value: (s) => stateBadge(s.state) },
      ...(p.columns || []).map(([key, label]) => ({ label: t(label), value: (s) => h("span.mono", null, list(s[key])) })),
      { label: t("plugins.detail"), value: (s) => s.detail || "" },
    ], data[p.key], { empty: t("common.none"), rowAttrs: (s) => ({ [`data-${p.view}`]: s.name }) })));

  const q = h("input#market-q", { type: "search", name: "q", placeholder: t("plugins.search_placeholder"), "aria-label": t("plugins.search") });
  const marketResults = h("div#market-results");
  const marketNote = mayInstall ? null : h("p.muted#market-rights", null,
    market.allow_install ? t("plugins.owners_only") : t("plugins.install_off"));
  const waiting = (data.plugins || []).some((p) => p.restart);
  replace(view,
    h("h2", null, t("nav.plugins")),
    waiting && market.owner ? h("p.warn#plugins-restart", null, t("plugins.restart_needed"), " ", restartButton()) : null,
    note,
    h("section.card#plugin-list", null, h("h3", null, t("plugins.plugins")), plugins),
    settingsBox,
    h("section.card#market", null,
      h("h3", null, t("plugins.market")),
      h("p.muted", null, `${t("plugins.index")}: `, h("span.mono", null, market.index_url || "")),
      marketNote,
      h("form.row#market-search", { onsubmit: (e) => { e.preventDefault(); search(q.value.trim()); } },
        q, h("button", { type: "submit" }, t("plugins.search"))),
      marketResults),
    confirmBox,
    (data.not_loaded || []).length ? h("section.card#not-loaded", null, h("h3", null, t("plugins.not_loaded")), notLoaded) : null,
    lists,
  );
  await search("");
}

/** Re-render without losing the message just shown. */
async function keepNote(rerender) {
  const note = document.getElementById("plugin-note");
  const text = note ? note.textContent : "";
  const cls = note ? note.className : "";
  await rerender();
  const fresh = document.getElementById("plugin-note");
  if (fresh) { fresh.textContent = text; fresh.className = cls; }
}

/** One form field from the settings model's JSON Schema; secrets are write-only. */
function field(key, schema, form) {
  const id = `ps-${key}`;
  const label = schema.title || key;
  const value = form.values[key];
  const fromEnv = (form.from_env || []).includes(key);
  const type = schema.type || ((schema.anyOf || []).map((s) => s.type).find((x) => x && x !== "null"));
  const hint = fromEnv ? h("small.muted", null, t("plugins.from_env")) : null;
  if ((form.secret || []).includes(key)) {
    const input = h("input", { id, name: key, type: "password", autocomplete: "new-password", placeholder: value && value.set ? t("plugins.secret_set") : t("plugins.secret_unset"), disabled: fromEnv });
    return { key, label, hint, node: input, read: () => (input.value ? input.value : undefined) };
  }
  if (type === "boolean") {
    const input = h("input", { id, name: key, type: "checkbox", checked: Boolean(value), disabled: fromEnv });
    return { key, label, hint, node: input, read: () => (fromEnv ? undefined : input.checked) };
  }
  if (type === "integer" || type === "number") {
    const input = h("input", { id, name: key, type: "number", step: type === "integer" ? "1" : "any", value: value ?? "", disabled: fromEnv });
    const read = () => {
      if (fromEnv) return undefined;
      if (input.value === "") return null;
      return Number(input.value);
    };
    return { key, label, hint, node: input, read };
  }
  if (type === "string") {
    const input = h("input", { id, name: key, value: value ?? "", disabled: fromEnv });
    return { key, label, hint, node: input, read: () => (fromEnv ? undefined : input.value) };
  }
  const input = h("textarea.mono", { id, name: key, rows: 3, disabled: fromEnv }, JSON.stringify(value ?? null, null, 1));
  return { key, label, hint: hint || h("small.muted", null, "JSON"), node: input, read: () => (fromEnv ? undefined : JSON.parse(input.value || "null")) };
}

const enc = encodeURIComponent;

/** A plugin's or server's state as a colour: working, off on purpose, failed, or in between
 * (a missing key, connecting, degraded: it says why in its status line). */
function stateClass(state) {
  if (["ok", "on", "connected"].includes(state)) return "ok";
  if (["off", "stopped"].includes(state)) return "";
  if (state === "failed") return "err";
  return "warn";
}
