// rlvitals pages: hover values, zoom and log scale on plots; sortable tables.
// Inlined into each page and allowed by its Content-Security-Policy hash; it makes no request.
// Plots (svg.plot) carry their data: data-frame="left top w h x0 x1 y0 y1" on the plot, and
// each drawn element its data coordinates (data-x, data-y, data-lo, data-hi, data-x0, data-yv).
(function () {
  "use strict";
  var NS = null; // the SVG namespace, read from the page's first plot (no URL in the page)

  function nums(s) {
    s = (s || "").trim();
    return s ? s.split(/\s+/).map(Number) : [];
  }

  function niceTicks(lo, hi, n) {
    var raw = hi / n - lo / n; // never overflows
    if (!(raw > 0) || !isFinite(raw)) return [lo];
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; })
      .filter(function (s) { return s >= raw; })[0];
    var out = [];
    for (var k = Math.ceil(lo / step); k <= Math.floor(hi / step) && out.length < 2 * n + 3; k++) {
      out.push(k * step);
    }
    return out;
  }

  // Ticks of a log axis: powers of ten, else 1-2-5 steps, else round values (narrow ranges).
  function logTicks(lo, hi) {
    var a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    var out = [], m = [[1], [1, 2, 5], [1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9]];
    for (var pass = 0; pass < m.length && out.length < 3; pass++) {
      out = [];
      for (var k = a; k <= b; k++) {
        m[pass].forEach(function (f) {
          var t = Number((f * Math.pow(10, k)).toPrecision(6));
          if (t >= lo && t <= hi) out.push(t);
        });
      }
    }
    if (out.length < 2) out = niceTicks(lo, hi, 4).filter(function (t) { return t > 0; });
    var step = Math.ceil(out.length / 8);
    return out.filter(function (_, i) { return i % step === 0; });
  }

  function clamp(x) {
    return Math.max(-Number.MAX_VALUE, Math.min(Number.MAX_VALUE, x));
  }

  function label(v) {
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1e4 || a < 1e-3) return v.toExponential(1);
    return String(Number(v.toPrecision(4)));
  }

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  var tip = null; // one tooltip for every plot
  function sharedTip() {
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "plot-tip";
      tip.hidden = true;
      document.body.appendChild(tip);
    }
    return tip;
  }

  function Plot(svg) {
    NS = NS || svg.namespaceURI;
    var f = nums(svg.getAttribute("data-frame"));
    this.svg = svg;
    this.left = f[0]; this.top = f[1]; this.w = f[2]; this.h = f[3];
    this.home = { x0: f[4], x1: f[5], y0: f[6], y1: f[7] };
    this.view = { x0: f[4], x1: f[5], y0: f[6], y1: f[7] };
    this.log = false;
    this.lines = [];
    var self = this;
    svg.querySelectorAll("[data-y]").forEach(function (e) {
      if (e.hasAttribute("data-series")) {
        self.lines.push({ e: e, x: nums(e.getAttribute("data-x")), y: nums(e.getAttribute("data-y")),
                          name: e.getAttribute("data-series") });
      }
    });
    this.positive = this.lines.length > 0 && this.lines.every(function (s) {
      return s.y.every(function (v) { return v > 0; });
    }) && !svg.querySelector("[data-lo]");
    this.build();
  }

  // Scales work on halves (as svg.py does), so axes spanning +-1e308 never overflow.
  Plot.prototype.sx = function (x) {
    var v = this.view;
    return this.left + (x * 0.5 - v.x0 * 0.5) / (v.x1 * 0.5 - v.x0 * 0.5) * this.w;
  };
  Plot.prototype.ty = function (y) { return this.log ? Math.log10(y) : y; };
  Plot.prototype.sy = function (y) {
    var v = this.view;
    var a = this.ty(v.y1) * 0.5, b = this.ty(v.y0) * 0.5;
    return this.top + (a - this.ty(y) * 0.5) / (a - b) * this.h;
  };
  Plot.prototype.ix = function (px) {
    var v = this.view;
    return v.x0 + (px - this.left) / this.w * 2 * (v.x1 * 0.5 - v.x0 * 0.5);
  };

  Plot.prototype.build = function () {
    var svg = this.svg, self = this;
    var id = "clip" + Math.random().toString(36).slice(2);
    var clip = el("clipPath", { id: id }, svg);
    el("rect", { x: this.left, y: this.top, width: this.w, height: this.h }, clip);
    svg.querySelectorAll("[data-x],[data-x0],[data-yv]").forEach(function (e) {
      e.setAttribute("clip-path", "url(#" + id + ")");
    });
    this.guide = el("line", { class: "guide", y1: this.top, y2: this.top + this.h,
                              visibility: "hidden" }, svg);
    this.band = el("rect", { class: "band", y: this.top, height: this.h, width: 0,
                             visibility: "hidden" }, svg);
    var x = this.left + this.w;
    this.buttons = [];
    if (this.positive) this.button("log y", x, function () { self.log = !self.log; self.fit(); });
    this.button("reset", x - (this.positive ? 44 : 0), function () { self.reset(); });
    this.tip = sharedTip();
    svg.addEventListener("mousemove", function (ev) { self.move(ev); });
    svg.addEventListener("mouseleave", function () { self.hide(); self.drag = null; });
    svg.addEventListener("mousedown", function (ev) { self.down(ev); });
    svg.addEventListener("mouseup", function (ev) { self.up(ev); });
    svg.addEventListener("dblclick", function () { self.reset(); });
  };

  Plot.prototype.button = function (text, right, act) {
    var t = el("text", { x: right, y: 14, class: "ctl", "text-anchor": "end",
                         role: "button", tabindex: "0" }, this.svg);
    t.textContent = text;
    t.addEventListener("click", function (ev) { ev.stopPropagation(); act(); });
    t.addEventListener("mousedown", function (ev) { ev.stopPropagation(); });
    t.addEventListener("keydown", function (ev) { if (ev.key === "Enter") act(); });
    this.buttons.push(t);
  };

  Plot.prototype.point = function (ev) {
    var p = this.svg.createSVGPoint();
    p.x = ev.clientX; p.y = ev.clientY;
    var m = this.svg.getScreenCTM();
    return m ? p.matrixTransform(m.inverse()) : null;
  };

  Plot.prototype.inside = function (p) {
    return p && p.x >= this.left && p.x <= this.left + this.w && p.y >= this.top &&
      p.y <= this.top + this.h;
  };

  Plot.prototype.down = function (ev) {
    var p = this.point(ev);
    if (!this.inside(p)) return;
    ev.preventDefault();
    this.drag = p.x;
  };

  Plot.prototype.up = function (ev) {
    var p = this.point(ev);
    var start = this.drag;
    this.drag = null;
    this.band.setAttribute("visibility", "hidden");
    if (start == null || !p) return;
    var a = Math.max(this.left, Math.min(start, p.x));
    var b = Math.min(this.left + this.w, Math.max(start, p.x));
    if (b - a < 5) return;
    var x0 = this.ix(a), x1 = this.ix(b);
    this.view.x0 = x0; this.view.x1 = x1;
    this.fit();
  };

  Plot.prototype.reset = function () {
    this.view = { x0: this.home.x0, x1: this.home.x1, y0: this.home.y0, y1: this.home.y1 };
    this.log = false;
    this.fit();
  };

  // The y range of what is visible (every line's points inside the x range).
  Plot.prototype.fit = function () {
    var v = this.view, lo = Infinity, hi = -Infinity, self = this;
    var zoomed = v.x0 !== this.home.x0 || v.x1 !== this.home.x1;
    if (zoomed || this.log) {
      this.lines.forEach(function (s) {
        for (var i = 0; i < s.x.length; i++) {
          if (s.x[i] >= v.x0 && s.x[i] <= v.x1 && isFinite(s.y[i]) && (!self.log || s.y[i] > 0)) {
            lo = Math.min(lo, s.y[i]); hi = Math.max(hi, s.y[i]);
          }
        }
      });
    }
    if (!isFinite(lo)) { v.y0 = this.home.y0; v.y1 = this.home.y1; if (this.log && v.y0 <= 0) this.log = false; }
    else if (this.log) {
      var r = Math.max(hi / lo, 1.0001);
      v.y0 = lo / Math.pow(r, 0.06); v.y1 = hi * Math.pow(r, 0.06);
    } else {
      var pad = (hi * 0.5 - lo * 0.5) * 0.12 || Math.abs(hi) * 0.5 || 0.5;
      v.y0 = clamp(lo - pad); v.y1 = clamp(hi + pad);
    }
    this.draw();
  };

  Plot.prototype.draw = function () {
    var self = this, svg = this.svg;
    svg.querySelectorAll("[data-series]").forEach(function (e) {
      var x = nums(e.getAttribute("data-x")), y = nums(e.getAttribute("data-y"));
      if (e.tagName === "circle") {
        e.setAttribute("cx", self.sx(x[0]).toFixed(1));
        e.setAttribute("cy", self.sy(y[0]).toFixed(1));
        return;
      }
      var pts = [];
      for (var i = 0; i < x.length; i++) {
        if (!self.log || y[i] > 0) pts.push(self.sx(x[i]).toFixed(1) + "," + self.sy(y[i]).toFixed(1));
      }
      e.setAttribute("points", pts.join(" "));
    });
    svg.querySelectorAll("circle.mark[data-x]").forEach(function (e) {
      e.setAttribute("cx", self.sx(+e.getAttribute("data-x")).toFixed(1));
      e.setAttribute("cy", self.sy(+e.getAttribute("data-y")).toFixed(1));
    });
    svg.querySelectorAll("[data-lo]").forEach(function (e) {
      var x = nums(e.getAttribute("data-x")), lo = nums(e.getAttribute("data-lo")),
          hi = nums(e.getAttribute("data-hi")), up = [], dn = [];
      for (var i = 0; i < x.length; i++) {
        up.push(self.sx(x[i]).toFixed(1) + "," + self.sy(hi[i]).toFixed(1));
        dn.unshift(self.sx(x[i]).toFixed(1) + "," + self.sy(lo[i]).toFixed(1));
      }
      e.setAttribute("points", up.concat(dn).join(" "));
    });
    svg.querySelectorAll("[data-x0]").forEach(function (e) {
      var a = self.sx(+e.getAttribute("data-x0")), b = self.sx(+e.getAttribute("data-x1"));
      e.setAttribute("x", a.toFixed(1));
      e.setAttribute("width", Math.max(b - a, 1.5).toFixed(1));
    });
    svg.querySelectorAll("line[data-x]").forEach(function (e) {
      var x = self.sx(+e.getAttribute("data-x")).toFixed(1);
      e.setAttribute("x1", x); e.setAttribute("x2", x);
    });
    svg.querySelectorAll("[data-yv]").forEach(function (e) {
      var yv = +e.getAttribute("data-yv");
      var show = !self.log || yv > 0;
      e.setAttribute("visibility", show ? "visible" : "hidden");
      if (!show) return;
      var y = self.sy(yv);
      if (e.tagName === "line") { e.setAttribute("y1", y.toFixed(1)); e.setAttribute("y2", y.toFixed(1)); }
      else e.setAttribute("y", (y - 3).toFixed(1));
    });
    this.axes();
  };

  Plot.prototype.axes = function () {
    var svg = this.svg, v = this.view, self = this;
    var g = svg.querySelector("g.axes");
    if (!g) return;
    while (g.firstChild) g.removeChild(g.firstChild);
    var yt = this.log ? logTicks(v.y0, v.y1) : niceTicks(v.y0, v.y1, 4);
    yt.forEach(function (t) {
      var y = self.sy(t);
      el("line", { x1: self.left, x2: self.left + self.w, y1: y.toFixed(1), y2: y.toFixed(1), class: "grid" }, g);
      el("text", { x: self.left - 4, y: (y + 3).toFixed(1), class: "ytick" }, g).textContent = label(t);
    });
    var h = +svg.getAttribute("height") || svg.viewBox.baseVal.height;
    niceTicks(v.x0, v.x1, 5).forEach(function (t) {
      el("text", { x: self.sx(t).toFixed(1), y: h - 8, class: "xtick" }, g).textContent = label(t);
    });
  };

  Plot.prototype.move = function (ev) {
    var p = this.point(ev);
    if (this.drag != null && p) {
      var a = Math.max(this.left, Math.min(this.drag, p.x));
      var b = Math.min(this.left + this.w, Math.max(this.drag, p.x));
      this.band.setAttribute("x", a.toFixed(1));
      this.band.setAttribute("width", (b - a).toFixed(1));
      this.band.setAttribute("visibility", "visible");
    }
    if (!this.inside(p) || !this.lines.length) { this.hide(); return; }
    var x = this.ix(p.x), best = null, rows = [];
    this.lines.forEach(function (s) {
      var lo = 0, hi = s.x.length - 1;
      while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (s.x[mid] < x) lo = mid; else hi = mid; }
      var i = Math.abs(s.x[lo] - x) <= Math.abs(s.x[hi] - x) ? lo : hi;
      if (best === null || Math.abs(s.x[i] - x) < Math.abs(best - x)) best = s.x[i];
      rows.push([s, i]);
    });
    var lines = ["step " + label(best)];
    rows.forEach(function (r) {
      var s = r[0], i = r[1];
      if (s.x[i] === best) lines.push(s.name + ": " + Number(s.y[i].toPrecision(5)));
    });
    var gx = this.sx(best).toFixed(1);
    this.guide.setAttribute("x1", gx); this.guide.setAttribute("x2", gx);
    this.guide.setAttribute("visibility", "visible");
    this.tip.textContent = lines.join("\n");
    this.tip.hidden = false;
    var left = ev.pageX + 12, vw = document.documentElement.clientWidth;
    this.tip.style.left = Math.max(0, Math.min(left, window.scrollX + vw - this.tip.offsetWidth - 4)) + "px";
    this.tip.style.top = ev.pageY + 12 + "px";
  };

  Plot.prototype.hide = function () {
    this.tip.hidden = true;
    this.guide.setAttribute("visibility", "hidden");
  };

  // Sortable tables: click a header; cells sort by data-v (numbers) else their text; a cell
  // without a value ("-") goes last either way.
  function sortable(table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.setAttribute("tabindex", "0");
      th.setAttribute("role", "button");
      function go() {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        function key(row) {
          var c = row.cells[col];
          if (!c) return null;
          if (c.hasAttribute("data-v")) {
            var v = c.getAttribute("data-v");
            return v === "" ? null : Number(v);
          }
          var t = c.textContent.trim();
          return t === "-" || t === "" ? null : t.toLowerCase();
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          if (x === null || y === null) return (x === null) - (y === null);
          return (x < y ? -1 : x > y ? 1 : 0) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") go(); });
    });
  }

  function start() {
    document.querySelectorAll("svg.plot[data-frame]").forEach(function (svg) { new Plot(svg); });
    document.querySelectorAll("table.sortable").forEach(sortable);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
