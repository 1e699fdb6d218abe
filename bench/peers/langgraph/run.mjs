// One LangGraph.js run of the peer workload (bench/peers, `make bench-peers`): a graph whose one
// node reads a chunk and appends it to the state's outputs, looping until every chunk is read,
// checkpointed by SqliteSaver with durability "sync" (each checkpoint saved before the next
// step starts). Input: a JSON file {workspace, chunks: [{path, offset, limit}], db}. Output on
// stdout: JSON {elapsedMs, cpuMs, synchronous, journalMode, outputs} where the outputs are read
// back through a fresh checkpointer on the same file.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const n = spec.chunks.length;

// read returns lines [offset, offset+limit) of the file, trailing newlines trimmed: what the
// Go side's workload.read and harness-edge's read_file give.
function read({ path, offset, limit }) {
  const text = readFileSync(join(spec.workspace, path), "utf8");
  let from = 0;
  for (let l = 1; l < offset; l++) from = text.indexOf("\n", from) + 1;
  let to = from;
  for (let l = 0; l < limit && to < text.length; l++) {
    const nl = text.indexOf("\n", to);
    to = nl < 0 ? text.length : nl + 1;
  }
  return text.slice(from, to).replace(/\n+$/, "");
}

const State = Annotation.Root({
  i: Annotation({ reducer: (_, b) => b, default: () => 0 }),
  outputs: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

function graph(checkpointer) {
  return new StateGraph(State)
    .addNode("step", (s) => ({ i: s.i + 1, outputs: [read(spec.chunks[s.i])] }))
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.i < n ? "step" : END))
    .compile({ checkpointer });
}

const config = { configurable: { thread_id: "peers" }, durability: "sync", recursionLimit: n + 10 };
const saver = SqliteSaver.fromConnString(spec.db);
const g = graph(saver);
const c0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
await g.invoke({}, config);
const elapsedMs = Number(process.hrtime.bigint() - t0) / 1e6;
const c1 = process.cpuUsage(c0);
// The saver sets its pragmas when it first writes: read them after the run.
const synchronous = saver.db.pragma("synchronous", { simple: true });
const journalMode = saver.db.pragma("journal_mode", { simple: true });
saver.db.close();

const reader = SqliteSaver.fromConnString(spec.db);
const state = await graph(reader).getState({ configurable: { thread_id: "peers" } });
reader.db.close();
process.stdout.write(JSON.stringify({ elapsedMs, cpuMs: (c1.user + c1.system) / 1000, synchronous, journalMode,
  outputs: state.values.outputs }));
