// Logs: a live tail over Server-Sent Events (GET /admin/api/logs?chat=&level=). The stream is
// closed when the page is left (the returned function) or the filter changes.
import { BASE, query } from "../api.js";
import { h, replace } from "../dom.js";
import { t } from "../i18n.js";

const LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"];
const KEEP = 1000;
const known = (id) => id && id !== "-";  // "-": a line not bound to a chat or message

export async function render(view, { search, navigate }) {
  const chat = search.get("chat") || "";
  const level = LEVELS.includes(search.get("level")) ? search.get("level") : "INFO";
  const lines = h("pre#log-lines", { "aria-live": "off" });
  const status = h("span#log-status.badge", null, t("logs.connecting"));
  let paused = false;

  const form = h("form.toolbar#log-filters", {
    onsubmit: (e) => {
      e.preventDefault();
      const data = new FormData(e.target);
      navigate(`/admin/logs${query({ chat: data.get("chat").trim(), level: data.get("level") })}`);
    },
  },
    h("input", { type: "search", name: "chat", value: chat, placeholder: t("logs.chat") }),
    h("select", { name: "level", "aria-label": t("logs.level") },
      LEVELS.map((l) => h("option", { value: l, selected: l === level }, l))),
    h("button", { type: "submit" }, t("chats.apply")),
    h("button", { type: "button", onclick: (e) => {
      paused = !paused;
      e.currentTarget.textContent = paused ? t("logs.resume") : t("logs.pause");
    } }, t("logs.pause")),
    h("button", { type: "button", onclick: () => lines.replaceChildren() }, t("logs.clear")),
    status);

  const source = new EventSource(`${BASE}/logs${query({ chat, level })}`);
  source.addEventListener("open", () => {
    status.textContent = t("logs.live");
    status.className = "badge ok";
  });
  source.addEventListener("error", () => {
    status.textContent = t("logs.disconnected");
    status.className = "badge err";
  });
  source.addEventListener("closing", () => source.close());
  source.addEventListener("log", (event) => {
    if (paused) return;
    let line;
    try {
      line = JSON.parse(event.data);
    } catch {
      return;
    }
    const atBottom = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 4;
    lines.append(h("div", { class: `log-line ${line.level}` },
      `${(line.time || "").replace("T", " ").replace("Z", "")} ${String(line.level).padEnd(7)} `,
      known(line.chat_id) ? `[${line.chat_id}${known(line.message_id) ? ` #${line.message_id}` : ""}] ` : "",
      `${line.logger ? `${line.logger}: ` : ""}${line.text}`));
    while (lines.childElementCount > KEEP) lines.firstElementChild.remove();
    if (atBottom) lines.scrollTop = lines.scrollHeight;
  });

  replace(view, h("h2", null, t("nav.logs")), form, lines);
  return () => source.close();
}
