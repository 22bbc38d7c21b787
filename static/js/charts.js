// Breaker Panel charts: draw each figure the server built (dashboard/charts.py) with the local
// plotly.min.js. The figure's JSON sits in <script type="application/json" id="…-data"> next to
// its <div data-chart="…-data">. No request of its own, nothing from a CDN.
//
// On a narrow screen (a phone, or side-by-side panels narrower than PANEL_MIN_PX) the figure is
// laid out again as a column: its panels stacked in rows, long titles wrapped, the legend as a
// list under the plot and every position counted in pixels, so no two texts overlap at any width.
(function () {
  "use strict";

  var CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
    toImageButtonOptions: { format: "png", scale: 2 }
  };
  var PANEL_MIN_PX = 420; // a panel narrower than this cannot hold its titles side by side
  var NARROW_PX = 560; // a figure narrower than this wraps its titles
  var ROW_PX = 230; // one panel's plot in the column layout
  var CHAR = 0.56; // mean glyph width of the sans-serif font, in ems

  function clone(value) {
    return JSON.parse(JSON.stringify(value));
  }

  function textOf(title) {
    if (!title) return "";
    return typeof title === "string" ? title : title.text || "";
  }

  // Break text into lines of at most `room` pixels at `size` px, at spaces (plotly's <br>).
  function wrap(text, size, room) {
    var max = Math.max(8, Math.floor(room / (size * CHAR)));
    var out = [];
    String(text).split("<br>").forEach(function (part) {
      var line = "";
      part.split(" ").forEach(function (word) {
        if (line && (line + " " + word).length > max) {
          out.push(line);
          line = word;
        } else {
          line = line ? line + " " + word : word;
        }
      });
      out.push(line);
    });
    return out;
  }

  function axisKeys(layout, letter) {
    return Object.keys(layout).filter(function (key) {
      return new RegExp("^" + letter + "axis\\d*$").test(key);
    }).sort();
  }

  function isCompact(layout, width) {
    var panels = Math.max(1, axisKeys(layout, "x").length);
    return width < NARROW_PX || width / panels < PANEL_MIN_PX;
  }

  // The same figure as a column of panels, every offset in pixels (see the comment at the top).
  function compactLayout(figure, width) {
    var layout = clone(figure.layout || {});
    var room = width - 40;
    var fontSize = (layout.font && layout.font.size) || 12;
    var top = 12;
    if (layout.title) {
      var title = typeof layout.title === "string" ? { text: layout.title } : layout.title;
      var titleSize = (title.font && title.font.size) || 16;
      var lines = wrap(textOf(title), titleSize, room);
      title.text = lines.join("<br>");
      top += lines.length * titleSize * 1.3;
      if (title.subtitle && title.subtitle.text) {
        var subSize = (title.subtitle.font && title.subtitle.font.size) || 13;
        var subLines = wrap(title.subtitle.text, subSize, room);
        title.subtitle.text = subLines.join("<br>");
        top += subLines.length * subSize * 1.35;
      }
      // From the top of the figure down. Plotly anchors a wrapped title by its middle line's
      // baseline, so the pad takes the lines above it as well.
      title.y = 1;
      title.yref = "container";
      title.yanchor = "top";
      title.pad = { t: 10 + (lines.length - 1) * titleSize * 0.65 };
      layout.title = title;
      top += 14 + title.pad.t;
    }
    var xs = axisKeys(layout, "x");
    var ys = axisKeys(layout, "y");
    var oldDomains = xs.map(function (key) {
      return (layout[key].domain || [0, 1]).slice();
    });
    var annotations = layout.annotations || [];
    // make_subplots' panel titles: paper annotations at the top of the plot, one per column.
    var panelTitles = xs.map(function () {
      return null;
    });
    annotations.forEach(function (a) {
      if (a.xref !== "paper" || a.yref !== "paper" || a.y !== 1 || a.yanchor !== "bottom") return;
      oldDomains.forEach(function (d, i) {
        if (a.x >= d[0] && a.x <= d[1] && panelTitles[i] === null) panelTitles[i] = a;
      });
    });
    var rows = xs.map(function (key, i) {
      var axis = layout[key];
      var axisTitle = axis.title || {};
      var axisLines = wrap(textOf(axisTitle), fontSize, room);
      if (axisTitle.text) axisTitle.text = axisLines.join("<br>");
      var head = 0;
      var panelTitle = panelTitles[i];
      if (panelTitle) {
        var size = (panelTitle.font && panelTitle.font.size) || 16;
        var headLines = wrap(panelTitle.text, size, room);
        panelTitle.text = headLines.join("<br>");
        head = headLines.length * size * 1.3 + 8;
      }
      // Tick labels (two lines for dates), the axis title and a gap before the next panel.
      var foot = (axis.type === "date" ? 44 : 30) + (axisTitle.text ? axisLines.length * 16 : 0);
      return { head: head, foot: foot + 18 };
    });
    var plot = rows.reduce(function (sum, r) {
      return sum + r.head + ROW_PX + r.foot;
    }, 0);
    var offset = 0;
    xs.forEach(function (key, i) {
      var r = rows[i];
      var y1 = 1 - (offset + r.head) / plot;
      var y0 = y1 - ROW_PX / plot;
      layout[key].domain = [0, 1];
      layout[key].automargin = false;
      if (ys[i]) {
        layout[ys[i]].domain = [y0, y1];
      }
      if (panelTitles[i]) {
        panelTitles[i].x = 0;
        panelTitles[i].xanchor = "left";
        panelTitles[i].y = y1;
        panelTitles[i].yshift = 4;
      }
      offset += r.head + ROW_PX + r.foot;
    });
    // The shaded spans' labels sit at the top of their panel: one line each, so they never meet.
    var perPanel = {};
    annotations.forEach(function (a) {
      if (typeof a.yref === "string" && / domain$/.test(a.yref)) {
        perPanel[a.yref] = (perPanel[a.yref] || 0) + 1;
        a.yshift = -14 * (perPanel[a.yref] - 1);
      }
    });
    // The legend: one entry a line, under the last panel; notes under the legend.
    var entries = 0;
    (figure.data || []).forEach(function (trace) {
      if (trace.showlegend === false || !trace.name) return;
      var nameLines = wrap(trace.name, fontSize, room - 40);
      trace.name = nameLines.join("<br>");
      entries += nameLines.length;
    });
    var legendTitle = layout.legend && layout.legend.title && layout.legend.title.text;
    var legendPx = entries ? (entries + (legendTitle ? 1 : 0)) * 22 + 16 : 0;
    layout.legend = Object.assign(layout.legend || {}, {
      orientation: "v", x: 0, xanchor: "left", y: 0, yanchor: "top", tracegroupgap: 0
    });
    var notePx = 0;
    annotations.forEach(function (a) {
      if (a.xref === "paper" && a.yref === "paper" && a.y < 0) {
        var size = (a.font && a.font.size) || 11;
        var noteLines = wrap(a.text, size, room);
        a.text = noteLines.join("<br>");
        a.y = 0;
        a.yanchor = "top";
        a.yshift = -(legendPx + notePx);
        notePx += noteLines.length * size * 1.35 + 6;
      }
    });
    var bottom = legendPx + notePx + 12;
    layout.margin = Object.assign(layout.margin || {}, { t: top, b: bottom, l: 64, r: 16 });
    layout.height = Math.round(top + plot + bottom);
    return layout;
  }

  function layoutFor(figure, width) {
    var layout = figure.layout || {};
    return isCompact(layout, width) ? compactLayout(figure, width) : clone(layout);
  }

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
    var width = el.clientWidth;
    var compact = isCompact(figure.layout || {}, width);
    var data = clone(figure.data || []);
    var layout = compact ? compactLayout({ layout: figure.layout, data: data }, width) : clone(figure.layout || {});
    window.Plotly.newPlot(el, data, layout, CONFIG);
    el.setAttribute("data-drawn", "true");
    el.setAttribute("data-layout", compact ? "column" : "wide");
    var pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () {
        var now = el.clientWidth;
        var wanted = isCompact(figure.layout || {}, now);
        if (!wanted && !compact) return; // plotly's own `responsive` resizes the wide layout
        compact = wanted;
        var fresh = clone(figure.data || []);
        var next = wanted ? compactLayout({ layout: figure.layout, data: fresh }, now) : layoutFor(figure, now);
        window.Plotly.react(el, fresh, next, CONFIG);
        el.setAttribute("data-layout", wanted ? "column" : "wide");
      }, 150);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var charts = document.querySelectorAll("[data-chart]");
    for (var i = 0; i < charts.length; i++) draw(charts[i]);
  });
})();
