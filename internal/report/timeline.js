// Draws the sandbox report's timeline from the page's JSON block
// (#timeline-data) into <main id="timeline">, as inline SVG. Nothing is
// loaded. Programs read the drawn elements' data-* attributes
// (docs/report.md); the page sets data-rendered="true" on #timeline when
// it is done.
(function () {
  'use strict';

  var SVG = 'http://www.w3.org/2000/svg';
  var root = document.getElementById('timeline');
  var data = JSON.parse(document.getElementById('timeline-data').textContent);

  // Geometry shared by every chart, so that one time is one x everywhere.
  var W = 640;
  var M = { l: 86, r: 64, t: 14, b: 44 };
  var plotW = W - M.l - M.r;

  function svg(name, attrs, parent) {
    var n = document.createElementNS(SVG, name);
    setAll(n, attrs);
    if (parent) { parent.appendChild(n); }
    return n;
  }

  function html(name, attrs, parent, text) {
    var n = document.createElement(name);
    setAll(n, attrs);
    if (text !== undefined) { n.textContent = text; }
    if (parent) { parent.appendChild(n); }
    return n;
  }

  function setAll(n, attrs) {
    var k;
    for (k in attrs || {}) {
      if (Object.prototype.hasOwnProperty.call(attrs, k) && attrs[k] !== undefined && attrs[k] !== null) {
        n.setAttribute(k, String(attrs[k]));
      }
    }
  }

  function text(parent, x, y, s, attrs) {
    var a = attrs || {};
    a.x = x;
    a.y = y;
    var n = svg('text', a, parent);
    n.textContent = s;
    return n;
  }

  function tip(n, s) {
    svg('title', {}, n).textContent = s;
    return n;
  }

  function secs(t) {
    return t.toFixed(3) + ' s';
  }

  // The time axis shows view: the whole run, from 0 to a round end, or a
  // close-up on what the components did. tick is its round step (at
  // most 8 ticks).
  var tickSteps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600];
  function tickFor(width) {
    var k;
    for (k = 0; k < tickSteps.length; k++) {
      if (width / tickSteps[k] <= 8) { return tickSteps[k]; }
    }
    return tickSteps[tickSteps.length - 1];
  }
  var span = Math.max(data.span, 1);
  var runTick = tickFor(span);
  var runEnd = Math.ceil(span / runTick) * runTick;
  if (runEnd < span + runTick * 0.05) { runEnd += runTick; }
  var views = { run: { x0: 0, x1: runEnd, tick: runTick } };
  (function () {
    var times = [];
    data.runs.forEach(function (run) {
      run.disruptions.concat(run.refusals, run.violations, run.races).forEach(function (e) { times.push(e.t); });
    });
    if (!times.length) { return; }
    var lo = Math.min.apply(null, times), hi = Math.max.apply(null, times);
    var pad = Math.max((hi - lo) * 0.25, 0.3);
    var x0 = Math.max(0, lo - pad), x1 = Math.min(runEnd, hi + pad);
    if (x1 - x0 >= runEnd * 0.6) { return; } // no closer than the whole run
    var tk = tickFor(x1 - x0);
    views.closeup = { x0: Math.floor(x0 / tk) * tk, x1: Math.ceil(x1 / tk) * tk, tick: tk };
  }());
  var view = views.run;

  function x(t) {
    return M.l + ((t - view.x0) / (view.x1 - view.x0)) * plotW;
  }

  function xAxis(g, y0) {
    var a = svg('g', { 'class': 'axis x-axis' }, g);
    svg('line', { x1: M.l, x2: M.l + plotW, y1: y0, y2: y0 }, a);
    var n;
    var digits = view.tick < 0.1 ? 2 : (view.tick < 1 ? 1 : 0);
    for (n = Math.ceil(view.x0 / view.tick - 1e-9); n * view.tick <= view.x1 + 1e-9; n++) {
      var t = n * view.tick;
      svg('line', { x1: x(t), x2: x(t), y1: y0, y2: y0 + 4 }, a);
      text(a, x(t), y0 + 16, t.toFixed(digits), { 'text-anchor': 'middle' });
    }
    text(a, M.l + plotW / 2, y0 + 33, "seconds since the scenario's first step", { 'text-anchor': 'middle', 'class': 'axis-title' });
  }

  // clip returns a group whose drawing stays inside the plot area, from
  // top to bottom (and the marks' overhang), so that a close-up cuts what
  // lies outside it.
  var clips = 0;
  function clip(s, top, bottom) {
    var id = 'plot-clip-' + (++clips);
    var c = svg('clipPath', { id: id }, svg('defs', {}, s));
    svg('rect', { x: M.l - 7, y: top - 10, width: plotW + 9, height: bottom - top + 20 }, c);
    return svg('g', { 'clip-path': 'url(#' + id + ')' }, s);
  }

  function find(list, pred) {
    var j;
    for (j = 0; j < list.length; j++) {
      if (pred(list[j])) { return list[j]; }
    }
    return null;
  }

  // The healthy count of a series at t: its last point at or before t.
  function valueAt(points, t) {
    var v = points.length ? points[0].healthy : 0;
    var j;
    for (j = 0; j < points.length && points[j].t <= t; j++) {
      if (!points[j].gone) { v = points[j].healthy; }
    }
    return v;
  }

  function marker(g, action, component, cx, cy, r) {
    var cls = 'c-' + (['scheduler', 'descheduler'].indexOf(component) >= 0 ? component : 'other');
    if (action === 'evict') {
      return svg('path', { 'class': cls, d: 'M' + cx + ' ' + (cy - r - 1) + 'L' + (cx + r + 1) + ' ' + cy + 'L' + cx + ' ' + (cy + r + 1) + 'L' + (cx - r - 1) + ' ' + cy + 'Z' }, g);
    }
    return svg('circle', { 'class': cls, cx: cx, cy: cy, r: r }, g);
  }

  function cross(g, cx, cy, by) {
    var d = 'M' + (cx - 4) + ' ' + (cy - 5) + 'L' + (cx + 4) + ' ' + (cy + 5) + 'M' + (cx + 4) + ' ' + (cy - 5) + 'L' + (cx - 4) + ' ' + (cy + 5);
    return svg('path', { 'class': 'refusal by-' + by, d: d }, g);
  }

  function figure(parent, attrs, mode, caption) {
    var f = html('figure', attrs, parent);
    var c = html('figcaption', {}, f);
    html('span', { 'class': 'mode' }, c, mode);
    if (caption) {
      c.appendChild(document.createTextNode(' '));
      html('span', caption.attrs, c, caption.text);
    }
    return f;
  }

  // What the components did: a lane per component, each disruption and
  // each refusal at its time, the steps' beginnings above.
  function activityRow(into) {
    var order = ['scheduler', 'descheduler'];
    data.runs.forEach(function (run) {
      run.disruptions.concat(run.refusals).forEach(function (e) {
        if (order.indexOf(e.component) < 0) { order.push(e.component); }
      });
    });
    var laneH = 26;
    var top = M.t + 18;
    var h = top + order.length * laneH + M.b;
    var row = html('section', { 'class': 'row activity' }, into);
    html('h2', {}, row, 'Disruptions and refusals');
    var grid = html('div', { 'class': 'grid' }, row);
    data.runs.forEach(function (run) {
      var f = figure(grid, { 'class': 'chart activity', 'data-activity': '', 'data-mode': run.mode }, run.name,
        { attrs: { 'class': 'cell' }, text: run.disruptions.length + ' disruption' + (run.disruptions.length === 1 ? '' : 's') + ', ' +
          run.refusals.length + ' refusal' + (run.refusals.length === 1 ? '' : 's') });
      var s = svg('svg', { 'class': 'plot', viewBox: '0 0 ' + W + ' ' + h, role: 'img' }, f);
      var laneY = function (c) { return top + order.indexOf(c) * laneH + laneH / 2; };
      var marks = clip(s, M.t, top + order.length * laneH);
      order.forEach(function (c) {
        svg('line', { 'class': 'lane-line', x1: M.l, x2: M.l + plotW, y1: laneY(c), y2: laneY(c) }, s);
        text(s, M.l - 8, laneY(c) + 4, c, { 'text-anchor': 'end', 'class': 'lane-label' });
      });
      var labelEnd = -1;
      run.steps.forEach(function (st) {
        var g = tip(svg('g', { 'class': 'step', 'data-step': st.number, 'data-t': st.t }, marks),
          'step ' + st.number + '/' + run.steps.length + ' ' + st.label + ': ' + secs(st.t) + ' to ' + secs(st.end));
        svg('line', { 'class': 'step-line', x1: x(st.t), x2: x(st.t), y1: M.t + 4, y2: top + order.length * laneH }, g);
        // A number only where it does not cover the one before; the
        // line's tooltip names every step.
        if (x(st.t) >= labelEnd && st.t >= view.x0 && st.t <= view.x1) {
          text(g, x(st.t) + 2, M.t + 8, String(st.number), { 'class': 'step-label' });
          labelEnd = x(st.t) + 4 + 7 * String(st.number).length;
        }
      });
      text(s, M.l - 8, M.t + 8, 'step', { 'text-anchor': 'end', 'class': 'lane-label' });
      run.disruptions.forEach(function (d) {
        var g = tip(svg('g', { 'class': 'disruption', 'data-disruption': '', 'data-t': d.t, 'data-component': d.component, 'data-action': d.action, 'data-pod': d.pod }, marks),
          d.component + ' ' + d.action + ' ' + d.pod + ' at ' + secs(d.t) + (d.wasHealthy ? ' (it was healthy)' : ' (it was not healthy)'));
        marker(g, d.action, d.component, x(d.t), laneY(d.component), 5.5);
      });
      run.refusals.forEach(function (r) {
        var g = tip(svg('g', { 'class': 'refusal', 'data-refusal': '', 'data-t': r.t, 'data-by': r.by, 'data-component': r.component, 'data-pod': r.pod }, marks),
          'refused by ' + (r.by === 'apiserver' ? 'the API server' : 'budgetguard') + ' at ' + secs(r.t) + ': ' + r.label + ' ' + r.pod + (r.message ? ': ' + r.message : ''));
        cross(g, x(r.t), laneY(r.component), r.by);
      });
      xAxis(s, top + order.length * laneH + 4);
    });
    // What the numbered lines are: the steps of the first run (every run
    // runs the same steps).
    var first = data.runs[0];
    if (first.steps.length) {
      html('p', { 'class': 'steps' }, row, 'Steps: ' + first.steps.map(function (st) {
        return st.number + ' ' + st.label;
      }).join(' \u00b7 '));
    }
  }

  // One budget: its healthy count in each run, on the same axes.
  function budgetRow(into, b) {
    var yMax = 1;
    data.runs.forEach(function (run) {
      var ser = find(run.budgets, function (x) { return x.key === b.key; });
      (ser ? ser.points : []).forEach(function (p) { yMax = Math.max(yMax, p.healthy, p.desired); });
    });
    var yTop = yMax + 1;
    var yStep = Math.max(1, Math.ceil(yTop / 6));
    yTop = Math.ceil(yTop / yStep) * yStep;
    var plotH = 150;
    var h = M.t + plotH + M.b;
    var y = function (v) { return M.t + plotH - (v / yTop) * plotH; };

    var row = html('section', { 'class': 'row budget', 'data-budget-row': b.key }, into);
    html('h2', {}, row, b.label);
    var grid = html('div', { 'class': 'grid' }, row);
    data.runs.forEach(function (run) {
      var ser = find(run.budgets, function (x) { return x.key === b.key; });
      var violations = run.violations.filter(function (v) { return v.budget === b.key; });
      var races = run.races.filter(function (v) { return v.budget === b.key; });
      if (!ser) {
        var missing = figure(grid, { 'class': 'chart', 'data-budget': b.key, 'data-mode': run.mode, 'data-missing': 'true' }, run.name,
          { attrs: { 'class': 'cell' }, text: 'no such budget in this run' });
        html('p', { 'class': 'empty' }, missing, 'The auditor saw no ' + b.label + ' in this run.');
        return;
      }
      var broken = violations.length > 0;
      var f = figure(grid, {
        'class': 'chart' + (broken ? ' broken' : ''), 'data-budget': b.key, 'data-mode': run.mode,
        'data-desired': ser.desired, 'data-lowest': ser.lowest, 'data-met': ser.met, 'data-broken': broken
      }, run.name, { attrs: { 'class': 'cell' + (broken ? ' broken' : '') }, text: 'lowest healthy / desired: ' + ser.cell });
      var s = svg('svg', { 'class': 'plot', viewBox: '0 0 ' + W + ' ' + h, role: 'img' }, f);

      // Axes and grid.
      var v;
      var ya = svg('g', { 'class': 'axis y-axis' }, s);
      for (v = 0; v <= yTop; v += yStep) {
        svg('line', { 'class': 'gridline', x1: M.l, x2: M.l + plotW, y1: y(v), y2: y(v) }, s);
        text(ya, M.l - 6, y(v) + 4, String(v), { 'text-anchor': 'end' });
      }
      svg('line', { x1: M.l, x2: M.l, y1: M.t, y2: M.t + plotH }, ya);
      text(ya, 0, 0, 'healthy pods', { 'class': 'axis-title', 'text-anchor': 'middle', transform: 'translate(' + (M.l - 34) + ' ' + (M.t + plotH / 2) + ') rotate(-90)' });
      xAxis(s, M.t + plotH);
      var plot = clip(s, M.t, M.t + plotH);

      // The segments: each point holds until the next one, the last
      // until the run's end.
      var pts = ser.points;
      var shade = svg('g', { 'class': 'shortfall' }, plot);
      var dMet = '', dUnmet = '', dDesired = '';
      var j, prevY = null, prevD = null;
      for (j = 0; j < pts.length; j++) {
        var p = pts[j];
        if (p.gone) { prevY = null; prevD = null; continue; }
        var x0 = x(p.t), x1 = x(j + 1 < pts.length ? pts[j + 1].t : Math.max(run.end, p.t));
        var seg = 'M' + x0 + ' ' + (prevY === null ? y(p.healthy) : prevY) + 'V' + y(p.healthy) + 'H' + x1;
        if (p.met) { dMet += seg; } else { dUnmet += seg; }
        dDesired += 'M' + x0 + ' ' + (prevD === null ? y(p.desired) : prevD) + 'V' + y(p.desired) + 'H' + x1;
        if (p.met && p.healthy < p.desired) {
          tip(svg('rect', { 'class': 'short', x: x0, y: y(p.desired), width: Math.max(x1 - x0, 1), height: y(p.healthy) - y(p.desired) }, shade),
            p.healthy + ' healthy, ' + p.desired + ' desired from ' + secs(p.t));
        }
        prevY = y(p.healthy);
        prevD = y(p.desired);
      }
      svg('path', { 'class': 'desired', d: dDesired || 'M0 0' }, plot);
      svg('path', { 'class': 'healthy unmet', d: dUnmet || 'M0 0' }, plot);
      svg('path', { 'class': 'healthy', d: dMet || 'M0 0' }, plot);
      var last = pts.length ? pts[pts.length - 1] : null;
      if (last) {
        text(s, M.l + plotW + 6, y(last.desired) + 4, 'desired ' + last.desired, { 'class': 'desired-label' });
      }

      // The disruptions of the budget's pods, on the line.
      run.disruptions.forEach(function (d) {
        if (d.budgets.indexOf(b.key) < 0) { return; }
        var cy = y(valueAt(pts, d.t));
        var g = tip(svg('g', { 'class': 'disruption', 'data-disruption': '', 'data-t': d.t, 'data-component': d.component, 'data-action': d.action, 'data-pod': d.pod }, plot),
          d.component + ' ' + d.action + ' ' + d.pod + ' at ' + secs(d.t));
        var cls = 'disruption-stem c-' + (['scheduler', 'descheduler'].indexOf(d.component) >= 0 ? d.component : 'other');
        svg('line', { 'class': cls, x1: x(d.t), x2: x(d.t), y1: cy, y2: M.t + plotH }, g);
        marker(g, d.action, d.component, x(d.t), cy, 4.5);
      });

      // The points of the line, with their counts.
      var dots = svg('g', { 'class': 'points' }, plot);
      pts.forEach(function (p) {
        var c = svg('circle', {
          'class': 'point' + (p.met ? '' : ' unmet'), cx: x(p.t), cy: y(p.healthy), r: p.gone ? 0 : 2.5,
          'data-t': p.t, 'data-healthy': p.healthy, 'data-desired': p.desired, 'data-met': p.met, 'data-gone': p.gone ? 'true' : null
        }, dots);
        tip(c, secs(p.t) + ': ' + (p.gone ? 'budget deleted' : p.healthy + ' healthy, ' + p.desired + ' desired' + (p.met ? '' : ' (not met yet)')));
      });

      // What the audit charged, highlighted.
      var charge = function (list, kind) {
        list.forEach(function (v) {
          var g = svg('g', { 'class': kind, 'data-t': v.t, 'data-budget': v.budget, 'data-pod': v.pod, 'data-component': v.component, 'data-action': v.action, 'data-healthy': v.healthy, 'data-desired': v.desired }, plot);
          g.setAttribute('data-' + kind, '');
          tip(g, kind + ': ' + v.component + ' ' + v.action + ' ' + v.pod + ' at ' + secs(v.t) + ' left ' + b.label + ' at ' + v.healthy + ' healthy of ' + v.desired + ' desired' +
            (kind === 'race' ? ' (known before the informers\u2019 lag: ' + v.knownHealthy + ' of ' + v.knownDesired + ')' : ''));
          svg('circle', { 'class': kind + '-ring', cx: x(v.t), cy: y(v.healthy), r: 9 }, g);
          if (kind === 'violation') {
            var right = x(v.t) > M.l + plotW * 0.6;
            var below = y(v.healthy) + 18 <= M.t + plotH - 4;
            text(g, x(v.t) + (right ? -12 : 12), y(v.healthy) + (below ? 18 : -12), 'violation: ' + v.component + ' ' + v.action,
              { 'class': 'violation-label', 'text-anchor': right ? 'end' : 'start' });
          }
        });
      };
      charge(races, 'race');
      charge(violations, 'violation');
    });
  }

  // The toolbar chooses the view; the charts are drawn again in it.
  var charts = null;
  var buttons = {};
  function render(name) {
    view = views[name];
    root.setAttribute('data-view', name);
    Object.keys(buttons).forEach(function (k) { buttons[k].setAttribute('aria-pressed', String(k === name)); });
    if (charts) { root.removeChild(charts); }
    charts = html('div', { 'class': 'charts' }, root);
    if (!data.runs.length) {
      html('p', { 'class': 'empty' }, charts, 'The report holds no run.');
      return;
    }
    activityRow(charts);
    if (!data.budgets.length) {
      html('p', { 'class': 'empty' }, charts, 'The auditor saw no budget in this scenario.');
    }
    data.budgets.forEach(function (b) { budgetRow(charts, b); });
  }

  root.style.setProperty('--runs', String(Math.max(data.runs.length, 1)));
  if (views.closeup) {
    var bar = html('div', { 'class': 'toolbar', role: 'group', 'aria-label': 'time axis' }, root, 'Time axis: ');
    var range = function (v) {
      var digits = v.tick < 0.1 ? 2 : (v.tick < 1 ? 1 : 0);
      return v.x0.toFixed(digits) + '\u2013' + v.x1.toFixed(digits) + ' s';
    };
    buttons.run = html('button', { type: 'button', 'data-view': 'run' }, bar, 'the whole run (' + range(views.run) + ')');
    buttons.closeup = html('button', { type: 'button', 'data-view': 'closeup' }, bar, 'close-up on the disruptions and refusals (' + range(views.closeup) + ')');
    Object.keys(buttons).forEach(function (k) {
      buttons[k].addEventListener('click', function () { render(k); });
    });
  }
  render(views.closeup && window.location.hash === '#closeup' ? 'closeup' : 'run');
  root.setAttribute('data-rendered', 'true');
}());
