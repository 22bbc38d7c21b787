// Breaker Panel: the little the pages need beyond htmx. No framework, no request of its own.
//
// - Durations ("open for 3 m 12 s") count up from the absolute <time datetime data-since> the
//   server rendered, on the server's clock (its offset is read from data-server-now). The board
//   itself then only changes when the fleet does, so its polls are answered with 304s.
// - The board's live status says when the board was last known to be current (a 200 or a 304),
//   that polling pauses while the tab is hidden, and loudly when updates have stopped arriving.
// - [data-dismiss="#id"] empties that element (Cancel on the operator action panel).
// - A table box that has to scroll sideways (a narrow screen) can be reached with the keyboard.
// - Inside [data-swap-errors] (forms), a refusal that explains itself (400 invalid input,
//   409 conflict, 503 store down) is shown in place; htmx would otherwise drop any 4xx/5xx.
(function () {
  "use strict";

  var STALE_AFTER_MS = 10000;
  var offsetMs = 0;
  var lastOk = Date.now();
  var lastProblem = "";

  function elapsed(seconds) {
    if (seconds < 60) return seconds + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " m " + pad(seconds % 60) + " s";
    if (seconds < 86400) {
      return Math.floor(seconds / 3600) + " h " + pad(Math.floor((seconds % 3600) / 60)) + " m";
    }
    return Math.floor(seconds / 86400) + " d " + Math.floor((seconds % 86400) / 3600) + " h";
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function serverNow() {
    return Date.now() + offsetMs;
  }

  function utcClock(ms) {
    return new Date(ms).toISOString().slice(11, 19);
  }

  function syncClock(root) {
    var el = (root || document).querySelector("[data-server-now]");
    if (!el) return;
    var server = Date.parse(el.getAttribute("data-server-now"));
    if (!isNaN(server)) offsetMs = server - Date.now();
  }

  function tickDurations() {
    var now = serverNow();
    var times = document.querySelectorAll("time[data-since]");
    for (var i = 0; i < times.length; i++) {
      var since = Date.parse(times[i].getAttribute("datetime"));
      if (!isNaN(since)) times[i].textContent = elapsed(Math.max(0, Math.floor((now - since) / 1000)));
    }
  }

  function setStatus(state, text) {
    var el = document.getElementById("live-status");
    if (!el) return;
    el.setAttribute("data-state", state);
    var label = el.querySelector("[data-status-text]");
    if (label && label.textContent !== text) label.textContent = text;
  }

  function stale() {
    setStatus(
      "stale",
      "Not updating since " + utcClock(lastOk + offsetMs) + " UTC" + (lastProblem ? " (" + lastProblem + ")" : "")
    );
  }

  // Polls pause while the tab is hidden. This is done here rather than with an htmx trigger
  // filter ("[!document.hidden]"), which htmx evaluates as a string: the CSP forbids eval.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var source = event.detail && event.detail.elt;
    if (document.hidden && source && source.hasAttribute("data-poll-visible-only")) {
      event.preventDefault();
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "board-live") return;
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 200 || status === 304) {
      lastOk = Date.now();
      lastProblem = "";
      setStatus("live", "Live · updated " + utcClock(serverNow()) + " UTC");
    } else {
      lastProblem = status ? "the server answered " + status : "the control plane cannot be reached";
      stale();
    }
  });

  var EXPLAINED = [400, 409, 503];

  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = event.detail.requestConfig ? event.detail.requestConfig.elt : null;
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (EXPLAINED.indexOf(status) >= 0 && elt && elt.closest && elt.closest("[data-swap-errors]")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    syncClock(event.detail.target);
    tickDurations();
  });

  document.addEventListener("click", function (event) {
    var trigger = event.target.closest ? event.target.closest("[data-dismiss]") : null;
    if (!trigger) return;
    var panel = document.querySelector(trigger.getAttribute("data-dismiss"));
    if (!panel) return;
    event.preventDefault();
    panel.innerHTML = "";
  });

  function focusableScrollers() {
    var boxes = document.querySelectorAll(".table-wrap");
    for (var i = 0; i < boxes.length; i++) {
      if (boxes[i].scrollWidth > boxes[i].clientWidth + 1) {
        boxes[i].setAttribute("tabindex", "0");
        boxes[i].setAttribute("role", "region");
        boxes[i].setAttribute("aria-label", "Table, scrolls sideways");
      } else {
        boxes[i].removeAttribute("tabindex");
      }
    }
  }

  document.addEventListener("htmx:afterSettle", focusableScrollers);
  window.addEventListener("resize", focusableScrollers);

  document.addEventListener("DOMContentLoaded", function () {
    focusableScrollers();
    syncClock(document);
    tickDurations();
    window.setInterval(function () {
      tickDurations();
      if (!document.getElementById("board-live")) return;
      if (document.hidden) {
        setStatus("paused", "Paused while this tab is hidden");
      } else if (Date.now() - lastOk > STALE_AFTER_MS) {
        stale();
      }
    }, 1000);
  });
})();
