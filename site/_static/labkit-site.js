// The course site's scripts.
// 1. Draws the plotly figures the solution notebooks store (tools/site_pages.py writes each as JSON in a
//    <div class="labkit-plotly">), with the plotly.js the site serves itself. A figure that cannot be drawn says so.
//    A title wider than the figure is wrapped at spaces (plotly clips it otherwise) and the top margin grows to fit;
//    on a narrow screen the title is smaller, a fixed width gives way to the screen's and the modebar (which would
//    cover the title; a phone zooms with two fingers anyway) is left out.
// 2. Makes the sidebar buttons (the ☰ menu on a narrow screen) work: the theme wires only the first button of each
//    kind on the page, the navbar's, which this theme hides; the visible ones in the article header pass their click on.

const NARROW = window.matchMedia("(max-width: 767.98px)");

function titleText(layout) {
  const t = layout.title;
  return typeof t === "string" ? t : (t && t.text) || "";
}

// Wrap each line of a title (lines split at <br>) to at most `chars` characters, at spaces.
function wrapTitle(text, chars) {
  const out = [];
  for (const line of text.split(/<br\s*\/?>/i)) {
    let cur = "";
    for (const word of line.split(" ")) {
      const plain = (cur + " " + word).replace(/<[^>]+>/g, "");
      if (cur && plain.length > chars) { out.push(cur); cur = word; } else { cur = cur ? cur + " " + word : word; }
    }
    out.push(cur);
  }
  return out;
}

function fitLayout(layout, width) {
  const fitted = Object.assign({}, layout);
  if (NARROW.matches && fitted.width && fitted.width > width) delete fitted.width;
  const w = Math.min(width, fitted.width || width);
  const text = titleText(fitted);
  if (!text) return fitted;
  const title = typeof fitted.title === "string" ? {text: fitted.title} : Object.assign({}, fitted.title);
  const font = Object.assign({}, title.font || {});
  const size = NARROW.matches ? 13 : (font.size || 17);
  font.size = size;
  const lines = wrapTitle(text, Math.max(16, Math.floor((w - 40) / (size * 0.5))));
  // the title starts below the modebar's row (plotly draws the modebar over the figure's top right corner)
  const pad = NARROW.matches ? 6 : 32;
  title.text = lines.join("<br>");
  title.font = font;
  Object.assign(title, {yref: "paper", y: 1, yanchor: "bottom", pad: {b: 10}});  // just above the plot area
  fitted.title = title;
  const margin = Object.assign({t: 100}, fitted.margin || {});
  const need = pad + lines.length * size * 1.3 + 18;
  margin.t = Math.max(margin.t, need);
  fitted.margin = margin;
  if (fitted.height) fitted.height += Math.max(0, margin.t - ((layout.margin || {}).t || 100));
  return fitted;
}

function drawFigures() {
  for (const div of document.querySelectorAll("div.labkit-plotly")) {
    const data = div.querySelector("script.labkit-plotly-data");
    try {
      if (typeof Plotly === "undefined") throw new Error("plotly.js did not load");
      const fig = JSON.parse(data.textContent);
      const plot = document.createElement("div");
      plot.className = "labkit-plotly-figure";
      div.appendChild(plot);
      const layout = fitLayout(fig.layout || {}, div.clientWidth || window.innerWidth);
      const config = {responsive: true, displaylogo: false, displayModeBar: NARROW.matches ? false : "hover"};
      Plotly.newPlot(plot, fig.data || [], layout, config)
        .then(() => div.setAttribute("data-drawn", "yes"))
        .catch((e) => { div.setAttribute("data-drawn", "no"); console.error("figure not drawn:", e); });
    } catch (e) {
      div.setAttribute("data-drawn", "no");
      div.insertAdjacentText("beforeend", "This figure could not be drawn: " + e.message);
      console.error("figure not drawn:", e);
    }
  }
}

function wireSidebarToggles() {
  for (const kind of ["primary", "secondary"]) {
    const [wired, ...others] = document.querySelectorAll(`.${kind}-toggle`);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        wired.click();
      });
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  wireSidebarToggles();
  drawFigures();
});
