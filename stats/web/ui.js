// The status page's only script (embedded in the binary). The page is whole without it:
// this only refreshes the live part once a second while the tab is visible.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.fetch) { return; }
  var busy = false;
  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch("/ui/live" + window.location.search, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) { live.innerHTML = html; document.body.dataset.updated = String(Date.now()); })
      .catch(function () { /* the next tick tries again */ })
      .then(function () { busy = false; });
  }
  setInterval(refresh, 1000);
}());
