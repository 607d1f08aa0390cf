/**
 * Draws a machine's statechart (the structure GET /v1/machines/{kind} reads from the XState machine) as SVG with a
 * simple layered layout: each state's layer is its distance from the initial state, back edges curve around. The
 * state at the selected event is highlighted, the state it left outlined, and the transition taken drawn bold.
 */
import { html } from './html.js';

const NODE_W = 118;
const NODE_H = 30;
const GAP_X = 22;
const GAP_Y = 56;

/** The leaf a target enters: a compound state enters its initial child, down to a leaf. */
function entered(path, byPath) {
  let node = byPath.get(path);
  while (node && node.initial) node = byPath.get(node.initial);
  return node?.path ?? path;
}

/** Leaves under a state (itself when atomic): a transition of a compound state leaves from any of them. */
const leavesOf = (path, leaves) => leaves.filter((l) => l === path || l.startsWith(`${path}.`));

export function layout(machine) {
  const byPath = new Map(machine.states.map((s) => [s.path, s]));
  const leaves = machine.states.filter((s) => s.type !== 'compound' && s.type !== 'parallel').map((s) => s.path);
  const edges = [];
  for (const t of machine.transitions) {
    if (t.internal) continue;
    for (const source of leavesOf(t.source, leaves)) {
      for (const target of t.targets) edges.push({ source, target: entered(target, byPath), event: t.event });
    }
  }
  const layerOf = new Map();
  const start = machine.initial ? entered(machine.initial, byPath) : leaves[0];
  const queue = [start];
  layerOf.set(start, 0);
  while (queue.length) {
    const at = queue.shift();
    for (const e of edges) {
      if (e.source === at && !layerOf.has(e.target)) {
        layerOf.set(e.target, layerOf.get(at) + 1);
        queue.push(e.target);
      }
    }
  }
  const deepest = Math.max(0, ...layerOf.values());
  for (const leaf of leaves) if (!layerOf.has(leaf)) layerOf.set(leaf, deepest + 1);
  const layers = [];
  for (const leaf of leaves) (layers[layerOf.get(leaf)] ??= []).push(leaf);
  const widest = Math.max(...layers.map((l) => l?.length ?? 0));
  const width = widest * (NODE_W + GAP_X) + GAP_X;
  const position = new Map();
  layers.forEach((layer, depth) => {
    const offset = (width - layer.length * (NODE_W + GAP_X) + GAP_X) / 2;
    layer.forEach((leaf, i) => position.set(leaf, { x: offset + i * (NODE_W + GAP_X), y: GAP_Y / 2 + depth * (NODE_H + GAP_Y) }));
  });
  // One drawn edge per (source, target): its events are listed in its tooltip.
  const merged = new Map();
  for (const e of edges) {
    if (e.source === e.target) continue;
    const key = `${e.source}→${e.target}`;
    const entry = merged.get(key) ?? { source: e.source, target: e.target, events: [] };
    entry.events.push(e.event);
    merged.set(key, entry);
  }
  return { position, edges: [...merged.values()], width, height: layers.length * (NODE_H + GAP_Y) + GAP_Y / 2 };
}

function edgePath(from, to) {
  const x1 = from.x + NODE_W / 2;
  const x2 = to.x + NODE_W / 2;
  if (to.y > from.y) return `M${x1},${from.y + NODE_H} C${x1},${from.y + NODE_H + 30} ${x2},${to.y - 30} ${x2},${to.y}`;
  if (to.y === from.y) {
    const y = from.y;
    return `M${x1},${y} C${x1},${y - 28} ${x2},${y - 28} ${x2},${y}`;
  }
  // A back edge leaves from the side and curves around.
  const side = x2 >= x1 ? NODE_W : 0;
  return `M${from.x + side},${from.y + NODE_H / 2} C${from.x + side + (side ? 60 : -60)},${from.y} ${to.x + side + (side ? 60 : -60)},${to.y + NODE_H} ${to.x + side},${to.y + NODE_H / 2}`;
}

/**
 * `current` / `previous`: leaf paths of the state after and before the selected event; `event`: its type (the
 * transition taken is the edge previous → current that the machine takes on it).
 */
export function Statechart({ machine, graph, current = [], previous = [], event }) {
  const taken = (e) => previous.includes(e.source) && current.includes(e.target) && e.events.includes(event);
  const stayed = current.length > 0 && current.every((c) => previous.includes(c));
  return html`<svg class="statechart" data-kind=${machine.kind} viewBox="0 0 ${graph.width} ${graph.height}" width=${graph.width} height=${graph.height}>
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" /></marker></defs>
    ${graph.edges.map((e) => {
      const on = taken(e);
      return html`<g class=${on ? 'edge taken' : 'edge'} data-edge=${`${e.source}->${e.target}`}>
        <path d=${edgePath(graph.position.get(e.source), graph.position.get(e.target))} marker-end="url(#arrow)"><title>${e.events.join('\n')}</title></path>
        ${on && html`<text class="edge-label" x=${(graph.position.get(e.source).x + graph.position.get(e.target).x) / 2 + NODE_W / 2} y=${(graph.position.get(e.source).y + graph.position.get(e.target).y) / 2 + NODE_H / 2}>${event}</text>`}
      </g>`;
    })}
    ${[...graph.position].map(([path, p]) => {
      const cls = ['state', current.includes(path) ? 'current' : '', previous.includes(path) && !current.includes(path) ? 'previous' : '', current.includes(path) && stayed ? 'stayed' : ''].join(' ').trim();
      return html`<g class=${cls} data-state=${path} transform="translate(${p.x},${p.y})">
        <rect width=${NODE_W} height=${NODE_H} rx="8" />
        <text x=${NODE_W / 2} y=${NODE_H / 2 + 4}>${path}</text>
      </g>`;
    })}
  </svg>`;
}
