// Time-series charts drawn by the vendored uPlot (vendor/uPlot.iife.min.js, a global `uPlot`).
// A chart is made once its box has a width and follows the box when the window resizes, so
// the same page works at desktop and phone width.
import { h } from "./dom.js";
import { t } from "./i18n.js";

const COLORS = ["#2f6fed", "#e8702a", "#1f9d55", "#c0392b", "#8e44ad", "#16a2b8", "#b8860b"];

/**
 * A chart card. `times` are epoch seconds (bucket starts); each series is
 * {label, values: [number|null]}; `format` turns a y value into axis/legend text.
 */
export function lineChart({ title, times, series, format = (v) => String(v), id }) {
  const box = h("div.chart-box");
  const card = h("section.card.chart", { id }, h("h3", null, title), box);
  if (typeof uPlot === "undefined" || !times.length) {
    box.append(h("p.dim", null, "—"));
    return card;
  }
  const data = [times, ...series.map((s) => s.values)];
  let plot = null;
  const options = (width) => ({
    width,
    height: 180,
    legend: { show: true },
    cursor: { points: { size: 6 } },
    // Counts, tokens, cost and latency are never negative: the y axis starts at zero.
    scales: { x: { time: true }, y: { range: (_, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      { stroke: "currentColor", grid: { stroke: "rgba(127,127,127,.15)" } },
      {
        stroke: "currentColor",
        grid: { stroke: "rgba(127,127,127,.15)" },
        size: 64,
        values: (_, ticks) => ticks.map(format),
      },
    ],
    series: [
      { label: t("chart.time") },
      ...series.map((s, i) => ({
        label: s.label,
        stroke: COLORS[i % COLORS.length],
        fill: series.length === 1 ? `${COLORS[i % COLORS.length]}22` : undefined,
        width: 2,
        spanGaps: true,
        value: (_, v) => (v === null || v === undefined ? "—" : format(v)),
      })),
    ],
  });
  new ResizeObserver(() => {
    const width = Math.floor(box.clientWidth);
    if (width <= 0) return;
    if (!plot) plot = new uPlot(options(width), data, box);
    else if (Math.abs(plot.width - width) > 2) plot.setSize({ width, height: 180 });
  }).observe(box);
  return card;
}
