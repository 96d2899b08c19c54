// The schedule lab's page: the controls, the drawing and the check against brigade's C++ output.
//
// The page starts from the configuration `brigade schedule --html` was given (#lab-setup) and the timeline
// the C++ simulator computed for it (#lab-reference). Every control change regenerates the lists
// (ScheduleModel), simulates them (ScheduleSimulator) and redraws. What a test reads back from the DOM:
//   #bubble, #step-time            data-value: the figure as a number
//   #timeline rect.action          one per compute action: data-stage, data-label, data-start, data-end
//   #self-check                    data-agrees: "true" when the page reproduces the C++ timeline
"use strict";

const ScheduleLab = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = { F: "#4c78a8", B: "#54a24b", Bi: "#72b7b2", Bw: "#f58518", R: "#b279a2", step: "#9d9d9d" };
  const G = { left: 56, plot: 960, right: 210, top: 16, lane: 30, band: 22, pitch: 70 };
  const setup = JSON.parse(document.getElementById("lab-setup").textContent);
  const reference = JSON.parse(document.getElementById("lab-reference").textContent);
  const state = {
    schedule: setup.schedule, recompute: setup.recompute, stages: setup.stages,
    microbatches: setup.microbatches, virtual: setup.virtual_chunks, costs: { ...setup.costs },
    factors: setup.stage_factors.slice(), memory: setup.memory,
  };
  const $ = (id) => document.getElementById(id);
  const fmt = (x) => String(Math.round(x * 1000) / 1000);
  const percent = (x) => (100 * x).toFixed(1) + "%";

  // ---- controls ----
  function slider(parent, id, name, min, max, step, value, onInput) {
    const label = document.createElement("label");
    const input = Object.assign(document.createElement("input"),
                                { type: "range", id, min, max: Math.max(max, value), step, value });
    const out = Object.assign(document.createElement("output"), { id: id + "-value", value: fmt(value) });
    label.append(Object.assign(document.createElement("span"), { className: "name", textContent: name }),
                 input, out);
    input.addEventListener("input", () => {
      out.value = fmt(Number(input.value));
      onInput(Number(input.value));
      render();
    });
    parent.append(label);
    return input;
  }
  function select(parent, id, name, options, value, onChange) {
    const label = document.createElement("label");
    const input = Object.assign(document.createElement("select"), { id });
    for (const o of options) input.append(Object.assign(document.createElement("option"), { value: o, textContent: o }));
    input.value = value;
    input.addEventListener("change", () => {
      onChange(input.value);
      render();
    });
    label.append(Object.assign(document.createElement("span"), { className: "name", textContent: name }), input);
    parent.append(label);
  }
  function buildControls() {
    const form = $("controls"), c = state.costs;
    const names = ScheduleModel.generated().includes(state.schedule)
      ? ScheduleModel.generated() : [state.schedule, ...ScheduleModel.generated()];
    select(form, "schedule", "schedule", names, state.schedule, (v) => (state.schedule = v));
    select(form, "recompute", "recompute", ["never", "always", "except-last"], state.recompute,
           (v) => (state.recompute = v));
    slider(form, "stages", "stages S", 1, 8, 1, state.stages, (v) => {
      state.stages = v;
      while (state.factors.length < v) state.factors.push(1);
      state.factors.length = v;
      buildFactors();
    });
    slider(form, "microbatches", "microbatches M", 1, 32, 1, state.microbatches, (v) => (state.microbatches = v));
    slider(form, "virtual", "chunks v", 1, 4, 1, state.virtual, (v) => (state.virtual = v));
    slider(form, "cost-f", "forward f", 0, 4, 0.25, c.forward, (v) => (c.forward = v));
    slider(form, "cost-b", "backward b", 0, 8, 0.25, c.backward, (v) => (c.backward = v));
    slider(form, "cost-w", "of which Bw w", 0, 4, 0.25, c.weight, (v) => (c.weight = v));
    slider(form, "cost-t", "transfer t", 0, 2, 0.05, c.transfer, (v) => (c.transfer = v));
    slider(form, "cost-step", "optimizer step", 0, 4, 0.25, c.step, (v) => (c.step = v));
    buildFactors();
  }
  function buildFactors() {  // one slider per stage: its costs are multiplied by the factor
    const box = $("stage-factors");
    box.replaceChildren();
    state.factors.forEach((f, s) => slider(box, "factor-" + s, `s${s} cost \u00d7`, 0, 4, 0.25, f,
                                           (v) => (state.factors[s] = v)));
  }

  // ---- drawing ----
  function el(name, attributes, parent, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.append(node);
    return node;
  }
  function tickStep(span, target) {  // svg_timeline.cpp: 1, 2 or 5 times a power of ten
    const raw = span / target, magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * magnitude >= raw) return m * magnitude;
    return 10 * magnitude;
  }
  function drawLane(svg, tl, s, x, peakScale) {
    const y = G.top + s * G.pitch, stats = tl.stage_stats[s], v = tl.virtual_chunks;
    el("text", { x: 8, y: y + G.lane / 2 + 4 }, svg, "s" + s);
    el("rect", { x: G.left, y, width: G.plot, height: G.lane, fill: "#f2f2f2" }, svg);
    for (const a of tl.actions) {
      if (a.stage !== s || !(a.kind in COLORS)) continue;
      const w = x(a.end) - x(a.start);
      const shade = v > 1 ? 1 - (0.45 * a.chunk) / (v - 1) : 1;
      const r = el("rect", { class: "action", x: x(a.start), y, width: w, height: G.lane, fill: COLORS[a.kind],
                             "fill-opacity": shade, stroke: "white", "data-stage": s, "data-label": a.label,
                             "data-start": a.start, "data-end": a.end }, svg);
      el("title", {}, r, `${a.label} on stage ${s}: ${fmt(a.start)} .. ${fmt(a.end)}`);
      if (w >= 7 * a.label.length + 4) {
        el("text", { x: x(a.start) + w / 2, y: y + G.lane / 2 + 4, "text-anchor": "middle", fill: "white",
                     "font-size": 11, "pointer-events": "none" }, svg, a.label);
      }
    }
    const base = y + G.lane + G.band + 2;  // the memory band: live activations over the step
    const points = stats.memory.map(([t, live], k) => {
      const next = k + 1 < stats.memory.length ? stats.memory[k + 1][0] : tl.step_time;
      const h = peakScale > 0 ? (live / peakScale) * G.band : 0;
      return `${x(t)},${base - h} ${x(next)},${base - h}`;
    });
    el("polyline", { points: `${x(0)},${base} ${points.join(" ")} ${x(tl.step_time)},${base}`,
                     fill: "#e45756", "fill-opacity": 0.25, stroke: "#e45756", class: "memory",
                     "data-stage": s, "data-peak": stats.peak_memory }, svg);
    el("text", { x: G.left + G.plot + 10, y: y + G.lane / 2 + 4, fill: "#444" }, svg,
       `idle ${percent(stats.bubble)}, ${stats.peak_in_flight} in flight`);
    el("text", { x: G.left + G.plot + 10, y: base - 4, fill: "#e45756" }, svg, `memory peak ${fmt(stats.peak_memory)}`);
  }
  function drawMessages(svg, tl, x) {
    for (const a of tl.actions) {
      if (a.arrival === undefined) continue;
      const down = a.peer > a.stage, from = G.top + a.stage * G.pitch, to = G.top + a.peer * G.pitch;
      el("line", { x1: x(a.end), y1: down ? from + G.lane : from, x2: x(a.arrival), y2: down ? to : to + G.lane,
                   stroke: a.kind === "sendF" ? "#1f3b5c" : "#8c2d2d", "stroke-width": 1, opacity: 0.6,
                   class: "message" }, svg);
    }
  }
  function draw(tl) {
    const span = tl.step_time > 0 ? tl.step_time : 1, x = (t) => G.left + (t / span) * G.plot;
    const height = G.top + tl.stages * G.pitch + 30;
    const svg = el("svg", { xmlns: SVG, width: G.left + G.plot + G.right, height });
    const peak = Math.max(0, ...tl.stage_stats.map((st) => st.peak_memory));
    for (let s = 0; s < tl.stages; ++s) drawLane(svg, tl, s, x, peak);
    drawMessages(svg, tl, x);
    const axis = G.top + tl.stages * G.pitch, step = tickStep(span, 10);
    for (let t = 0; t <= span + 1e-9; t += step) {
      el("line", { x1: x(t), y1: axis - 4, x2: x(t), y2: axis, stroke: "#666" }, svg);
      el("text", { x: x(t), y: axis + 14, "text-anchor": "middle", "font-size": 11 }, svg, fmt(t));
    }
    $("timeline").replaceChildren(svg);
  }

  // ---- figures ----
  function showFigures(tl) {
    const set = (id, value, text) => Object.assign($(id), { value: text }).setAttribute("data-value", value);
    set("step-time", tl.step_time, fmt(tl.step_time));
    set("bubble", tl.bubble, percent(tl.bubble));
    const S = tl.stages, M = tl.microbatches, v = tl.virtual_chunks, c = tl.costs;
    const uniform = state.factors.every((f) => f === 1) && c.transfer === 0 && c.step === 0 &&
                    tl.recompute === "never";
    const formula = { gpipe: [(S - 1) / (M + S - 1), "(S-1)/(M+S-1)"], "1f1b": [(S - 1) / (M + S - 1), "(S-1)/(M+S-1)"],
                      interleaved: [(S - 1) / (v * M + S - 1), "(S-1)/(vM+S-1)"] }[tl.schedule];
    $("textbook").textContent = uniform && formula ? `(textbook ${formula[1]} = ${percent(formula[0])})` : "";
    const rows = [["stage", "busy", "idle", "span idle", "in flight", "peak memory"]].concat(
      tl.stage_stats.map((st) => ["s" + st.stage, fmt(st.busy), percent(st.bubble), fmt(st.span - st.busy),
                                  st.peak_in_flight, fmt(st.peak_memory)]));
    $("stats").replaceChildren(...rows.map((row, k) => {
      const tr = document.createElement("tr");
      for (const cell of row) tr.append(Object.assign(document.createElement(k ? "td" : "th"), { textContent: cell }));
      return tr;
    }));
  }

  function timelineFor(s) {
    const sch = ScheduleModel.makeSchedule(s.schedule, s.stages, s.microbatches, s.virtual, s.recompute);
    return ScheduleSimulator.simulate(sch, s.costs, s.factors, s.memory);
  }
  function render() {
    const v = $("virtual");  // only interleaved and looped-bfs take any v; the others hold 1 or 2 chunks
    v.disabled = !ScheduleModel.TAKES_ANY_V[state.schedule];
    v.title = v.disabled ? `${state.schedule} holds its own number of chunks per stage` : "";
    try {
      const tl = timelineFor(state);
      $("error").hidden = true;
      draw(tl);
      showFigures(tl);
    } catch (e) {
      if (!(e instanceof ScheduleModel.ModelError)) throw e;
      Object.assign($("error"), { hidden: false, textContent: e.message });
    }
  }

  // ---- the check against brigade's C++ simulator, for the configuration the page was written with ----
  function differences(ours, theirs) {
    const out = [];
    const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
    if (!close(ours.step_time, theirs.step_time)) out.push(`step time ${ours.step_time} vs ${theirs.step_time}`);
    if (!close(ours.bubble, theirs.bubble)) out.push(`bubble ${ours.bubble} vs ${theirs.bubble}`);
    if (ours.actions.length !== theirs.actions.length) out.push(`${ours.actions.length} vs ${theirs.actions.length} actions`);
    else ours.actions.forEach((a, k) => {
      const b = theirs.actions[k];
      if (a.label !== b.label || !close(a.start, b.start) || !close(a.end, b.end)) {
        out.push(`stage ${a.stage} step ${a.step}: ${a.label} ${a.start}..${a.end} vs ${b.label} ${b.start}..${b.end}`);
      }
    });
    ours.stage_stats.forEach((st, s) => {
      if (!close(st.peak_memory, theirs.stage_stats[s].peak_memory)) out.push(`stage ${s} peak memory`);
    });
    return out;
  }
  function selfCheck() {
    const box = $("self-check");
    if (!ScheduleModel.generated().includes(setup.schedule)) {
      box.className = "drawn";
      box.textContent = `${setup.schedule} is drawn from brigade's output; the page regenerates ` +
                        `${ScheduleModel.generated().join(", ")}.`;
      return;
    }
    const diff = differences(timelineFor({ ...state, ...setupState() }), reference);
    box.dataset.agrees = String(diff.length === 0);
    box.className = diff.length ? "differs" : "agrees";
    box.textContent = diff.length
      ? `This page's simulator DIFFERS from brigade's C++ simulator here: ${diff.slice(0, 5).join("; ")}`
      : `Check: for the configuration it was written with, this page's simulator reproduces brigade's C++ ` +
        `simulator: the same ${reference.actions.length} actions with the same start and end times, step ` +
        `time, bubble and peak memory.`;
  }
  function setupState() {
    return { schedule: setup.schedule, recompute: setup.recompute, stages: setup.stages,
             microbatches: setup.microbatches, virtual: setup.virtual_chunks, costs: { ...setup.costs },
             factors: setup.stage_factors.slice(), memory: setup.memory };
  }

  function legend() {  // the colours of the compute actions and of the messages
    const items = [["F forward", COLORS.F], ["B backward", COLORS.B], ["Bi input grad", COLORS.Bi],
                   ["Bw weight grad", COLORS.Bw], ["R recompute", COLORS.R], ["optimizer step", COLORS.step],
                   ["activation message", "#1f3b5c"], ["gradient message", "#8c2d2d"],
                   ["live activations", "#e45756"]];
    $("legend").replaceChildren(...items.map(([name, color]) => {
      const item = document.createElement("span");
      item.append(Object.assign(document.createElement("span"), { className: "swatch" }), name);
      item.firstChild.style.background = color;
      return item;
    }));
  }

  function start() {
    legend();
    buildControls();
    if (ScheduleModel.generated().includes(state.schedule)) {
      render();
    } else {  // a schedule the page cannot regenerate: draw brigade's timeline as it is
      draw(reference);
      showFigures(reference);
    }
    selfCheck();
  }
  return { start, timelineFor };
})();

ScheduleLab.start();
