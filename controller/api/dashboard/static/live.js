// crucible dashboard: live updates of the run page and the copy buttons. Plain script, no build step,
// served from this origin (the Content-Security-Policy allows no inline script). Every text it writes
// goes through textContent, never innerHTML, except the fragment the server rendered (and escaped).
(function () {
  "use strict";
  var DECIDED = ["accepted", "rejected", "failed", "no_change"];
  var REFRESH = DECIDED.concat([
    "baseline", "round_finished", "published", "feedback_received", "reply_drafted", "completed", "resumed"
  ]);
  var PROGRESS = ["turn_step", "sample"];

  function refresh(live, runId) {
    fetch("/runs/" + encodeURIComponent(runId) + "/fragment", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { live.innerHTML = html; } })
      .catch(function () { /* the next event retries */ });
  }

  function number(v) {
    return v === null || v === undefined ? "invalid" : String(Number(Number(v).toPrecision(6)));
  }

  function median(text) {
    var values = text.split(", ").map(parseFloat).filter(function (v) { return !isNaN(v); });
    if (!values.length) { return ""; }
    values.sort(function (a, b) { return a - b; });
    var mid = Math.floor(values.length / 2);
    return number(values.length % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2);
  }

  function cell(row, tag, className, text) {
    var c = document.createElement(tag);
    if (className) { c.className = className; }
    c.textContent = text;
    row.appendChild(c);
    return c;
  }

  function addSample(body, arm, value) {
    var row = null;
    for (var i = 0; i < body.rows.length; i++) {
      if (body.rows[i].dataset.arm === arm) { row = body.rows[i]; }
    }
    if (row === null) {
      row = document.createElement("tr");
      row.dataset.arm = arm;
      cell(row, "th", "", arm);
      cell(row, "td", "values", "");
      cell(row, "td", "median", "");
      body.appendChild(row);
    }
    var values = row.querySelector("td.values");
    values.textContent = values.textContent ? values.textContent + ", " + number(value) : number(value);
    row.querySelector("td.median").textContent = median(values.textContent);
  }

  function clear(node) {
    while (node.firstChild) { node.removeChild(node.firstChild); }
  }

  // One hypothesis's step in the list of a parallel turn (broker.parallel > 1), by its index.
  function hypothesisStep(list, index, text) {
    var item = null;
    for (var i = 0; i < list.children.length; i++) {
      if (list.children[i].dataset.index === index) { item = list.children[i]; }
    }
    if (item === null) {
      item = document.createElement("li");
      item.dataset.index = index;
      var after = null;  // kept in index order, as the server renders it
      for (var j = 0; j < list.children.length && after === null; j++) {
        if (Number(list.children[j].dataset.index) > Number(index)) { after = list.children[j]; }
      }
      list.insertBefore(item, after);
    }
    item.textContent = "#" + index + ": " + text;
    list.hidden = false;
  }

  // The running turn's panel: its step and the samples as they arrive (turn_step and sample events);
  // a parallel turn's events carry parallel_index: a step per hypothesis, rows "#1 candidate".
  function progress(kind, data) {
    var panel = document.getElementById("turn-live");
    if (!panel) { return; }
    var body = document.getElementById("turn-live-samples");
    var step = document.getElementById("turn-live-step");
    var list = document.getElementById("turn-live-hypotheses");
    var parallel = typeof data.parallel_index === "number" ? String(data.parallel_index) : null;
    if (kind === "turn_started") {
      panel.dataset.turn = String(data.turn);
      document.getElementById("turn-live-title").textContent =
        "Turn " + data.turn + " (round " + (data.round || 0) + ") is running" +
        (data.parallel > 1 ? " with " + data.parallel + " hypotheses" : "");
      step.textContent = "starting";
      clear(body);
      if (list) { clear(list); list.hidden = true; }
      panel.hidden = false;
    } else if (kind === "completed") {
      panel.hidden = true;
    } else if (String(data.turn) !== panel.dataset.turn) {
      return;
    } else if (kind === "turn_step") {
      var arms = data.arms || [];
      var text = data.step === "measuring" && arms.length ? "measuring " + arms.join(" vs ") : String(data.step);
      if (parallel !== null && list) { hypothesisStep(list, parallel, text); }
      step.textContent = parallel === null ? text : "hypothesis #" + parallel + ": " + text;
    } else if (kind === "sample") {
      addSample(body, parallel === null ? String(data.arm) : "#" + parallel + " " + data.arm, data.value);
    } else if (DECIDED.indexOf(kind) >= 0) {
      panel.hidden = true;
    }
  }

  // A run that ended offers nothing to cancel and no round to start any more (a reload shows what a
  // cancelled run offers instead); the buttons go as the run's "completed" event arrives.
  function finishedActions() {
    var nav = document.getElementById("run-actions");
    if (!nav) { return; }
    nav.querySelectorAll("a[data-action=cancel], a[data-action=round]").forEach(function (link) {
      link.parentNode.removeChild(link);
    });
    nav.hidden = nav.querySelectorAll("a").length === 0;
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
      var data = {};
      try { data = JSON.parse(event.data); } catch (e) { data = {}; }
      progress(event.type, data);
      if (step && PROGRESS.indexOf(event.type) < 0) {
        step.textContent = "last event: " + event.type + (data.turn ? " (turn " + data.turn + ")" : "");
      }
      if (REFRESH.indexOf(event.type) >= 0 && pending === null) {
        pending = window.setTimeout(function () { pending = null; refresh(live, runId); }, 200);
      }
      if (event.type === "completed") {
        source.close();  // the run is over: no reconnecting to a stream that has nothing more
        live.dataset.finished = "yes";
        finishedActions();
      }
    };
    ["turn_started", "round_started", "base_followed", "pr_closed"].concat(REFRESH, PROGRESS).forEach(
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
