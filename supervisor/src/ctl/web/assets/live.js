// squadctl web: live updates. On each change the server streams (server-sent
// events, resumed from Last-Event-ID by the browser), the page's <main> is
// fetched again and swapped in: what is shown is always the server's
// rendering, and the page reads the same without this script.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !window.EventSource) { return; }
  var busy = false, again = false;
  var eventAt = 0;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var asked = eventAt;
    fetch(location.pathname, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null) { return; }
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("main");
        var now = document.getElementById("main");
        if (fresh && now) {
          var focused = document.activeElement && document.activeElement.id;
          now.replaceWith(document.importNode(fresh, true));
          if (focused) { var f = document.getElementById(focused); if (f) { f.focus(); } }
          // When the page last changed, and after which event (for the
          // browser test's event-to-page latency).
          document.documentElement.dataset.refreshedAt = String(performance.now());
          document.documentElement.dataset.refreshedAfter = String(asked);
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var source = new EventSource("/events");
  function changed() { eventAt = performance.now(); refresh(); }
  source.addEventListener("change", changed);
  source.addEventListener("reload", changed);
})();
