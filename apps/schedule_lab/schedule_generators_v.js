// The schedule lab's other generators, ported line for line from C++ like schedule_model.js:
//   listSchedule    pipeline/schedule/list_scheduler.cpp (the unit-cost timeline the pickers run on)
//   zb-h2           pipeline/schedule/zero_bubble.cpp (capped_zero_bubble: at most 2S - 1 in flight)
//   zb-v, v-half,   pipeline/schedule/v_shape.cpp (two chunks per stage in a V; the V-Half and V-Min
//   v-min           building blocks squeezed by a list scheduler)
//   dualpipev       pipeline/schedule/dualpipe.cpp
// Each fills sch.actions with the compute order; makeSchedule adds the transfers, the recomputation and the
// optimizer step as it does for the others.
"use strict";

(() => {
  const { register, action, check, modelChunk } = ScheduleModel;
  const F = (m, c = 0) => action("F", m, c), Bi = (m, c = 0) => action("Bi", m, c);
  const Bw = (m, c = 0) => action("Bw", m, c), B = (m, c = 0) => action("B", m, c);

  // UnitTimeline: every F, Bi, Bw of one chunk for one microbatch takes one unit; messages take none.
  class UnitTimeline {
    constructor(sch) {
      this.sch = sch;
      this.ends = new Map();  // "kind/model chunk/microbatch" -> end
    }
    endOf(kind, k, m) {
      const end = this.ends.get(`${kind}/${k}/${m}`);
      return end === undefined ? -1 : end;
    }
    record(stage, pass, end) {
      this.ends.set(`${pass.kind}/${modelChunk(this.sch, stage, pass.chunk)}/${pass.microbatch}`, end);
    }
    ready(stage, pass, now) {
      const k = modelChunk(this.sch, stage, pass.chunk), m = pass.microbatch;
      const K = this.sch.stages * this.sch.virtual_chunks;
      const done = (kind, chunk) => {
        const end = this.endOf(kind, chunk, m);
        return end >= 0 && end <= now;
      };
      if (pass.kind === "F") return k === 0 || done("F", k - 1);
      if (pass.kind === "Bi") return done("F", k) && (k + 1 === K || done("Bi", k + 1));
      if (pass.kind === "Bw") return done("Bi", k);
      return false;
    }
  }

  // list_schedule: whenever a stage is free, its picker chooses a ready pass (or none); time advances from
  // one pass end to the next until every stage has run its 3 v M passes.
  function listSchedule(sch, pick) {
    const S = sch.stages, passes = 3 * sch.virtual_chunks * sch.microbatches, timeline = new UnitTimeline(sch);
    const order = sch.actions, freeAt = new Array(S).fill(0), events = new Set([0]);
    for (let now = 0; ;) {
      let finished = true;
      for (let s = 0; s < S; ++s) {
        if (order[s].length === passes) continue;
        finished = false;
        if (freeAt[s] > now) continue;
        const pass = pick(s, now, timeline);
        if (!pass) continue;
        check(timeline.ready(s, pass, now), `list scheduler: stage ${s} picked a pass before its inputs exist`);
        timeline.record(s, pass, now + 1);
        freeAt[s] = now + 1;
        events.add(now + 1);
        order[s].push(pass);
      }
      if (finished) return;
      let next = Infinity;
      for (const t of events) if (t > now && t < next) next = t;
      check(next < Infinity, `list scheduler: no stage can pick a pass at time ${now}`);
      events.delete(now);  // past times are never looked at again
      now = next;
    }
  }

  // zb-h2 (capped_zero_bubble): a ready Bi first, then a forward while fewer than 2S - 1 are in flight, then
  // the oldest pending Bw.
  function zbH2(sch) {
    const M = sch.microbatches, cap = 2 * sch.stages - 1;
    const states = sch.actions.map(() => ({ nextForward: 0, nextBackward: 0, pending: [], inFlight: 0 }));
    listSchedule(sch, (s, now, timeline) => {
      const st = states[s];
      if (st.nextBackward < M && timeline.ready(s, Bi(st.nextBackward), now)) {
        st.pending.push(st.nextBackward);
        return Bi(st.nextBackward++);
      }
      if (st.nextForward < M && st.inFlight < cap && timeline.ready(s, F(st.nextForward), now)) {
        ++st.inFlight;
        return F(st.nextForward++);
      }
      if (st.pending.length) {
        --st.inFlight;
        return Bw(st.pending.shift());
      }
      return null;
    });
  }

  // zb_v_stage: stage s's passes of n microbatches (the microbatches past M are dropped afterwards).
  function zbVStage(S, s, n) {
    const list = [], next = [[0, 0], [0, 0], [0, 0]];  // [F, Bi, Bw][chunk]: the next microbatch
    const fwd = (c) => list.push(F(next[0][c]++, c));
    const bi = (c) => list.push(Bi(next[1][c]++, c));
    const bw = (c) => list.push(Bw(next[2][c]++, c));
    for (let i = 0; i < 2 * (S - s) - 1; ++i) fwd(0);
    for (let i = 0; i < s; ++i) fwd(1), fwd(0);
    for (let i = 0; i < S - s; ++i) fwd(1), bi(1), bw(1);
    while (next[0][1] < next[0][0] || next[0][0] < n) {
      if (next[0][0] < n) fwd(0);
      bi(0), bw(0), fwd(1), bi(1), bw(1);
    }
    for (let i = 0; i < s; ++i) bi(0), bi(1);
    for (let i = 0; i < S - s; ++i) bi(0), bw(0);
    while (next[2][1] < next[1][1]) bw(1);
    while (next[2][0] < next[1][0]) bw(0);
    return list;
  }
  function zbV(sch) {
    const S = sch.stages, M = sch.microbatches, n = Math.max(M, 2 * S - 1);
    sch.actions.forEach((list, s) => list.push(...zbVStage(S, s, n).filter((a) => a.microbatch < M)));
  }

  // The V-Half and V-Min building blocks: per stage the start times of F chunk 0, F chunk 1, Bi chunk 1 and
  // Bi chunk 0 of microbatch 0 within a 6-unit period.
  const PERIOD = 6;
  function vMinBlock(S) {
    const d = S % 3 === 0 ? 2 : 0, out = [];
    for (let s = 0; s < S; ++s) out.push([s, 2 * S - 1 - s, 2 * S + d + s, 4 * S + d - 1 - s]);
    return out;
  }
  function vHalfBlock(S) {
    const d = S % 2 === 0 ? 3 : 0, out = [];
    for (let s = 0; s < S; ++s) out.push([2 * s, 3 * S - 2 - s, 3 * S + d + 2 * s - 1, 6 * S + d - s - 2]);
    return out;
  }
  // block_order: the block repeated every period, the idle slots filled with the oldest pending Bw.
  function blockOrder([f0, f1, bi1, bi0], M) {
    const starts = new Map();
    for (let m = 0; m < M; ++m) {
      const t = PERIOD * m;
      for (const [time, pass] of [[f0 + t, F(m, 0)], [f1 + t, F(m, 1)], [bi1 + t, Bi(m, 1)], [bi0 + t, Bi(m, 0)]]) {
        if (!starts.has(time)) starts.set(time, pass);
      }
    }
    const order = [], pending = [], end = Math.max(...starts.keys());
    for (let t = 0; t <= end; ++t) {
      const pass = starts.get(t);
      if (pass) {
        order.push(pass);
        if (pass.kind === "Bi") pending.push(Bw(pass.microbatch, pass.chunk));
      } else if (pending.length) {
        order.push(pending.shift());
      }
    }
    return order.concat(pending);
  }
  function peakInFlight(order) {
    let live = 0, peak = 0;
    for (const a of order) peak = Math.max(peak, (live += a.kind === "F" ? 1 : a.kind === "Bw" ? -1 : 0));
    return peak;
  }
  // squeeze_pick: the block's next pass if ready; else an upcoming forward that fits under the block's peak
  // (before any backward); else, all forwards done, a ready Bi; else a ready Bw.
  function squeezePick(st, s, now, timeline) {
    if (!st.order.length) return null;
    const ready = (i) => timeline.ready(s, st.order[i], now);
    let pick = ready(0) ? 0 : -1;
    for (let i = 0; pick < 0 && !st.backwardStarted && i < st.order.length; ++i) {
      const a = st.order[i];
      if (a.kind !== "F") break;
      if (ready(i) && st.inFlight + (a.chunk === 0 ? 2 : 1) <= st.cap) pick = i;
    }
    for (let i = 0; pick < 0 && st.forwardsLeft === 0 && i < st.order.length; ++i) {
      if (st.order[i].kind === "Bi" && ready(i)) pick = i;
    }
    for (let i = 0; pick < 0 && i < st.order.length; ++i) {
      if (st.order[i].kind === "Bw" && ready(i)) pick = i;
    }
    if (pick < 0) return null;
    const [a] = st.order.splice(pick, 1);
    if (a.kind === "F") ++st.inFlight, --st.forwardsLeft;
    if (a.kind === "Bi") st.backwardStarted = true;
    if (a.kind === "Bw") --st.inFlight;
    return a;
  }
  function fromBlock(block) {
    return (sch) => {
      const states = block(sch.stages).map((offsets) => {
        const order = blockOrder(offsets, sch.microbatches);
        return { order, cap: peakInFlight(order), inFlight: 0, forwardsLeft: 2 * sch.microbatches,
                 backwardStarted: false };
      });
      listSchedule(sch, (s, now, timeline) => squeezePick(states[s], s, now, timeline));
    };
  }

  // dualpipe_v: forward-backward pairs of the two chunks, split backwards where the drain leaves room.
  function dualPipeV(sch) {
    const S = sch.stages, M = sch.microbatches;
    check(M >= 2 * S, `schedule dualpipev: microbatches (${M}) must be at least 2 x stages (${2 * S}): the ` +
                      "two directions need that many to fill the pipeline");
    sch.actions.forEach((list, s) => {
      const nextF = [0, 0], nextB = [0, 0], pending = [];
      const forward = (c) => list.push(F(nextF[c]++, c));
      const backward = (c, split) => {
        const m = nextB[c]++;
        if (!split) return void list.push(B(m, c));
        list.push(Bi(m, c));
        pending.push(Bw(m, c));
      };
      const weight = () => pending.length && list.push(pending.shift());
      const pair = (fc, bc) => (forward(fc), backward(bc, false));
      for (let i = 0; i < 2 * (S - s - 1); ++i) forward(0);
      for (let i = 0; i < s + 1; ++i) forward(0), forward(1);
      for (let i = 0; i < S - s - 1; ++i) backward(1, true), weight(), forward(1);
      for (let i = 0; i < M - 2 * S + s + 1; ++i) pair(0, 1), pair(1, 0);
      for (let i = 0; i < S - s - 1; ++i) backward(1, false), pair(1, 0);
      let split = false;
      for (let i = 0; i < s + 1; ++i) {
        if (i === Math.floor((s + 1) / 2) && s % 2 === 1) split = true;
        backward(1, split);
        if (i === Math.floor((s + 1) / 2) && s % 2 === 0) split = true;
        backward(0, split);
      }
      for (let i = 0; i < S - s - 1; ++i) weight(), backward(0, true);
      while (pending.length) weight();
    });
  }

  register("zb-h2", "interleaved", 1, zbH2);
  register("zb-v", "v", 2, zbV);
  register("v-half", "v", 2, fromBlock(vHalfBlock));
  register("v-min", "v", 2, fromBlock(vMinBlock));
  register("dualpipev", "v", 2, dualPipeV);
})();
