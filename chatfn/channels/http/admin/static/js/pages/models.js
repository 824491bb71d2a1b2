// Models: the `models:` of config.yaml (GET /admin/api/models). An owner adds, edits and removes
// a model, chooses the default and tests one (one real round trip: its answer or its
// provider's error in one line). Keys are write-only: shown as set / not set; a value written
// as ${VAR} comes from the environment and is not editable here. Each change is written to
// config.yaml and in use at once.
import { get, post, request } from "../api.js";
import { h, replace } from "../dom.js";
import { t } from "../i18n.js";

const enc = encodeURIComponent;

function field(label, input, note) {
  return h("label.field", null, h("span", null, label), input, note ? h("small.dim", null, note) : null);
}

function form(data, listing, done) {
  const row = data || {};
  const env = new Set(row.from_env || []);
  const fixed = (key) => env.has(key) || env.has("*");
  const note = (key) => (fixed(key) ? t("models.from_env") : null);
  const input = (id, value, attrs = {}) =>
    h(`input#model-${id}`, { value: value ?? "", disabled: fixed(id) || null, ...attrs });
  const name = input("name", row.name, { disabled: data ? true : null, required: true });
  const provider = h("select#model-provider", { disabled: fixed("provider") || null },
    listing.providers.map((p) => h("option", { value: p, selected: p === (row.provider || "openai") }, p)));
  const baseUrl = input("base_url", row.base_url, { placeholder: "https://api.openai.com/v1" });
  const model = input("model", row.model, { placeholder: "gpt-4o-mini" });
  const key = input("api_key", "", { type: "password", autocomplete: "off",
    placeholder: row.api_key === "set" ? t("models.key_set") : t("models.key_not_set") });
  const price = row.price || {};
  const input_price = input("price_input", price.input, { type: "number", step: "any", min: "0" });
  const output_price = input("price_output", price.output, { type: "number", step: "any", min: "0" });
  const fallback = input("fallback", (row.fallback || []).join(", "));
  const vision = h("input#model-vision", { type: "checkbox", checked: row.vision || null });
  const streaming = h("input#model-streaming", { type: "checkbox", checked: row.streaming || null });
  const error = h("p.error#model-error", { hidden: true });
  const save = h("button.primary#model-save", { type: "submit" }, t("models.save"));
  const el = h("form.card.settings#model-form", null,
    h("h3", null, data ? t("models.edit", { name: row.name }) : t("models.add")),
    field(t("models.name"), name),
    field(t("models.provider"), provider, note("provider")),
    field(t("models.base_url"), baseUrl, note("base_url")),
    field(t("models.model"), model, note("model")),
    field(t("models.api_key"), key, note("api_key") || t("models.key_help")),
    field(t("models.price_input"), input_price),
    field(t("models.price_output"), output_price),
    field(t("models.fallback"), fallback, t("models.fallback_help")),
    h("label", null, vision, " ", t("models.vision")),
    h("label", null, streaming, " ", t("models.streaming")),
    error,
    h("div.toolbar", null, save,
      h("button", { type: "button", onclick: () => done(false) }, t("models.cancel"))),
  );
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { provider: provider.value, base_url: baseUrl.value.trim(), model: model.value.trim(),
      vision: vision.checked, streaming: streaming.checked,
      fallback: fallback.value.split(",").map((s) => s.trim()).filter(Boolean) };
    for (const key of Object.keys(body)) if (fixed(key)) delete body[key];
    if (key.value) body.api_key = key.value;
    if (input_price.value !== "" || output_price.value !== "") {
      body.price = { input: Number(input_price.value || 0), output: Number(output_price.value || 0) };
    } else if (row.price) body.price = null;
    save.disabled = true;
    try {
      await request("PUT", `/models/${enc(name.value.trim())}`, body);
      done(true);
    } catch (err) {
      error.hidden = false;
      replace(error, `${t("error.failed")}: ${err.message}`);
      save.disabled = false;
    }
  });
  return el;
}

export async function render(view, ctx) {
  const owner = Boolean(ctx.session && ctx.session.owner);
  const draw = async () => {
    const listing = await get("/models");
    const editor = h("div#model-editor");
    const close = (changed) => (changed ? draw() : replace(editor));
    const rows = listing.models.map((m) => {
      const result = h("span.mono.model-test-result", { "data-model": m.name });
      const test = h("button.model-test", { type: "button", "data-model": m.name, hidden: !owner || null },
        t("models.test"));
      test.addEventListener("click", async () => {
        test.disabled = true;
        replace(result, t("models.testing"));
        try {
          const r = await post(`/models/${enc(m.name)}/test`);
          result.dataset.ok = r.ok ? "1" : "0";
          replace(result, h("span", { class: `badge ${r.ok ? "ok" : "err"}` }, r.ok ? "✓" : "✗"), " ", r.line);
        } catch (err) {
          replace(result, `${t("error.failed")}: ${err.message}`);
        } finally {
          test.disabled = false;
        }
      });
      const edit = h("button.model-edit", { type: "button", hidden: !owner || null,
        onclick: () => replace(editor, form(m, listing, close)) }, t("models.edit_button"));
      const remove = h("button.model-remove", { type: "button", hidden: !owner || null, onclick: async () => {
        if (!window.confirm(t("models.remove_confirm", { name: m.name }))) return;
        try {
          await request("DELETE", `/models/${enc(m.name)}`);
          draw();
        } catch (err) {
          replace(result, `${t("error.failed")}: ${err.message}`);
        }
      } }, t("models.remove"));
      return h("tr", { "data-model": m.name },
        h("td", null, m.name, m.name === listing.default ? h("span.badge.ok", null, ` ${t("models.default")}`) : null),
        h("td", null, m.provider), h("td.mono", null, m.model), h("td.mono", null, m.base_url || "—"),
        h("td", null, m.api_key === "set" ? t("models.key_set") : t("models.key_not_set"),
          m.from_env.includes("api_key") ? ` (${t("models.from_env")})` : ""),
        h("td", null, m.price ? `${m.price.input} / ${m.price.output}` : "—"),
        h("td", null, test, " ", edit, " ", remove, " ", result));
    });
    const choose = h("select#model-default", { disabled: !owner || listing.default_from_env || null },
      listing.models.map((m) => h("option", { value: m.name, selected: m.name === listing.default }, m.name)));
    choose.addEventListener("change", async () => {
      await request("PUT", "/models/default", { name: choose.value });
      draw();
    });
    const add = h("button.primary#model-add", { type: "button", hidden: !owner || null,
      onclick: () => replace(editor, form(null, listing, close)) }, t("models.add"));
    replace(view,
      h("h2", null, t("nav.models")),
      h("section.card", null,
        h("p.dim", null, t("models.help", { file: listing.file })),
        owner ? null : h("p.dim", null, t("models.owner_only")),
        h("div.toolbar", null, h("label", null, t("models.default_model"), " ", choose), add),
        h("table", null,
          h("thead", null, h("tr", null, ["models.name", "models.provider", "models.model", "models.base_url",
            "models.api_key", "models.price", "models.actions"].map((k) => h("th", null, t(k))))),
          h("tbody", null, rows.length ? rows : h("tr", null, h("td", { colspan: 7 }, t("models.none")))))),
      editor);
    view.dataset.ready = "1";
  };
  await draw();
}
