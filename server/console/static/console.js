// cordon console: live updates of a run's page over server-sent events.
// It writes only with textContent (never innerHTML): everything a run
// sends is text.
"use strict";
(function () {
  var tl = document.getElementById("timeline");
  if (!tl || !tl.dataset.events || typeof EventSource === "undefined") {
    return;
  }
  var es = new EventSource(tl.dataset.events);
  es.addEventListener("entry", function (ev) {
    var e;
    try { e = JSON.parse(ev.data); } catch (x) { return; }
    var li = document.createElement("li");
    li.className = "entry";
    li.dataset.kind = String(e.kind);
    li.dataset.index = String(e.index);
    var k = document.createElement("span");
    k.className = "kind";
    k.textContent = String(e.kind);
    li.appendChild(k);
    var sum = document.createElement("span");
    sum.className = "summary";
    sum.textContent = String(e.summary || "");
    li.appendChild(sum);
    if (e.detail) {
      var pre = document.createElement("pre");
      pre.textContent = String(e.detail);
      li.appendChild(pre);
    }
    tl.appendChild(li);
  });
  es.addEventListener("status", function (ev) {
    var st = document.getElementById("status");
    if (st) { st.textContent = String(ev.data); }
  });
  es.addEventListener("end", function () {
    es.close();
    var v = document.getElementById("verify");
    if (v && v.dataset.pending === "1") {
      var note = document.createElement("p");
      note.className = "hint";
      note.textContent = "The run has ended: reload the page for its receipt and verification.";
      v.appendChild(note);
    }
  });
}());
