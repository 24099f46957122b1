// squadctl web: live updates. On each change the server streams (server-sent
// events, resumed from Last-Event-ID by the browser), the page's <main> is
// fetched again and swapped in: what is shown is always the server's
// rendering, and the page reads the same without this script.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !window.EventSource) { return; }
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
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
          document.documentElement.dataset.refreshed = String(Date.now());
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var source = new EventSource("/events");
  source.addEventListener("change", refresh);
  source.addEventListener("reload", refresh);
})();
