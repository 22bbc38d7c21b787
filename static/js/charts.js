// Breaker Panel charts: draw each figure the server built (dashboard/charts.py) with the local
// plotly.min.js. The figure's JSON sits in <script type="application/json" id="…-data"> next to
// its <div data-chart="…-data">. No request of its own, nothing from a CDN.
(function () {
  "use strict";

  var CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
    toImageButtonOptions: { format: "png", scale: 2 }
  };

  function draw(el) {
    var source = document.getElementById(el.getAttribute("data-chart"));
    if (!source || !window.Plotly) return;
    var figure;
    try {
      figure = JSON.parse(source.textContent);
    } catch (err) {
      el.textContent = "This chart could not be read.";
      return;
    }
    el.textContent = "";
    window.Plotly.newPlot(el, figure.data || [], figure.layout || {}, CONFIG);
    el.setAttribute("data-drawn", "true");
  }

  document.addEventListener("DOMContentLoaded", function () {
    var charts = document.querySelectorAll("[data-chart]");
    for (var i = 0; i < charts.length; i++) draw(charts[i]);
  });
})();
