// The first run's page: its words in the remembered language (or the browser's), and the
// error line when the server sent us back with ?error=short|differ|name. No script is needed
// to submit the form.
import { preferredLanguage, setLanguage, t } from "./i18n.js";

const ERRORS = { short: "setup.error_short", differ: "setup.error_differ", name: "setup.error_name" };

async function translate(lang, remember) {
  await setLanguage(lang, { remember });
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  document.title = `chatfn · ${t("setup.submit")}`;
}

const error = ERRORS[new URLSearchParams(location.search).get("error")];
if (error) {
  const line = document.getElementById("error");
  line.dataset.i18n = error;
  line.hidden = false;
}
const browser = (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
translate(preferredLanguage(browser), false);
for (const button of document.querySelectorAll("[data-lang]")) {
  button.addEventListener("click", () => translate(button.dataset.lang, true));
}
