// Config check: what check_system.py reports, run on the server (POST /admin/api/check;
// "online" adds the channels' and models' live probes).
import { post } from "../api.js";
import { h, ms, replace, when } from "../dom.js";
import { t } from "../i18n.js";

const MARK = { ok: "✓", warn: "!", fail: "✗" };

export async function render(view) {
  const result = h("section.card#check-result", { hidden: true });
  const online = h("input#check-online", { type: "checkbox" });
  const run = h("button.primary#run-check", { type: "button" }, t("check.run"));
  run.addEventListener("click", async () => {
    run.disabled = true;
    result.hidden = false;
    replace(result, h("p.dim", null, t("check.running")));
    try {
      const report = await post("/check", { online: online.checked });
      replace(result,
        h("h3", null, h("span", { class: `badge ${report.ok ? "ok" : "err"}`, id: "check-verdict" },
          report.ok ? t("check.passed") : t("check.failed")), " ",
          h("span.dim", null, `${when(report.ran_at)} · ${ms(report.duration_ms)}`)),
        (report.lines || []).map((line) => h("div.check-line", { "data-status": line.status },
          h("span", { class: `badge ${line.status === "ok" ? "ok" : line.status === "warn" ? "warn" : "err"}` }, MARK[line.status] || line.status),
          h("span.mono", null, line.text))));
    } catch (error) {
      replace(result, h("p.error", null, `${t("error.failed")}: ${error.status === 403 ? t("error.forbidden") : error.message}`));
    } finally {
      run.disabled = false;
    }
  });
  replace(view,
    h("h2", null, t("nav.check")),
    h("section.card", null, h("p.dim", null, t("check.help")),
      h("div.toolbar", null, run, h("label", null, online, " ", t("check.online")))),
    result,
  );
}
