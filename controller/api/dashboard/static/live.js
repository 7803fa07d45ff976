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
    var source = new EventSource("/runs/" + encodeURIComponent(runId) + "/live");
    var handler = function (event) {
      if (step) { step.textContent = "last event: " + event.type; }
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
