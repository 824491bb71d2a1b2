// Channels: every installed channel (GET /admin/api/channels) with its state, its set-up form
// generated from its settings model (secrets write-only: set / not set; a ${VAR} value comes
// from the environment and is not editable here), its README (the platform's set-up steps) and
// a test running its online probe with the settings saved. An owner's change is written to
// config.yaml and takes effect when the bot restarts (an owner's Restart button, restart.js).
import { get, post, request } from "../api.js";
import { h, replace } from "../dom.js";
import { t } from "../i18n.js";
import { restartButton } from "../restart.js";

const enc = encodeURIComponent;

/** A README's Markdown as DOM nodes (headings, lists, code blocks, paragraphs; inline code as
 * <code>): text only, never HTML. */
export function markdown(text) {
  const out = [];
  const lines = (text || "").split("\n");
  let para = [];
  let list = null;
  const inline = (line) => line.split(/(`[^`]+`)/).map((part) =>
    part.startsWith("`") && part.endsWith("`") && part.length > 1 ? h("code", null, part.slice(1, -1)) : part);
  const flush = () => {
    if (para.length) out.push(h("p", null, inline(para.join(" "))));
    para = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      const code = [];
      for (i += 1; i < lines.length && !lines[i].startsWith("```"); i += 1) code.push(lines[i]);
      out.push(h("pre.mono", null, code.join("\n")));
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    const item = /^\s*(?:[-*]|\d+\.)\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      out.push(h(`h${Math.min(heading[1].length + 2, 6)}`, null, inline(heading[2])));
    } else if (item) {
      if (para.length) flush();
      if (!list) {
        list = h("ul");
        out.push(list);
      }
      list.append(h("li", null, inline(item[1])));
    } else if (!line.trim()) {
      flush();
    } else if (list && /^\s+/.test(line)) {
      list.lastChild.append(" ", ...inline(line.trim()));
    } else {
      list = null;
      para.push(line.trim());
    }
  }
  flush();
  return out;
}

function input(f, owner, channel) {
  const fixed = !owner || f.from_env || f.from_command_line;
  const id = `channel-${channel}-${f.name}`;
  if (f.kind === "boolean") return h(`input#${id}`, { type: "checkbox", checked: f.value || null, disabled: fixed || null });
  if (f.kind === "choice") {
    return h(`select#${id}`, { disabled: fixed || null },
      f.choices.map((c) => h("option", { value: String(c), selected: c === f.value || null }, String(c))));
  }
  if (f.kind === "secret") {
    return h(`input#${id}`, { type: "password", autocomplete: "off", disabled: fixed || null,
      placeholder: f.value === "set" ? t("models.key_set") : t("models.key_not_set") });
  }
  const value = f.kind === "json" ? (f.value === null ? "" : JSON.stringify(f.value)) : (f.value ?? "");
  const type = f.kind === "integer" || f.kind === "number" ? "number" : "text";
  return h(`input#${id}`, { type, step: f.kind === "number" ? "any" : null, value, disabled: fixed || null });
}

function read(f, el) {
  if (f.kind === "boolean") return el.checked;
  if (f.kind === "secret") return el.value === "" ? undefined : el.value;
  if (f.kind === "integer" || f.kind === "number") return el.value === "" ? null : Number(el.value);
  if (f.kind === "json") return el.value.trim() === "" ? null : JSON.parse(el.value);
  if (f.kind === "choice") {
    const hit = f.choices.find((c) => String(c) === el.value);
    return hit === undefined ? el.value : hit;
  }
  return el.value;
}

/** A channel's login (a QR code to scan): started in the background by the API, its QR code
 * (SVG, shown as an image) and status polled until confirmed, expired or failed (issue 42). */
async function startLogin(name, button, out) {
  button.disabled = true;
  const url = `/channels/${enc(name)}/login`;
  const status = h("p.dim.login-status");
  const draw = (r) => replace(status, r.status === "failed" || r.status === "expired"
    ? h("span.error", null, `${t(`channels.login_${r.status}`)} ${r.reason || ""}`)
    : t(`channels.login_${r.status}`));
  try {
    let r = await post(url);
    const img = h("img.login-qr", { alt: "QR", width: 240, src: `data:image/svg+xml;charset=utf-8,${enc(r.svg)}` });
    replace(out, h("div.channel-login-box", null, img, h("p.mono", null, r.link), status));
    draw(r);
    while (r.status === "wait" || r.status === "scanned") {
      await new Promise((done) => setTimeout(done, 1500));
      r = await get(url);
      if (r.svg) img.src = `data:image/svg+xml;charset=utf-8,${enc(r.svg)}`;
      draw(r);
    }
  } catch (err) {
    replace(out, h("p.error", null, `${t("error.failed")}: ${err.message}`));
  } finally {
    button.disabled = false;
  }
}

