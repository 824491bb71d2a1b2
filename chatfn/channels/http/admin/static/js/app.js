// The console's shell: session, language, navigation and a tiny router over /admin/<page>
// paths (the server answers every such GET with this same index.html). Each page is a module
// in ./pages/ with `render(view, ctx)`; it may return a function that stops what it started
// (the log tail's EventSource) when the page is left.
import { currentSession, loadSession, logout } from "./api.js";
import { h, replace } from "./dom.js";
import { LANGUAGES, addWords, language, preferredLanguage, setLanguage, t } from "./i18n.js";

const PAGES = [
  { name: "overview", pattern: /^(?:overview)?$/, load: () => import("./pages/overview.js") },
  { name: "chats", pattern: /^chats$/, load: () => import("./pages/chats.js") },
  {
    name: "chats",
    pattern: /^chats\/([^/]+)\/([^/]+)$/,
    keys: ["platform", "chatId"],
    load: () => import("./pages/chat.js"),
  },
  {
    name: "chats",
    pattern: /^turns\/([^/]+)\/([^/]+)\/([^/]+)$/,
    keys: ["platform", "chatId", "messageId"],
    load: () => import("./pages/turn.js"),
  },
  { name: "usage", pattern: /^usage$/, load: () => import("./pages/usage.js") },
  { name: "delivery", pattern: /^delivery$/, load: () => import("./pages/delivery.js") },
  { name: "plugins", pattern: /^plugins$/, load: () => import("./pages/plugins.js") },
  { name: "models", pattern: /^models$/, load: () => import("./pages/models.js") },
  { name: "channels", pattern: /^channels$/, load: () => import("./pages/channels.js") },
  { name: "logs", pattern: /^logs$/, load: () => import("./pages/logs.js") },
  { name: "check", pattern: /^check$/, load: () => import("./pages/check.js") },
  { name: "audit", pattern: /^audit$/, load: () => import("./pages/audit.js") },
];
const NAV = ["overview", "chats", "usage", "delivery", "models", "channels", "plugins", "logs", "check", "audit"];

/** The plugins' pages (their console views, from the session): each a module the server
 * serves under /admin/api/pages/, in the navigation after "usage". */
function addPluginPages(pages) {
  const at = NAV.indexOf("usage") + 1;
  (pages || []).forEach((page, i) => {
    if (!/^[a-z][a-z0-9_-]*$/.test(page.name) || NAV.includes(page.name)) return;
    addWords(page.texts);
    PAGES.push({ name: page.name, pattern: new RegExp(`^${page.name}$`), load: () => import(page.module) });
    NAV.splice(at + i, 0, page.name);
  });
}

let stopPage = null;
let renderSeq = 0;

/** Finds the page for a path under /admin/ and its decoded parameters. */
function route(pathname) {
  const rest = pathname.replace(/^\/admin\/?/, "").replace(/\/$/, "");
  for (const page of PAGES) {
    const match = page.pattern.exec(rest);
    if (!match) continue;
    const params = {};
    (page.keys || []).forEach((key, i) => {
      params[key] = decodeURIComponent(match[i + 1]);
    });
    return { page, params };
  }
  return null;
}

/** Goes to an /admin/ URL without reloading the page. */
export function navigate(url, { replaceState = false } = {}) {
  if (replaceState) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render();
}

function header(active) {
  const session = currentSession();
  const nav = h(
    "nav#nav",
    null,
    NAV.map((name) =>
      h("a", { href: name === "overview" ? "/admin/" : `/admin/${name}`, class: name === active ? "active" : null,
        "data-page": name }, t(`nav.${name}`)),
    ),
  );
  const languageSelect = h(
    "select#language",
    {
      "aria-label": t("shell.language"),
      onchange: async (event) => {
        await setLanguage(event.target.value, { remember: true });
        render();
      },
    },
    LANGUAGES.map((lang) => h("option", { value: lang, selected: lang === language() }, t(`lang.${lang}`))),
  );
  const menu = h("button#menu.icon", {
    type: "button",
    "aria-label": t("shell.menu"),
    "aria-expanded": "false",
    onclick: () => {
      const open = document.body.classList.toggle("nav-open");
      menu.setAttribute("aria-expanded", String(open));
    },
  }, "☰");
  return h(
    "header#top",
    null,
    h("div.bar", null,
      menu,
      h("a.brand", { href: "/admin/" }, "chatfn ", h("span.dim", null, t("shell.admin"))),
      h("span.spacer"),
      languageSelect,
      h("span#whoami.dim", null, session.user, session.scoped ? ` (${t("shell.scoped")})` : ""),
      h("button#logout", { type: "button", onclick: () => logout() }, t("shell.logout")),
    ),
    nav,
  );
}

/** Draws the shell and the current page. */
async function render() {
  const seq = ++renderSeq;
  if (stopPage) {
    stopPage();
    stopPage = null;
  }
  document.body.classList.remove("nav-open");
  const found = route(location.pathname);
  const view = h("main#view", { "data-page": found ? found.page.name : "none" });
  replace(document.getElementById("app"), header(found && found.page.name), view);
  if (!found) {
    view.append(h("section.card.error", null, t("error.not_found")));
    return;
  }
  document.title = `${t(`nav.${found.page.name}`)} · chatfn`;
  view.append(h("p.loading.dim", null, t("common.loading")));
  try {
    const module = await found.page.load();
    const search = new URLSearchParams(location.search);
    const stop = await module.render(view, { params: found.params, search, navigate, session: currentSession() });
    if (seq !== renderSeq) {
      if (typeof stop === "function") stop();
      return;
    }
    stopPage = typeof stop === "function" ? stop : null;
    view.dataset.ready = "1";
  } catch (error) {
    if (seq !== renderSeq) return;
    replace(view, errorCard(error));
  }
}

/** A page's failure as a card: 403 says "not yours", anything else the server's message. */
export function errorCard(error) {
  const text = error && error.status === 403 ? t("error.forbidden")
    : error && error.status === 404 ? t("error.not_found")
    : `${t("error.failed")}: ${error && error.message ? error.message : error}`;
  return h("section.card.error", { role: "alert" }, text);
}

// Links inside the app change the page without a reload (downloads and the API are real loads).
document.addEventListener("click", (event) => {
  const link = event.target.closest("a[href]");
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || link.target || link.hasAttribute("download")) return;
  const url = new URL(link.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/admin/")) return;
  if (url.pathname.startsWith("/admin/api/") || url.pathname.startsWith("/admin/static/")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", () => render());

async function start() {
  const session = await loadSession();
  addPluginPages(session.pages);
  (session.panels || []).forEach((panel) => addWords(panel.texts)); // the plugins' health lists
  await setLanguage(preferredLanguage(session.language));
  await render();
}

start().catch((error) => {
  replace(document.getElementById("app"), errorCard(error));
});
