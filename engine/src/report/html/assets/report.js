// engine report: zoom and pan of the task graph, find and filter, and a
// task's details on click. It reads only the page's own elements (ids and
// numeric data attributes) and never turns text into markup.
(function () {
  "use strict";
  var svg = document.getElementById("dag-svg");
  var panel = document.getElementById("panel");
  var panelBody = document.getElementById("panel-body");
  var selected = null;
  var dragged = false;
  var centreOn = function () {};

  // ---- a task's details on click ---------------------------------------
  function mark(i, on) {
    document.querySelectorAll('.node[data-i="' + i + '"], .trow[data-i="' + i + '"]').forEach(function (n) {
      n.classList.toggle("sel", on);
    });
    document.querySelectorAll('.edge[data-from="' + i + '"], .edge[data-to="' + i + '"]').forEach(function (e) {
      e.classList.toggle("hl", on);
    });
  }
  function select(i, centre) {
    var detail = document.getElementById("task-" + i);
    if (!detail) { return; }
    if (selected !== null) { mark(selected, false); }
    selected = i;
    mark(i, true);
    var copy = detail.cloneNode(true);
    copy.removeAttribute("id");
    copy.open = true;
    panelBody.replaceChildren(copy);
    panel.hidden = false;
    panel.scrollTop = 0;
    if (centre) { centreOn(i); }
  }
  function closePanel() {
    panel.hidden = true;
    if (selected !== null) { mark(selected, false); selected = null; }
  }
  document.addEventListener("click", function (ev) {
    var copy = ev.target.closest("[data-copy]");
    if (copy) {
      if (navigator.clipboard) { navigator.clipboard.writeText(copy.getAttribute("data-copy")).catch(function () {}); }
      return;
    }
    var link = ev.target.closest(".node, .trow, .tasklink");
    if (!link) { return; }
    ev.preventDefault();
    if (!dragged) { select(link.getAttribute("data-i"), !link.classList.contains("node")); }
  });
  document.getElementById("panel-close").addEventListener("click", closePanel);
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape" && !panel.hidden) { closePanel(); }
  });

  // ---- zoom and pan of the graph (its viewBox; the layout is Rust's) ---
  function graph() {
    var fullW = Number(svg.getAttribute("data-width")), fullH = Number(svg.getAttribute("data-height"));
    var view = { x: 0, y: 0, w: fullW, h: fullH };
    var box = svg.parentNode;
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
    function size() {
      var w = box.clientWidth || 800;
      var h = Math.max(240, Math.min(window.innerHeight * 0.75, fullH * Math.min(1, w / fullW) + 8));
      svg.style.height = h + "px";
      return { w: w, h: h };
    }
    function apply() { svg.setAttribute("viewBox", view.x + " " + view.y + " " + view.w + " " + view.h); }
    function scaleNow() { return size().w / view.w; }
    function zoomTo(scale, cx, cy) {
      var s = size();
      scale = Math.max(0.02, Math.min(4, scale));
      view.w = s.w / scale; view.h = s.h / scale;
      view.x = cx - view.w / 2; view.y = cy - view.h / 2;
      apply();
    }
    function fit() {
      var s = size();
      var scale = Math.min(1, s.w / fullW, s.h / fullH);
      view.w = s.w / scale; view.h = s.h / scale;
      view.x = (fullW - view.w) / 2; view.y = 0;
      apply();
    }
    centreOn = function (i) {
      var r = svg.querySelector('.node[data-i="' + i + '"] rect');
      if (!r) { return; }
      var x = Number(r.getAttribute("x")) + Number(r.getAttribute("width")) / 2;
      var y = Number(r.getAttribute("y")) + Number(r.getAttribute("height")) / 2;
      zoomTo(Math.max(scaleNow(), 0.8), x, y);
    };
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var rect = svg.getBoundingClientRect();
      var px = view.x + (ev.clientX - rect.left) * view.w / rect.width;
      var py = view.y + (ev.clientY - rect.top) * view.h / rect.height;
      var f = ev.deltaY < 0 ? 1.2 : 1 / 1.2;
      var next = rect.width / (view.w / f);
      if (next > 4 || next < 0.02) { return; }
      view.x = px - (px - view.x) / f; view.y = py - (py - view.y) / f;
      view.w /= f; view.h /= f;
      apply();
    }, { passive: false });
    var start = null;
    svg.addEventListener("pointerdown", function (ev) {
      start = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y };
      dragged = false;
    });
    window.addEventListener("pointermove", function (ev) {
      if (!start) { return; }
      var dx = ev.clientX - start.x, dy = ev.clientY - start.y;
      if (!dragged && Math.abs(dx) + Math.abs(dy) < 4) { return; }
      dragged = true;
      svg.classList.add("dragging");
      var k = view.w / svg.getBoundingClientRect().width;
      view.x = start.vx - dx * k; view.y = start.vy - dy * k;
      apply();
    });
    window.addEventListener("pointerup", function () {
      start = null;
      svg.classList.remove("dragging");
      setTimeout(function () { dragged = false; }, 0);
    });
    document.querySelectorAll("[data-zoom]").forEach(function (b) {
      b.addEventListener("click", function () {
        var what = b.getAttribute("data-zoom");
        var cx = view.x + view.w / 2, cy = view.y + view.h / 2;
        if (what === "fit") { fit(); }
        if (what === "in") { zoomTo(scaleNow() * 1.5, cx, cy); }
        if (what === "out") { zoomTo(scaleNow() / 1.5, cx, cy); }
        if (what === "one") { zoomTo(1, cx, cy); }
      });
    });
    window.addEventListener("resize", fit);
    fit();
  }

  // ---- find a task; show the tasks of one state -------------------------
  function findAndFilter() {
    var nodes = svg.querySelectorAll(".node");
    var find = document.getElementById("find");
    find.addEventListener("change", function () {
      nodes.forEach(function (n) {
        if (n.getAttribute("data-ref") === find.value) { select(n.getAttribute("data-i"), true); }
      });
    });
    var filter = document.getElementById("filter");
    filter.addEventListener("change", function () {
      var want = filter.value, shown = {};
      nodes.forEach(function (n) {
        var on = want === "" || n.getAttribute("data-state") === want;
        n.classList.toggle("dim", !on);
        if (on) { shown[n.getAttribute("data-i")] = true; }
      });
      svg.querySelectorAll(".edge").forEach(function (e) {
        var on = want === "" || (shown[e.getAttribute("data-from")] && shown[e.getAttribute("data-to")]);
        e.classList.toggle("dim", !on);
      });
    });
  }

  if (svg) { graph(); findAndFilter(); }
  document.documentElement.setAttribute("data-report-ready", "1");
})();
