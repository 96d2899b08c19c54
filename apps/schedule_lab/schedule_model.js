// The schedule lab's model: brigade's pipeline schedules and simulator, ported line for line from C++ so
// that the page can recompute a timeline when a slider moves. Each function names the C++ it follows:
//   generators      pipeline/schedule/generators.cpp (gpipe, 1f1b, interleaved, zb-h1, looped-bfs,
//                   insert_transfers, insert_recompute); the list-scheduled and V-shaped ones (zb-h2, zb-v,
//                   v-half, v-min, dualpipev) in schedule_generators_v.js
//   layout          pipeline/schedule/schedule.cpp (ChunkLayout, transfer_tag, to_string)
//   dependencies    pipeline/schedule/dependencies.cpp (Progress)
//   costs           pipeline/plan/simulator.cpp (Costs::chunk), pipeline/plan/stage_costs.cpp
//   simulator       pipeline/plan/simulator.cpp (simulate)
//   memory          pipeline/plan/activation_ledger.cpp, pipeline/plan/memory_model.cpp (uniform sizes)
// simulate() (schedule_simulator.js) returns the object `brigade schedule --json` prints (pipeline/plan/render_timeline.cpp:
// render_json), and the arithmetic runs in the same order on the same doubles, so the two agree to the
// last bit; tests/apps/schedule_page_browser_test.py checks that on many configurations.
"use strict";

