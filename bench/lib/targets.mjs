/**
 * The project's performance targets (bench/README.md, "Targets"), judged against one run's results: each row is a figure, its target and
 * PASS or MISS ("not measured" when the section did not produce it).
 */
import { fmt } from "./stats.mjs";

function row(figure, value, unit, op, limit, note = "") {
  let verdict = "not measured";
  if (value !== null && value !== undefined && Number.isFinite(value))
    verdict = (op === "≤" ? value <= limit : value >= limit) ? "PASS" : "MISS";
  // A figure shown next to a target it is not judged by (context for the judged one).
  if (note.startsWith("info:") && verdict !== "not measured") verdict = "info";
  const u = unit === "" ? "" : ` ${unit}`;
  return { figure, value, shown: `${fmt(value)}${u}`, target: `${op} ${fmt(limit)}${u}`, verdict, note };
}

export function judge(results) {
  const rows = [];
  const pg = results.claim?.postgres;
  if (pg !== undefined) {
    // Judged against graphile-worker keeping dagbot's promise (it fetches only for its free
    // slots); its fastest settings, which promise less, and its defaults beside.
    const promise = pg.graphilePromiseSettings === undefined ? "" : ` (${pg.graphilePromiseSettings.name})`;
    rows.push(
      row(
        `PG claim path / graphile-worker at dagbot's promise${promise} (8 workers vs concurrency 8)`,
        pg.ratioGraphilePromise?.median,
        "×",
        "≥",
        1.0,
      ),
    );
    const best = pg.graphileSettings === undefined ? "" : ` at its best (${pg.graphileSettings.name})`;
    rows.push(
      row(
        `PG claim path / graphile-worker${best} (8 workers vs concurrency 8)`,
        pg.ratioGraphile?.median,
        "×",
        "≥",
        1.2,
        "info: its local queue of 200 holds jobs that no free worker is about to run, a weaker promise than dagbot keeps",
      ),
    );
    if (pg.ratioGraphileDefault !== undefined)
      rows.push(
        row(
          "PG claim path / graphile-worker at its defaults (8 workers vs concurrency 8)",
          pg.ratioGraphileDefault.median,
          "×",
          "≥",
          1.2,
          "info: the judged figure is against its best settings",
        ),
      );
    for (const [w, v] of Object.entries(pg.workers ?? {}))
      rows.push(
        row(
          `PG claim path / raw loop, ${w} worker${w === "1" ? "" : "s"}`,
          v.ratioRaw?.median,
          "×",
          "≥",
          0.8,
        ),
      );
  }
  const sq = results.claim?.sqlite;
  if (sq !== undefined) {
    for (const [p, v] of Object.entries(sq.processes ?? {}))
      rows.push(
        row(
          `SQLite claim path / raw loop (same pragmas), ${p} process${p === "1" ? "" : "es"}`,
          v.ratioRaw?.median,
          "×",
          "≥",
          0.8,
        ),
      );
    rows.push(row("SQLite busy errors that reached the application", sq.busyErrors, "", "≤", 0));
  }
  for (const kind of ["sqlite", "postgres"]) {
    const d = results.dag?.[kind];
    if (d === undefined) continue;
    const chain = d.scenarios?.chain;
    rows.push(
      row(
        `${kind}: dependency satisfied → claimed p50 (200-deep chain)`,
        chain?.readyToClaimed?.p50?.median,
        "ms",
        "≤",
        5,
      ),
      row(
        `${kind}: dependency satisfied → claimed p99 (200-deep chain)`,
        chain?.readyToClaimed?.p99?.median,
        "ms",
        "≤",
        50,
      ),
    );
    const layers = d.scenarios?.layers;
    if (layers !== undefined) {
      rows.push(
        row(
          `${kind}: queued → claimed p50 (10 layers × 100)`,
          layers.queuedToClaimed?.p50?.median,
          "ms",
          "≤",
          5,
          "info: satisfied → claimed there is mostly waiting for the room cap and free slots",
        ),
      );
    }
    if (kind === "sqlite")
      rows.push(
        row("SQLite busy errors in the 3 nodes' logs during the DAG runs", d.busyErrorsInLogs, "", "≤", 0),
      );
    rows.push(
      row(`${kind}: idle node RSS (max of 3 nodes)`, d.idleRssMB?.max, "MB", "≤", 100),
      row(`${kind}: node RSS during the 1,000-task run (max of 3 nodes)`, d.busyRssMB?.max, "MB", "≤", 200),
    );
  }
  const one = results.floor?.oneTaskRun;
  if (one !== undefined) {
    rows.push(
      row(
        `\`dagbot run\` of a one-task DAG, process start to exit (p50 of ${one.rounds.length})`,
        one.median,
        "ms",
        "≤",
        150,
      ),
      row(
        "`dagbot run` of a one-task DAG, the first after a build (Node's compile cache empty)",
        one.firstMs,
        "ms",
        "≤",
        150,
        "info: later starts read the modules' bytecode from the cache",
      ),
    );
  }
  // A DAG of `true` processes, 8 slots each, beside ninja -j8 in the same rounds.
  for (const [key, f] of Object.entries(results.floor?.shapes ?? {})) {
    rows.push(
      row(`floor: ${f.label}, dagbot run (SQLite) / ninja -j8`, f.sqliteRatio?.median, "×", "≤", 1.5),
      row(`floor: ${f.label}, 3 nodes on PostgreSQL / ninja -j8`, f.postgresRatio?.median, "×", "≤", 2),
    );
    rows.push(
      row(
        `floor: ${f.label}, Node spawn floor / ninja -j8`,
        f.nodeRatio?.median,
        "×",
        "≤",
        1.5,
        "info: no runner hosted in Node starts processes faster here",
      ),
    );
    rows.push(
      row(
        `floor: ${f.label}, dagbot run (SQLite) / the Node spawn floor`,
        f.sqliteOverNode?.median,
        "×",
        "≤",
        1.3,
      ),
      row(
        `floor: ${f.label}, dagbot run (SQLite, no fsync) / the Node spawn floor`,
        f.normalOverNode?.median,
        "×",
        "≤",
        1.3,
        'info: sqlite_synchronous = "normal", what is left without the commits\' fsyncs',
      ),
      row(
        `floor: ${f.label}, the commits' fsyncs per task (default − no fsync)`,
        f.fsyncMsPerTask?.median,
        "ms",
        "≤",
        0.3 * (f.nodeMsPerTask?.median ?? 0),
        "info: the limit is 0.3 × the Node floor's time per task, all that 1.3 × leaves to dagbot",
      ),
    );
    if (key === "independent")
      rows.push(
        row(
          `floor: ${f.label}, make -j8 / ninja -j8`,
          f.makeRatio?.median,
          "×",
          "≤",
          1.5,
          "info: the other floor",
        ),
      );
  }
  for (const kind of ["sqlite", "postgres"]) {
    const f = results.failover?.[kind];
    if (f === undefined) continue;
    const limit = 1.25 * f.ttlMs + 1000;
    rows.push(
      row(
        `${kind}: kill -9 of the leader → new leader's first write (worst of ${f.killToFirstWriteMs.rounds.length}, TTL ${f.ttlMs} ms)`,
        f.killToFirstWriteMs.max,
        "ms",
        "≤",
        limit,
      ),
      row(
        `${kind}: SIGTERM of the leader → new leader (worst of ${f.stopToAcquiredMs.rounds.length})`,
        f.stopToAcquiredMs.max,
        "ms",
        "≤",
        250,
      ),
    );
  }
  const e = results.edge;
  if (e !== undefined) {
    const load = `${e.edges} edges on ${e.coreCount} cores`;
    rows.push(
      row(`edge: PostgreSQL connections in all, max (${load})`, e.maxConnections, "", "≤", 100),
      row(`edge: claim call a core served, p50 as the edge sees it (${load})`, e.claimP50Ms, "ms", "≤", 20),
      row(
        `edge: claim call p99 as the edge sees it`,
        e.claimP99Ms,
        "ms",
        "≤",
        20,
        "info: the judged figure is p50",
      ),
      row(
        `edge: tasks run exactly once across a core's kill -9 (of ${e.tasks}; duplicates + missing)`,
        e.records === undefined ? null : e.duplicates + e.missing,
        "",
        "≤",
        0,
      ),
      row(
        "edge: runs that did not succeed",
        e.statuses === undefined ? null : e.statuses.filter((x) => x !== "succeeded").length,
        "",
        "≤",
        0,
      ),
      row(`edge: throughput`, e.tasksPerSecond, "tasks/s", "≥", 0, "info: no target"),
      row(`edge: PostgreSQL commits per second`, e.commitsPerSecond, "/s", "≥", 0, "info: no target"),
    );
  }
  const c = results.chat;
  if (c?.measured === true) {
    rows.push(
      row(
        "chat: !dag status → reply p95 / bare echo round trip p95",
        c.status.p95 / c.echo.p95,
        "×",
        "≤",
        1.5,
      ),
      row(
        "chat: publish → status card p95 / bare echo round trip p95",
        c.card.p95 / c.echo.p95,
        "×",
        "≤",
        1.5,
      ),
      row(
        "chat: !dag status → reply p95 / bare one-way trip p95",
        c.status.p95 / c.oneWay.p95,
        "×",
        "≤",
        1.5,
        "info: a reply needs two homeserver hops, the one-way trip one",
      ),
    );
    rows.push(
      // An idle chat node within 100 MB (encryption on; a plain room loads no crypto).
      row("chat: idle `dagbot start` bot RSS, plain room (max of 3)", c.botIdleRssMB, "MB", "≤", 100),
      // The bound for a bot with the WASM crypto loaded, reported beside the plain room's.
      ...(c.botIdleEncryptedRssMB === undefined
        ? []
        : [
            row("chat: idle `dagbot start` bot RSS, encrypted room", c.botIdleEncryptedRssMB, "MB", "≤", 150),
          ]),
      row("chat: `dagbot start` bot RSS during the commands (max of 3)", c.botBusyRssMB, "MB", "≤", 200),
      // The node and its action supervisor together, idle after it ran actions.
      row(
        "chat: idle `dagbot start` node with its action supervisor, after running actions (max of 3)",
        c.nodeIdleAfterWorkRssMB,
        "MB",
        "≤",
        100,
      ),
    );
    if (c.calm !== undefined)
      rows.push(
        row(
          "chat: bot events in the main timeline, one confirmed run of 20 tasks (3 before the room was made calmer)",
          c.calm.confirmed.main,
          "",
          "≤",
          2,
        ),
        row(
          "chat: bot events in the main timeline, one run of 20 tasks started at once",
          c.calm.atOnce.main,
          "",
          "≤",
          1,
        ),
      );
  } else {
    rows.push({
      figure: "chat: reply p95 / bare round trip p95",
      value: null,
      shown: "–",
      target: "≤ 1.5 ×",
      verdict: "not measured",
      note: c?.reason ?? "",
    });
  }
  return rows;
}
