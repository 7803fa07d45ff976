// crucible dashboard: live updates of the run page and the copy buttons. Plain script, no build step,
// served from this origin (the Content-Security-Policy allows no inline script).
(function () {
  "use strict";
  var REFRESH = [
    "baseline", "accepted", "rejected", "failed", "no_change", "round_finished", "published",
    "feedback_received", "reply_drafted", "completed", "resumed"
  ];

  function refresh(live, runId) {
    fetch("/runs/" + encodeURIComponent(runId) + "/fragment", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { live.innerHTML = html; } })
      .catch(function () { /* the next event retries */ });
  }

  function follow() {
    var live = document.getElementById("live");
    if (!live || live.dataset.finished === "yes" || !window.EventSource) { return; }
    var runId = live.dataset.run;
    var step = document.getElementById("live-step");
    var pending = null;
    var url = "/runs/" + encodeURIComponent(runId) + "/live?after=" + encodeURIComponent(live.dataset.after || "0");
    var source = new EventSource(url);  // only what happened after the page was rendered
    var handler = function (event) {
      if (step) {
        var data = {};
        try { data = JSON.parse(event.data); } catch (e) { data = {}; }
        step.textContent = event.type === "turn_started" && data.turn
          ? "turn " + data.turn + " is running (proposing, validating, measuring, deciding)"
          : "last event: " + event.type + (data.turn ? " (turn " + data.turn + ")" : "");
      }
      if (REFRESH.indexOf(event.type) >= 0 && pending === null) {
        pending = window.setTimeout(function () { pending = null; refresh(live, runId); }, 200);
      }
    };
    ["turn_started", "round_started", "base_followed", "pr_closed"].concat(REFRESH).forEach(
      function (kind) { source.addEventListener(kind, handler); }
    );
    live.dataset.following = "yes";
  }

  function copyButtons() {
    document.querySelectorAll("button.copy").forEach(function (button) {
      button.addEventListener("click", function () {
        var target = document.getElementById(button.dataset.copy);
        if (target && navigator.clipboard) {
          navigator.clipboard.writeText(target.textContent).then(function () { button.textContent = "Copied"; });
        }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { follow(); copyButtons(); });
})();