const ScheduleModel = (() => {
  // The catalogue (generators.cpp: schedule_catalogue): name -> placement, chunks per stage (0: any v),
  // the generator filling the compute order, and the fewest microbatches it takes. register() adds one.
  const CATALOGUE = new Map();
  const TAKES_ANY_V = {};
  function register(name, placement, chunks, generate) {
    CATALOGUE.set(name, { placement, chunks, generate });
    if (chunks === 0) TAKES_ANY_V[name] = true;
  }
  // The catalogue's order, as `brigade schedule --help` lists it.
  const ORDER = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "v-half", "v-min", "dualpipev",
                 "looped-bfs"];
  const generated = () => ORDER.filter((name) => CATALOGUE.has(name));

  class ModelError extends Error {}
  function check(condition, message) {
    if (!condition) throw new ModelError(message);
  }

  // ---- the IR (schedule.cpp) ----
  const action = (kind, microbatch, chunk = 0, peer = -1) => ({ kind, microbatch, chunk, peer });
  const isTransfer = (kind) => kind === "sendF" || kind === "recvF" || kind === "sendB" || kind === "recvB";
  const isCompute = (kind) => !isTransfer(kind);

  function label(a, showChunk) {  // to_string(Action, show_chunk)
    if (a.kind === "step") return "step";
    const chunked = showChunk || a.chunk !== 0;
    const compute = (k) => k + a.microbatch + (chunked ? ".c" + a.chunk : "");
    switch (a.kind) {
      case "sendF": return "send " + compute("F") + " ->s" + a.peer;
      case "recvF": return "recv " + compute("F") + " <-s" + a.peer;
      case "sendB": return "send " + compute("B") + " ->s" + a.peer;
      case "recvB": return "recv " + compute("B") + " <-s" + a.peer;
      default: return compute(a.kind);
    }
  }

  function recomputes(policy, microbatch, microbatches) {
    if (policy === "always") return true;
    if (policy === "except-last") return microbatch !== microbatches - 1;
    return false;
  }

  // ChunkLayout: which stage holds which model chunk.
  function modelChunk(s, stage, chunk) {
    const reversed = s.placement === "v" && chunk % 2 === 1;
    return chunk * s.stages + (reversed ? s.stages - 1 - stage : stage);
  }
  function stageOf(s, k) {
    const position = k % s.stages;
    const reversed = s.placement === "v" && Math.floor(k / s.stages) % 2 === 1;
    return reversed ? s.stages - 1 - position : position;
  }
  const chunkOf = (s, k) => Math.floor(k / s.stages);

  // transfer_tag: where the message of a Send/Recv comes from and goes to.
  function transferTag(s, stage, a) {
    const here = modelChunk(s, stage, a.chunk);
    let from = here, to = here;
    if (a.kind === "sendF") to = here + 1;
    else if (a.kind === "recvF") from = here - 1;
    else if (a.kind === "sendB") to = here - 1;
    else if (a.kind === "recvB") from = here + 1;
    return {
      gradient: a.kind === "sendB" || a.kind === "recvB",
      fromStage: stageOf(s, from), fromChunk: chunkOf(s, from),
      toStage: stageOf(s, to), toChunk: chunkOf(s, to),
    };
  }

  // ---- generators (generators.cpp) ----
  function emptySchedule(name, S, M, v, recompute, placement = "interleaved") {
    check(Number.isInteger(S) && S >= 1, `schedule ${name}: stages must be >= 1 (found ${S})`);
    check(Number.isInteger(M) && M >= 1, `schedule ${name}: microbatches must be >= 1 (found ${M})`);
    check(Number.isInteger(v) && v >= 1, `schedule ${name}: virtual chunks must be >= 1 (found ${v})`);
    const actions = [];
    for (let s = 0; s < S; ++s) actions.push([]);
    return { name, stages: S, microbatches: M, virtual_chunks: v, placement, recompute, actions };
  }

  function gpipe(sch) {
    for (const list of sch.actions) {
      for (let i = 0; i < sch.microbatches; ++i) list.push(action("F", i));
      for (let i = sch.microbatches - 1; i >= 0; --i) list.push(action("B", i));
    }
  }

  function oneFOneB(sch) {
    const S = sch.stages, M = sch.microbatches;
    sch.actions.forEach((list, s) => {
      const warmup = Math.min(S - s - 1, M);
      for (let i = 0; i < warmup; ++i) list.push(action("F", i));
      for (let i = warmup; i < M; ++i) list.push(action("F", i), action("B", i - warmup));
      for (let j = M - warmup; j < M; ++j) list.push(action("B", j));
    });
  }

  function interleaved(sch) {
    const S = sch.stages, M = sch.microbatches, v = sch.virtual_chunks;
    check(M % S === 0, `schedule interleaved: microbatches (${M}) must be a multiple of stages (${S}): ` +
                       `microbatches go through in groups of ${S}`);
    const total = v * M;
    const microbatchOf = (k) => Math.floor(k / (S * v)) * S + (k % S);
    const chunkAt = (k) => Math.floor((k % (S * v)) / S);
    sch.actions.forEach((list, s) => {
      const warmup = Math.min(v === 1 ? S - s - 1 : 2 * (S - s - 1) + (v - 1) * S, total);
      const forward = (k) => list.push(action("F", microbatchOf(k), chunkAt(k)));
      const backward = (k) => list.push(action("B", microbatchOf(k), v - 1 - chunkAt(k)));
      for (let k = 0; k < warmup; ++k) forward(k);
      for (let k = 0; k < total - warmup; ++k) {
        forward(warmup + k);
        backward(k);
      }
      for (let k = total - warmup; k < total; ++k) backward(k);
    });
  }

  function zbH1(sch) {
    const S = sch.stages, M = sch.microbatches;
    sch.actions.forEach((list, s) => {
      const warmup = Math.min(S - s - 1, M);
      const pending = [];  // microbatches whose Bi ran and whose Bw has not
      const backward = (j) => {
        if (s === 0) return void list.push(action("B", j));
        list.push(action("Bi", j));
        pending.push(j);
        if (pending.length > s) list.push(action("Bw", pending.shift()));
      };
      for (let i = 0; i < warmup; ++i) list.push(action("F", i));
      for (let i = warmup; i < M; ++i) {
        list.push(action("F", i));
        backward(i - warmup);
      }
      for (let j = M - warmup; j < M; ++j) backward(j);
      for (const j of pending) list.push(action("Bw", j));
    });
  }

  function loopedBfs(sch) {
    const M = sch.microbatches, v = sch.virtual_chunks;
    for (const list of sch.actions) {
      for (let c = 0; c < v; ++c) for (let i = 0; i < M; ++i) list.push(action("F", i, c));
      for (let c = v - 1; c >= 0; --c) for (let i = M - 1; i >= 0; --i) list.push(action("B", i, c));
    }
  }

  function insertTransfers(sch) {
    const last = sch.stages * sch.virtual_chunks - 1;
    sch.actions = sch.actions.map((list, s) => {
      const out = [];
      for (const a of list) {
        const k = modelChunk(sch, s, a.chunk);
        const prevStage = k > 0 ? stageOf(sch, k - 1) : -1;
        const nextStage = k < last ? stageOf(sch, k + 1) : -1;
        const prevRemote = k > 0 && prevStage !== s, nextRemote = k < last && nextStage !== s;
        if (a.kind === "F") {
          if (prevRemote) out.push(action("recvF", a.microbatch, a.chunk, prevStage));
          out.push(a);
          if (nextRemote) out.push(action("sendF", a.microbatch, a.chunk, nextStage));
        } else if (a.kind === "B" || a.kind === "Bi") {
          if (nextRemote) out.push(action("recvB", a.microbatch, a.chunk, nextStage));
          out.push(a);
          if (prevRemote) out.push(action("sendB", a.microbatch, a.chunk, prevStage));
        } else {
          out.push(a);
        }
      }
      return out;
    });
  }

  function insertRecompute(sch) {
    if (sch.recompute === "never") return;
    sch.actions = sch.actions.map((list) => {
      const out = [];
      for (const a of list) {
        if ((a.kind === "B" || a.kind === "Bi") && recomputes(sch.recompute, a.microbatch, sch.microbatches)) {
          const back = out[out.length - 1];
          const waits = back && back.kind === "recvB" && back.microbatch === a.microbatch &&
                        back.chunk === a.chunk;
          out.splice(waits ? out.length - 1 : out.length, 0, action("R", a.microbatch, a.chunk));
        }
        out.push(a);
      }
      return out;
    });
  }

  register("gpipe", "interleaved", 1, gpipe);
  register("1f1b", "interleaved", 1, oneFOneB);
  register("interleaved", "interleaved", 0, interleaved);
  register("zb-h1", "interleaved", 1, zbH1);
  register("looped-bfs", "interleaved", 0, loopedBfs);

  // make_schedule: v is used by the schedules that take any (the others run their own chunk count).
  function makeSchedule(name, S, M, v, recompute = "never") {
    const entry = CATALOGUE.get(name);
    check(entry, `schedule: the page generates ${generated().join(", ")} (found '${name}')`);
    check(["never", "always", "except-last"].includes(recompute),
          `recompute: unknown policy '${recompute}' (valid: never, always, except-last)`);
    const sch = emptySchedule(name, S, M, entry.chunks === 0 ? v : entry.chunks, recompute, entry.placement);
    entry.generate(sch);
    insertTransfers(sch);
    insertRecompute(sch);
    for (const list of sch.actions) list.push(action("step", -1, 0));
    return sch;
  }

  return { generated, register, action, TAKES_ANY_V, ModelError, check, label, recomputes, isCompute,
           isTransfer, modelChunk, stageOf, chunkOf, transferTag, makeSchedule };
})();
