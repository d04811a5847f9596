// tailtriage report: tooltips, tabs, copy-config and download buttons.  Reads text only
// (textContent / getAttribute), never writes HTML, so report values stay inert.
(function () {
  "use strict";
  var tip = document.getElementById("tt");
  function showTip(el, x, y) {
    tip.textContent = el.getAttribute("data-tip");
    tip.hidden = false;
    moveTip(x, y);
  }
  function moveTip(x, y) {
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var left = x + 14, top = y + 14;
    if (left + w > window.innerWidth - 8) { left = Math.max(8, x - w - 14); }
    if (top + h > window.innerHeight - 8) { top = Math.max(8, y - h - 14); }
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  document.addEventListener("mouseover", function (ev) {
    var el = ev.target.closest ? ev.target.closest("[data-tip]") : null;
    if (el) { showTip(el, ev.clientX, ev.clientY); } else { tip.hidden = true; }
  });
  document.addEventListener("mousemove", function (ev) { if (!tip.hidden) { moveTip(ev.clientX, ev.clientY); } });
  document.addEventListener("scroll", function () { tip.hidden = true; }, true);

  function selectTab(list, tab) {
    list.querySelectorAll("[role=tab]").forEach(function (t) {
      var on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      var panel = document.getElementById(t.getAttribute("aria-controls"));
      if (panel) { panel.hidden = !on; }
    });
  }
  document.querySelectorAll("[role=tablist]").forEach(function (list) {
    list.addEventListener("click", function (ev) {
      var tab = ev.target.closest("[role=tab]");
      if (tab) { selectTab(list, tab); }
    });
    list.addEventListener("keydown", function (ev) {
      if (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft") { return; }
      var tabs = Array.prototype.slice.call(list.querySelectorAll("[role=tab]"));
      var i = tabs.indexOf(document.activeElement);
      var next = tabs[(i + (ev.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
      selectTab(list, next);
      next.focus();
    });
  });

  function flash(button, text) {
    var old = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", old);
    button.textContent = text;
    window.setTimeout(function () { button.textContent = old; }, 1400);
  }
  function copyText(text, button) {
    function fallback() {
      var area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(area);
      flash(button, ok ? "Copied" : "Select and copy");
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { flash(button, "Copied"); }, fallback);
    } else {
      fallback();
    }
  }
  document.querySelectorAll("button[data-copy]").forEach(function (b) {
    b.addEventListener("click", function () {
      var src = document.getElementById(b.getAttribute("data-copy"));
      if (src) { copyText(src.textContent, b); }
    });
  });
  var dl = document.getElementById("download-json");
  if (dl) {
    dl.addEventListener("click", function () {
      var data = document.getElementById("report-data").textContent;
      var url = URL.createObjectURL(new Blob([data], { type: "application/json" }));
      var a = document.createElement("a");
      a.href = url;
      a.download = "tailtriage-report.json";
      document.body.appendChild(a);
      a.click();
      document.body.removeChild(a);
      window.setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
    });
  }
  document.documentElement.setAttribute("data-ready", "1");
})();
