/** The DAG shapes of section 2, as documents `!dag publish` accepts, plus each task's needs. */

const pad = (i, w) => String(i).padStart(w, "0");

/** `count` tasks with no needs. */
export function independent(id, count) {
  return { id, tasks: Array.from({ length: count }, (_, i) => ({ id: `t${pad(i, 4)}`, action: "true" })) };
}

/** A chain: each task needs the one before it. */
export function chain(id, depth) {
  return {
    id,
    tasks: Array.from({ length: depth }, (_, i) =>
      i === 0
        ? { id: `c${pad(i, 3)}`, action: "true" }
        : { id: `c${pad(i, 3)}`, action: "true", needs: [`c${pad(i - 1, 3)}`] },
    ),
  };
}

/**
 * `layers` × `width`: each task needs two neighbours of the layer before (i and i+1), so every
 * layer waits on the one before it. A full barrier (every task needing the whole previous layer)
 * would be 90,000 edges, over the 64 KB document limit a user could publish.
 */
export function layered(id, layers, width, extra = {}) {
  const name = (l, i) => `${String.fromCharCode(97 + l)}${pad(i, 2)}`;
  const tasks = [];
  for (let l = 0; l < layers; l++) {
    for (let i = 0; i < width; i++) {
      const t = { id: name(l, i), action: "true", ...extra };
      if (l > 0) t.needs = [name(l - 1, i), name(l - 1, (i + 1) % width)];
      tasks.push(t);
    }
  }
  return { id, tasks };
}
