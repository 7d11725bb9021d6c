// Leasehold dashboard: live refresh and confirmations. No dependencies.
//
// Every few seconds the page's content (<main id="live">) is fetched again
// as an HTML fragment and swapped in place. Polling stops while the tab is
// hidden, while the user types in a form, and when switched off.
(function () {
  "use strict";
  var main, toggle, status, timer = null, inflight = false, on = true, interval = 0;

  function busy() {
    // Do not swap the content out from under someone filling in a form.
    var a = document.activeElement;
    if (a && main.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA")) return true;
    var notes = main.querySelectorAll("input[type=text]");
    for (var i = 0; i < notes.length; i++) {
      if (notes[i].form && notes[i].form.method === "post" && notes[i].value !== "") return true;
    }
    return false;
  }

  function show(text) { if (status) status.textContent = text; }

  function refresh() {
    if (inflight || document.hidden || !on || busy()) return;
    inflight = true;
    fetch(window.location.href, { headers: { "X-Leasehold-Fragment": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (resp) {
        if (resp.status === 401) {
          // The session expired or the token changed: reloading shows the
          // login page, which comes back here after signing in.
          window.location.reload();
          throw new Error("signed out");
        }
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        return resp.text();
      })
      .then(function (html) {
        if (!busy()) {
          main.innerHTML = html;
          show("updated " + new Date().toLocaleTimeString());
          main.dispatchEvent(new CustomEvent("leasehold:refreshed", { bubbles: true }));
        }
      })
      .catch(function (err) { show("refresh failed: " + err.message); })
      .then(function () { inflight = false; });
  }

  function schedule() {
    if (timer) { clearInterval(timer); timer = null; }
    if (on && !document.hidden && interval > 0) timer = setInterval(refresh, interval);
  }

  function paint() {
    toggle.textContent = on ? "Live" : "Paused";
    toggle.className = on ? "live on" : "live off";
    toggle.title = on ? "Refreshing every " + interval / 1000 + " s; click to pause" : "Click to refresh live again";
  }

  document.addEventListener("DOMContentLoaded", function () {
    main = document.getElementById("live");
    toggle = document.getElementById("live-toggle");
    status = document.getElementById("live-status");
    interval = parseInt(document.body.getAttribute("data-refresh"), 10) || 0;
    if (main && toggle && interval > 0) {
      toggle.hidden = false;
      paint();
      toggle.addEventListener("click", function () {
        on = !on;
        paint();
        schedule();
        if (on) refresh();
      });
      document.addEventListener("visibilitychange", function () {
        schedule();
        if (!document.hidden) refresh();
      });
      schedule();
    }
    // Ask before state changes. Delegated, so it survives content swaps.
    document.addEventListener("submit", function (ev) {
      var btn = ev.submitter;
      var msg = btn && btn.getAttribute("data-confirm");
      if (msg && !window.confirm(msg)) ev.preventDefault();
    });
  });
})();
