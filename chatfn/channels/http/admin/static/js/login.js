// The sign-in page's words in the remembered language (or the browser's), and the error line
// when the server sent us back with ?error=1 (or ?error=rate). The form itself needs no script.
import { preferredLanguage, setLanguage, t } from "./i18n.js";

async function translate(lang, remember) {
  await setLanguage(lang, { remember });
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  document.title = `chatfn · ${t("login.submit")}`;
}

const browser = (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
translate(preferredLanguage(browser), false);
for (const button of document.querySelectorAll("[data-lang]")) {
  button.addEventListener("click", () => translate(button.dataset.lang, true));
}
const error = new URLSearchParams(location.search).get("error");
if (error) {
  const line = document.getElementById("error");
  if (error === "rate") line.dataset.i18n = "login.error_rate";
  line.hidden = false;
}
