/**
 * Graph checks of a DAG document: duplicate ids, unknown and repeated needs, self-dependency and
 * cycles. They run on a lenient view of the raw document, so a document with schema errors still
 * gets its graph errors reported in the same pass.
 */
import { ID_PATTERN } from "./dag-schema.js";
import type { DagIssue } from "./dag-issues.js";
import { quote, suggestion } from "./dag-issues.js";

/** What the graph checks need of one task; undefined where the document had no usable value. */
export interface GraphTask {
  id: string | undefined;
  needs: (string | undefined)[];
}

function ownValue(table: object, key: string): unknown {
  return Object.getOwnPropertyDescriptor(table, key)?.value;
}

/** Reads ids and needs out of whatever the parser produced, trusting nothing about its shape. */
export function graphView(raw: unknown): GraphTask[] {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return [];
  const tasks = ownValue(raw, "tasks");
  if (!Array.isArray(tasks)) return [];
  return tasks.map((task: unknown): GraphTask => {
    if (typeof task !== "object" || task === null || Array.isArray(task)) return { id: undefined, needs: [] };
    const id = ownValue(task, "id");
    const needs = ownValue(task, "needs");
    return {
      id: typeof id === "string" ? id : undefined,
      needs: Array.isArray(needs) ? needs.map((n: unknown) => (typeof n === "string" ? n : undefined)) : [],
    };
  });
}

/** Every graph issue of `tasks`, in document order; cycles come last, one per knot of tasks. */
export function checkGraph(tasks: readonly GraphTask[]): DagIssue[] {
  const issues: DagIssue[] = [];
  const firstIndex = new Map<string, number>();
  tasks.forEach((task, i) => {
    if (task.id === undefined) return;
    const first = firstIndex.get(task.id);
    if (first === undefined) firstIndex.set(task.id, i);
    else
      issues.push({
        path: `tasks[${i}].id`,
        message: `duplicate task id ${quote(task.id)} (first used by tasks[${first}])`,
      });
  });

  // Edges go from a task to the tasks it needs, by index of their first definition.
  const edges: { to: number; needIndex: number }[][] = tasks.map(() => []);
  tasks.forEach((task, i) => {
    const seen = new Map<string, number>();
    task.needs.forEach((need, j) => {
      // Needs that are not strings or not ids were already reported by the schema.
      if (need === undefined || !ID_PATTERN.test(need)) return;
      const place = `tasks[${i}].needs[${j}]`;
      const earlier = seen.get(need);
      if (earlier !== undefined) {
        issues.push({ path: place, message: `${quote(need)} is already listed at needs[${earlier}]` });
        return;
      }
      seen.set(need, j);
      if (need === task.id) {
        issues.push({ path: place, message: `task ${quote(need)} needs itself` });
        return;
      }
      const target = firstIndex.get(need);
      if (target === undefined) {
        issues.push({
          path: place,
          message: `unknown task ${quote(need)}${suggestion(need, firstIndex.keys())}`,
        });
        return;
      }
      // A task defined twice keeps only its first definition in the graph; the duplicate is reported.
      if (task.id !== undefined && firstIndex.get(task.id) === i)
        edges[i]?.push({ to: target, needIndex: j });
    });
  });

  for (const component of stronglyConnected(edges)) {
    if (component.length < 2) continue;
    issues.push(describeCycle(component, edges, tasks));
  }
  return issues;
}

/** Tarjan's algorithm, iterative so a long chain cannot exhaust the stack. Components in index order. */
function stronglyConnected(edges: readonly { to: number }[][]): number[][] {
  const count = edges.length;
  const index = new Array<number>(count).fill(-1);
  const low = new Array<number>(count).fill(0);
  const onStack = new Array<boolean>(count).fill(false);
  const stack: number[] = [];
  const components: number[][] = [];
  let next = 0;
  for (let root = 0; root < count; root++) {
    if (index[root] !== -1) continue;
    const work: { node: number; edge: number }[] = [{ node: root, edge: 0 }];
    index[root] = low[root] = next++;
    stack.push(root);
    onStack[root] = true;
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const out = edges[frame.node] ?? [];
      if (frame.edge < out.length) {
        const to = out[frame.edge++]!.to;
        if (index[to] === -1) {
          index[to] = low[to] = next++;
          stack.push(to);
          onStack[to] = true;
          work.push({ node: to, edge: 0 });
        } else if (onStack[to]) {
          low[frame.node] = Math.min(low[frame.node]!, index[to]!);
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) low[parent.node] = Math.min(low[parent.node]!, low[frame.node]!);
      if (low[frame.node] === index[frame.node]) {
        const component: number[] = [];
        let member: number;
        do {
          member = stack.pop()!;
          onStack[member] = false;
          component.push(member);
        } while (member !== frame.node);
        components.push(component.sort((a, b) => a - b));
      }
    }
  }
  return components.sort((a, b) => a[0]! - b[0]!);
}

/** The shortest cycle through the component's first task, as `a -> b -> a`, placed at its first need. */
function describeCycle(
  component: readonly number[],
  edges: readonly { to: number; needIndex: number }[][],
  tasks: readonly GraphTask[],
): DagIssue {
  const members = new Set(component);
  const start = component[0]!;
  const parent = new Map<number, number>([[start, -1]]);
  const queue = [start];
  let last = -1;
  search: for (let head = 0; head < queue.length; head++) {
    const node = queue[head]!;
    for (const { to } of edges[node] ?? []) {
      if (to === start) {
        last = node;
        break search;
      }
      if (members.has(to) && !parent.has(to)) {
        parent.set(to, node);
        queue.push(to);
      }
    }
  }
  const path: number[] = [];
  for (let node = last; node !== -1; node = parent.get(node) ?? -1) path.unshift(node);
  const names = [...path, start].map((i) => tasks[i]?.id ?? `tasks[${i}]`);
  const firstHop = path[1] ?? start;
  const needIndex = edges[start]?.find((edge) => edge.to === firstHop)?.needIndex ?? 0;
  return { path: `tasks[${start}].needs[${needIndex}]`, message: `dependency cycle: ${names.join(" -> ")}` };
}