function card(c, owner, redraw) {
  const state = c.running
    ? h("span", { class: `badge ${c.running.connected === false ? "err" : "ok"}` },
      c.running.connected === false ? t("channels.down") : t("channels.running"))
    : h("span.badge", null, c.configured ? t("channels.configured") : t("channels.not_configured"));
  const inputs = c.fields.map((f) => [f, input(f, owner, c.name)]);
  const message = h("p.channel-message", { "data-channel": c.name });
  const lines = h("div.channel-test-result", { "data-channel": c.name });
  const save = h("button.primary.channel-save", { type: "submit", hidden: !owner || null }, t("channels.save"));
  const test = h("button.channel-test", { type: "button", "data-channel": c.name, hidden: !owner || !c.can_test || null },
    t("channels.test"));
  test.addEventListener("click", async () => {
    test.disabled = true;
    replace(lines, h("p.dim", null, t("channels.testing")));
    try {
      const r = await post(`/channels/${enc(c.name)}/test`);
      lines.dataset.ok = r.ok ? "1" : "0";
      replace(lines, r.lines.map((line) => h("div.check-line", { "data-status": line.status },
        h("span", { class: `badge ${line.status === "ok" ? "ok" : line.status === "warn" ? "warn" : "err"}` },
          line.status === "ok" ? "✓" : line.status === "warn" ? "!" : "✗"), " ", h("span.mono", null, line.text))));
    } catch (err) {
      replace(lines, h("p.error", null, `${t("error.failed")}: ${err.message}`));
    } finally {
      test.disabled = false;
    }
  });
  const login = h("button.channel-login", { type: "button", "data-channel": c.name, hidden: !owner || !c.can_login || null },
    t("channels.login"));
  login.addEventListener("click", () => startLogin(c.name, login, lines));
  const form = h("form.settings.channel-form", { "data-channel": c.name },
    inputs.map(([f, el]) => h("label.field", null,
      h("span", null, f.name, f.kind === "secret" ? ` (${t("channels.write_only")})` : ""), el,
      f.from_env ? h("small.dim", null, t("models.from_env")) : null,
      f.from_command_line ? h("small.dim", null, t("channels.from_command_line", { flag: f.from_command_line })) : null,
      f.description ? h("small.dim", null, f.description) : null)),
    h("div.toolbar", null, save, test, login), message, lines);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {};
    try {
      for (const [f, el] of inputs) {
        if (f.from_env || f.from_command_line) continue;
        const value = read(f, el);
        if (value === undefined) continue;
        const before = f.kind === "json" ? JSON.stringify(f.value) : f.value;
        const now = f.kind === "json" ? JSON.stringify(value) : value;
        if (f.kind === "secret" || now !== before) body[f.name] = value;
      }
      if (!Object.keys(body).length) {
        replace(message, t("chat.nothing_changed"));
        return;
      }
      const r = await request("PUT", `/channels/${enc(c.name)}`, body);
      await redraw();
      const again = document.querySelector(`.channel-message[data-channel="${c.name}"]`);
      if (again) replace(again, r.applied === "restart" ? t("channels.saved_restart") : t("channels.saved"));
    } catch (err) {
      replace(message, h("span.error", null, `${t("error.failed")}: ${err.message}`));
    }
  });
  const readme = c.readme ? h("details.readme", null, h("summary", null, t("channels.readme")), markdown(c.readme)) : null;
  return h("section.card.channel", { "data-channel": c.name },
    h("h3", null, c.name, " ", state, c.in_run ? h("span.badge", null, ` ${t("channels.in_run")}`) : null),
    c.summary ? h("p.dim", null, c.summary) : null,
    c.running && c.running.detail ? h("p.error", null, c.running.detail) : null,
    readme, form);
}

export async function render(view, ctx) {
  const owner = Boolean(ctx.session && ctx.session.owner);
  const draw = async () => {
    const listing = await get("/channels");
    replace(view,
      h("h2", null, t("nav.channels")),
      h("section.card", null, h("p.dim", null, t("channels.help", { file: listing.file })),
        owner ? null : h("p.dim", null, t("channels.owner_only")),
        listing.restart_needed ? h("p.warn#channels-restart", null, t("channels.restart_needed"),
          owner ? [" ", restartButton()] : null) : null),
      listing.channels.map((c) => card(c, owner, draw)),
      listing.broken.map((b) => h("section.card.error", null, `${b.name}: ${b.error}`)));
    view.dataset.ready = "1";
  };
  await draw();
}
