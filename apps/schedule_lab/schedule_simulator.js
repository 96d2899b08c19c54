// The schedule lab's simulator: brigade's time and memory model (pipeline/plan/simulator.h), ported from
// C++ line for line; see schedule_model.js for the map of which function follows which C++.
//
// Time model. Every stage runs its list in order on one compute lane, from 0. A compute action starts when
// the stage's previous action has ended and its inputs are there, and lasts its cost. A Send takes no lane
// time; its message reaches the peer `transfer` later. A Recv lasts until its message is there. The step
// time T is when the last stage finishes; a stage's bubble is (T - busy)/T, the total the mean over stages.
// Memory: each stage's activation ledger, walked over the simulated actions.
"use strict";

const ScheduleSimulator = (() => {
  const { check, label, recomputes, isCompute, isTransfer, modelChunk, stageOf, chunkOf, transferTag } =
    ScheduleModel;

  // Progress (dependencies.cpp): what each action waits for, and when it happened.
  const EVENTS = ["forward", "inputGrad", "activationArrived", "gradArrived", "activationReceived",
                  "gradReceived"];
  class Progress {
    constructor(sch) {
      this.sch = sch;
      // Per (event, stage, chunk, microbatch), as dependencies.cpp lays them out: the time, NaN until done.
      this.slots = new Float64Array(EVENTS.length * sch.stages * sch.virtual_chunks * sch.microbatches).fill(NaN);
    }
    index(event, stage, chunk, microbatch) {
      const s = this.sch;
      return ((EVENTS.indexOf(event) * s.stages + stage) * s.virtual_chunks + chunk) * s.microbatches + microbatch;
    }
    need(event, stage, chunk, microbatch, state) {
      const time = this.slots[this.index(event, stage, chunk, microbatch)];
      if (Number.isNaN(time)) return (state.ok = false);
      state.ready = Math.max(state.ready, time);
      return true;
    }
    // The earliest start of `a` on `stage`, or null while a prerequisite has not happened.
    readyAt(stage, a) {
      const s = this.sch, k = modelChunk(s, stage, a.chunk), i = a.microbatch, K = s.stages * s.virtual_chunks;
      const state = { ready: 0, ok: true };
      const sameStage = (m) => stageOf(s, m) === stage;
      switch (a.kind) {
        case "F":
          if (k > 0) {
            if (sameStage(k - 1)) this.need("forward", stage, chunkOf(s, k - 1), i, state);
            else this.need("activationReceived", stage, a.chunk, i, state);
          }
          break;
        case "B":
        case "Bi":
          if (this.need("forward", stage, a.chunk, i, state) && k + 1 < K) {
            if (sameStage(k + 1)) this.need("inputGrad", stage, chunkOf(s, k + 1), i, state);
            else this.need("gradReceived", stage, a.chunk, i, state);
          }
          break;
        case "Bw": this.need("inputGrad", stage, a.chunk, i, state); break;
        case "R":
        case "sendF": this.need("forward", stage, a.chunk, i, state); break;
        case "sendB": this.need("inputGrad", stage, a.chunk, i, state); break;
        case "recvF": this.need("activationArrived", stage, a.chunk, i, state); break;
        case "recvB": this.need("gradArrived", stage, a.chunk, i, state); break;
        default: break;  // the optimizer step needs nothing beyond its place in the list
      }
      return state.ok ? state.ready : null;
    }
    complete(stage, a, end, latency) {
      const mark = (event, st, chunk, time) => (this.slots[this.index(event, st, chunk, a.microbatch)] = time);
      if (a.kind === "F") mark("forward", stage, a.chunk, end);
      else if (a.kind === "B" || a.kind === "Bi") mark("inputGrad", stage, a.chunk, end);
      else if (a.kind === "sendF" || a.kind === "sendB") {
        const tag = transferTag(this.sch, stage, a);
        mark(tag.gradient ? "gradArrived" : "activationArrived", tag.toStage, tag.toChunk, end + latency);
      } else if (a.kind === "recvF") mark("activationReceived", stage, a.chunk, end);
      else if (a.kind === "recvB") mark("gradReceived", stage, a.chunk, end);
    }
  }

  // Costs (simulator.cpp, stage_costs.cpp): the costs of local chunk `chunk` of `stage`. With `factors`
  // (one per stage) the uniform costs are scaled per stage into per-chunk costs, as --stage-costs does.
  function checkCosts(c) {
    check(c.forward >= 0 && c.backward >= 0 && c.weight >= 0 && c.step >= 0 && c.transfer >= 0,
          `costs: every cost must be >= 0 (found f=${c.forward} b=${c.backward} w=${c.weight} ` +
          `step=${c.step} t=${c.transfer})`);
    check(c.weight <= c.backward, `costs: the weight-gradient part w=${c.weight} cannot exceed the whole ` +
                                  `backward b=${c.backward} (Bi costs b - w)`);
  }
  function uniformChunk(c, v) {
    return { forward: c.forward / v, backward: c.backward / v, weight: c.weight / v,
             recompute: (c.recompute < 0 ? c.forward : c.recompute) / v };
  }
  function perChunkCosts(sch, costs, factors) {
    if (!factors) return [];
    check(factors.length === sch.stages, `stage costs: ${factors.length} factors for ${sch.stages} stages`);
    const out = new Array(sch.stages * sch.virtual_chunks);
    for (let s = 0; s < sch.stages; ++s) {
      check(factors[s] >= 0, `stage costs: stage ${s} has factor ${factors[s]} (need >= 0)`);
      for (let c = 0; c < sch.virtual_chunks; ++c) {
        const u = uniformChunk(costs, sch.virtual_chunks), f = factors[s];
        out[modelChunk(sch, s, c)] = { forward: u.forward * f, backward: u.backward * f,
                                       weight: u.weight * f, recompute: u.recompute * f };
      }
    }
    return out;
  }
  function costOf(a, c, costs) {
    switch (a.kind) {
      case "F": return c.forward;
      case "B": return c.backward;
      case "Bi": return c.backward - c.weight;
      case "Bw": return c.weight;
      case "R": return c.recompute;
      case "step": return costs.step;
      default: return 0;
    }
  }

  // The activation ledger (activation_ledger.cpp), uniform sizes: a stage's full activations `full` (each
  // of its v chunks holds full / v), a chunk's input `boundary`.
  function accountMemory(sch, stage, memory, timed, stats) {
    const size = { full: memory.full / sch.virtual_chunks, boundary: memory.boundary };
    const held = new Map();  // "chunk/microbatch" -> None | Boundary | Full | Pending
    let live = 0, inFlight = 0, full = 0;
    stats.memory = [[0, 0]];
    const sample = (time) => {
      if (live !== stats.memory[stats.memory.length - 1][1]) stats.memory.push([time, live]);
    };
    for (const t of timed) {
      const a = t.action;
      if (a.kind === "step" || isTransfer(a.kind)) continue;
      const key = `${a.chunk}/${a.microbatch}`;
      const h = held.get(key) || "None";
      if (a.kind === "F") {  // begin
        const recompute = recomputes(sch.recompute, a.microbatch, sch.microbatches);
        held.set(key, recompute ? "Boundary" : "Full");
        live += recompute ? size.boundary : size.full;
        ++inFlight;
        if (!recompute) ++full;
      } else if (a.kind === "R" && h === "Boundary") {
        held.set(key, "Full");
        live += size.full - size.boundary;
        ++full;
      }
      sample(t.start);
      stats.peak_memory = Math.max(stats.peak_memory, live);
      stats.peak_in_flight = Math.max(stats.peak_in_flight, inFlight);
      stats.peak_full = Math.max(stats.peak_full, full);
      const now = held.get(key) || "None";  // end
      if (a.kind === "Bi" && now === "Full") {
        live += size.full - size.full;  // kept_for_weights() is `full` for uniform sizes
        held.set(key, "Pending");
      }
      const after = held.get(key) || "None";
      if ((a.kind === "B" || a.kind === "Bw") && after !== "None") {
        live -= after === "Boundary" ? size.boundary : size.full;
        --inFlight;
        if (after === "Full" || after === "Pending") --full;
        held.set(key, "None");
      }
      sample(t.end);
    }
  }

  function runLists(sch, costs, perChunk, timeline) {
    const S = sch.stages, progress = new Progress(sch);
    const clock = new Array(S).fill(0), firstStart = new Array(S).fill(0), next = new Array(S).fill(0);
    const started = new Array(S).fill(false), timed = timeline.stages;
    const chunkCosts = (st, chunk) =>
      perChunk.length ? perChunk[modelChunk(sch, st, chunk)] : uniformChunk(costs, sch.virtual_chunks);
    for (let moved = true; moved;) {
      moved = false;
      for (let st = 0; st < S; ++st) {
        const list = sch.actions[st];
        while (next[st] < list.length) {
          const a = list[next[st]], ready = progress.readyAt(st, a);
          if (ready === null) break;
          const t = { step: next[st], action: a, start: 0, end: 0, arrival: -1 };
          if (a.kind === "recvF" || a.kind === "recvB") {
            t.start = clock[st];
            t.end = Math.max(clock[st], ready);
          } else {
            t.start = Math.max(clock[st], ready);
            t.end = t.start + costOf(a, chunkCosts(st, Math.max(a.chunk, 0)), costs);
            if (isCompute(a.kind)) {
              const stats = timeline.stats[st];
              if (!started[st]) (firstStart[st] = t.start), (started[st] = true);
              stats.busy += t.end - t.start;
              stats.span = t.end - firstStart[st];
            }
          }
          clock[st] = t.end;
          const send = a.kind === "sendF" || a.kind === "sendB";
          if (send) t.arrival = t.end + costs.transfer;
          progress.complete(st, a, t.end, send ? costs.transfer : 0);
          timed[st].push(t);
          ++next[st];
          moved = true;
        }
      }
    }
    for (let st = 0; st < S; ++st) {
      check(next[st] === sch.actions[st].length, `simulate: stage ${st} stopped at step ${next[st]}`);
      timeline.step_time = Math.max(timeline.step_time, clock[st]);
    }
  }

  // simulate() + render_json(): the timeline as `brigade schedule --json` prints it.
  // costs: {forward, backward, weight, recompute (< 0: forward), step, transfer}; factors: one per stage or
  // null; memory: {full, boundary}.
  function simulate(sch, costs, factors = null, memory = { full: 1, boundary: 0 }) {
    checkCosts(costs);
    const S = sch.stages, perChunk = perChunkCosts(sch, costs, factors);
    const timeline = { stages: [], stats: [], step_time: 0, bubble: 0 };
    for (let s = 0; s < S; ++s) {
      timeline.stages.push([]);
      timeline.stats.push({ stage: s, busy: 0, bubble: 0, span: 0, peak_in_flight: 0, peak_full: 0,
                            peak_memory: 0, memory: [] });
    }
    runLists(sch, costs, perChunk, timeline);
    const T = timeline.step_time;
    for (let s = 0; s < S; ++s) {
      const stats = timeline.stats[s];
      stats.bubble = T > 0 ? (T - stats.busy) / T : 0;
      timeline.bubble += stats.bubble / S;
      accountMemory(sch, s, memory, timeline.stages[s], stats);
    }
    const actions = [];
    timeline.stages.forEach((list, stage) => list.forEach((t) => {
      const a = t.action, out = { stage, step: t.step, kind: a.kind, label: label(a, sch.virtual_chunks > 1),
                                  microbatch: a.microbatch, chunk: a.chunk, peer: a.peer, start: t.start,
                                  end: t.end };
      if (t.arrival >= 0) out.arrival = t.arrival;
      actions.push(out);
    }));
    return {
      schedule: sch.name, stages: S, microbatches: sch.microbatches, virtual_chunks: sch.virtual_chunks,
      placement: sch.placement, recompute: sch.recompute,
      costs: { forward: costs.forward, backward: costs.backward, weight: costs.weight,
               recompute: costs.recompute < 0 ? costs.forward : costs.recompute, step: costs.step,
               transfer: costs.transfer, per_chunk: perChunk },
      step_time: T, bubble: timeline.bubble, stage_stats: timeline.stats, actions,
    };
  }

  return { simulate };
})();
