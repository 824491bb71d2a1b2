// The console's words in zh and en (static/i18n/<lang>.json). The first language is the
// session's (`bot.language`); a choice made on the page is remembered in localStorage.

export const LANGUAGES = ["en", "zh"];
const STORE_KEY = "chatfn-admin-language";

let words = {};
let current = "en";
// Words the plugins' pages bring (the session's `pages[].texts`), per language.
const added = {};

/** The language to show: the page's remembered choice, else the given default, else en. */
export function preferredLanguage(fallback) {
  const saved = localStorage.getItem(STORE_KEY);
  if (LANGUAGES.includes(saved)) return saved;
  return LANGUAGES.includes(fallback) ? fallback : "en";
}

/** Loads a language's catalogue; `remember` keeps the choice for the next visit. */
export async function setLanguage(lang, { remember = false } = {}) {
  const response = await fetch(`/admin/static/i18n/${lang}.json`);
  words = { ...(added[lang] || {}), ...(await response.json()) };
  current = lang;
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  if (remember) localStorage.setItem(STORE_KEY, lang);
}

export function language() {
  return current;
}

// Keys a page asked for that no catalogue holds (shown as the key itself): the browser tests
// read `window.chatfnMissingWords` on every page, in each language, and fail on any.
const missing = new Set();
window.chatfnMissingWords = missing;

/** The text for `key`, with {name} placeholders filled; the key itself when missing. */
export function t(key, vars) {
  if (!(key in words)) missing.add(`${current}:${key}`);
  const text = words[key] ?? key;
  if (!vars) return text;
  return text.replace(/\{(\w+)\}/g, (_, name) => (name in vars ? String(vars[name]) : `{${name}}`));
}

/** Adds a plugin page's words (`{en: {...}, zh: {...}}`); the console's own keep theirs. */
export function addWords(texts) {
  for (const [lang, more] of Object.entries(texts || {})) {
    added[lang] = { ...(added[lang] || {}), ...more };
    if (lang === current) words = { ...more, ...words };
  }
}
