// Draws the plotly figures the solution notebooks store (tools/site_pages.py writes each as JSON in a
// <div class="labkit-plotly">), with the plotly.js the site serves itself. A figure that cannot be drawn says so.
document.addEventListener("DOMContentLoaded", () => {
  for (const div of document.querySelectorAll("div.labkit-plotly")) {
    const data = div.querySelector("script.labkit-plotly-data");
    try {
      if (typeof Plotly === "undefined") throw new Error("plotly.js did not load");
      const fig = JSON.parse(data.textContent);
      const plot = document.createElement("div");
      plot.className = "labkit-plotly-figure";
      div.appendChild(plot);
      Plotly.newPlot(plot, fig.data || [], fig.layout || {}, {responsive: true, displaylogo: false})
        .then(() => div.setAttribute("data-drawn", "yes"))
        .catch((e) => { div.setAttribute("data-drawn", "no"); console.error("figure not drawn:", e); });
    } catch (e) {
      div.setAttribute("data-drawn", "no");
      div.insertAdjacentText("beforeend", "This figure could not be drawn: " + e.message);
      console.error("figure not drawn:", e);
    }
  }
});
