// The Restart button (POST /admin/api/restart, owners): for a change that takes effect only at
// start (a channel's settings, a plugin that cannot reload). The bot stops as on SIGTERM and
// runs again in place; the page waits until the console answers again, then reloads.
import { get, post } from "./api.js";
import { h, replace } from "./dom.js";
import { t } from "./i18n.js";

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/** Until the console answers after having stopped answering (or 120 s). */
async function backAgain() {
  let down = false;
  for (let i = 0; i < 240; i += 1) {
    await sleep(500);
    try {
      await get("/session");
      if (down || i > 20) return true;
    } catch {
      down = true;
    }
  }
  return false;
}

export function restartButton() {
  const status = h("span.restart-status.muted", { role: "status" });
  const button = h("button.restart", { type: "button" }, t("restart.button"));
  button.addEventListener("click", async () => {
    if (!window.confirm(t("restart.confirm"))) return;
    button.disabled = true;
    replace(status, t("restart.waiting"));
    try {
      await post("/restart");
    } catch (err) {
      button.disabled = false;
      replace(status, h("span.error", null, `${t("error.failed")}: ${err.message}`));
      return;
    }
    if (await backAgain()) window.location.reload();
    else replace(status, h("span.error", null, t("restart.not_back")));
  });
  return h("span.restart-box", null, button, " ", status);
}
