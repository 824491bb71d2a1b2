// Building the page from elements, never from HTML strings: every piece of data (chat names, messages, tool
// arguments) is untrusted, so it only ever becomes a text node or an attribute value.

/**
 * h("div#id.card.wide", {title: "x", onclick: fn}, child, "text", [more]) -> Element.
 * Strings and numbers become text nodes; null/undefined/false children are skipped;
 * arrays are flattened. Attribute names starting with "on" take a listener.
 */
export function h(spec, attrs, ...children) {
  const parts = spec.match(/[.#]?[^.#]+/g) || [];
  const el = document.createElement(parts[0] && !/^[.#]/.test(parts[0]) ? parts.shift() : "div");
  const classes = [];
  for (const part of parts) {
    if (part[0] === "#") el.id = part.slice(1);
    else classes.push(part.slice(1));
  }
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = [el.className, value].filter(Boolean).join(" ");
    } else if (name === "value" || name === "checked" || name === "selected") {
      el[name] = value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (text for strings/numbers, nodes as they are, arrays flattened). */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces all of an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/**
 * A table: columns are [{label, value: row => text|Node, class?}], rows plain objects.
 * An empty list shows `empty` in one cell instead of a bare header.
 */
export function table(columns, rows, { empty = "—", rowAttrs } = {}) {
  const head = h("tr", null, columns.map((c) => h("th", { class: c.class }, c.label)));
  const body = rows.length
    ? rows.map((row) =>
        h("tr", rowAttrs ? rowAttrs(row) : null,
          columns.map((c) => h("td", { class: c.class, "data-label": c.label }, c.value(row)))))
    : [h("tr", null, h("td.empty", { colspan: columns.length }, empty))];
  return h("div.table-wrap", null, h("table.stack", null, h("thead", null, head), h("tbody", null, body)));
}

/** The page's language (i18n.js sets <html lang>) for numbers and dates. */
function locale() {
  return document.documentElement.lang || undefined;
}

/** A number with thousands separators; "—" for null. */
export function num(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  return Number(value).toLocaleString(locale(), {
    maximumFractionDigits: digits,
    minimumFractionDigits: 0,
  });
}

/** A cost in currency units: more digits for small sums, "—" when unknown. */
export function money(value) {
  if (value === null || value === undefined) return "—";
  return Number(value).toLocaleString(locale(), {
    minimumFractionDigits: value < 1 ? 4 : 2,
    maximumFractionDigits: value < 1 ? 4 : 2,
  });
}

/** A ratio 0..1 as a percentage. */
export function pct(value) {
  if (value === null || value === undefined) return "—";
  return `${(value * 100).toFixed(1)} %`;
}

/** Milliseconds as "850 ms", "2.4 s" or "3.5 min". */
export function ms(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60000) return `${(value / 1000).toFixed(1)} s`;
  return `${(value / 60000).toFixed(1)} min`;
}

/** A timestamp (ISO string or epoch seconds) in the browser's local time. */
export function when(value) {
  if (value === null || value === undefined || value === "") return "—";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toLocaleString(locale(), {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

/** Pretty JSON for tool arguments and results (shown as text, never parsed as HTML). */
export function json(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

/** An age in seconds as "45 s", "12 min", "3 h", "2 d". */
export function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}
