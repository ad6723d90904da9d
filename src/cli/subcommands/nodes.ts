/** `dagbot nodes`: every node in the store with its labels, heartbeat age and running tasks, and who leads each room. */
import type { Command } from "commander";
import { formatDuration } from "../../domain/duration.js";
import { describeRelease } from "../../domain/release.js";
import type { LeaseState } from "../../ports/store.js";
import { deviceWords, undecryptableWords } from "../../app/render/node-crypto-words.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { noLeaderAdvice } from "../../composition/leaderless-room.js";
import { resolveConfig, withCommonOptions } from "../config-options.js";
import { runCli } from "../cli-error.js";
import type { CommonOptions } from "../config-options.js";

interface NodesOptions extends CommonOptions {
  json?: boolean;
  check?: boolean;
}

export function registerNodes(program: Command): void {
  withCommonOptions(
    program
      .command("nodes")
      .description(
        "List the nodes of the store: labels, capacity, heartbeat age, running tasks, release and fleet protocol, and the leader of each room.",
      )
      .option(
        "--json",
        'print JSON: { goneAfterMs, forgetAfterMs, nodes: [{ state: "alive" | "gone", ... }], leaders: [...] }',
      )
      .option(
        "--check",
        "only check this config's node: exit 0 if its heartbeat is younger than its lease ttl, else 1 (a container healthcheck)",
      ),
    "A node whose heartbeat is older than retention.node_gone_after is shown as gone, with how long ago it\n" +
      "was last heard of; the leader drops it after retention.forget_nodes_after. Rooms are those any node\n" +
      "serves plus the config's own. Exit status: 0 shown (with --check: the node is alive), 1 store error\n" +
      "(with --check: the node has no fresh heartbeat), 2 bad config.",
  ).action((options: NodesOptions) => runCli("nodes", () => nodes(options)));
}

async function nodes(options: NodesOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const store = await openConfiguredStore(config, { existing: true });
  try {
    const list = await store.listNodes();
    if (options.check === true) {
      const own = list.find((n) => n.session.nodeId === config.nodeId);
      if (own === undefined || own.heartbeatAgeMs >= config.lease.ttlMs) {
        const why =
          own === undefined ? "no heartbeat" : `last heartbeat ${formatDuration(own.heartbeatAgeMs)} ago`;
        process.stdout.write(`node ${config.nodeId}: ${why}\n`);
        return 1;
      }
      process.stdout.write(
        `node ${config.nodeId}: alive, heartbeat ${formatDuration(own.heartbeatAgeMs)} ago\n`,
      );
      return 0;
    }
    const rooms = [...new Set([...config.rooms, ...list.flatMap((n) => n.roomIds)])].sort();
    const leases = (await Promise.all(rooms.map((r) => store.getLease(r)))).filter(
      (l): l is LeaseState => l !== null && l.holder !== null && l.expiresAt > l.now,
    );
    const leads = (nodeId: string, bootId: string): string[] =>
      leases.filter((l) => l.holder?.nodeId === nodeId && l.holder.bootId === bootId).map((l) => l.roomId);
    // Silent past node_gone_after: killed, crashed or cut off. The leader drops the row once it has
    // been silent for retention.forget_nodes_after.
    const goneAfterMs = config.retention.nodeGoneAfterMs;
    const isGone = (ageMs: number): boolean => ageMs > goneAfterMs;
    // A room without a leader because this config's [permissions] disagree with its policy: why.
    const held = new Map<string, string>();
    for (const room of rooms) {
      const why = await noLeaderAdvice(store, config, room);
      if (why !== null) held.set(room, why);
    }
    if (options.json === true) {
      const out = {
        goneAfterMs,
        forgetAfterMs: config.retention.forgetNodesAfterMs,
        nodes: list.map((n) => ({
          nodeId: n.session.nodeId,
          bootId: n.session.bootId,
          state: isGone(n.heartbeatAgeMs) ? "gone" : "alive",
          labels: n.labels,
          capacity: n.capacity,
          actions: n.actions,
          rooms: n.roomIds,
          heartbeatAgeMs: n.heartbeatAgeMs,
          runningTasks: n.runningTasks,
          startedAt: n.startedAt,
          release: n.release,
          protocol: n.protocol ?? 1,
          undecryptable: n.undecryptable,
          undecryptableReason: n.undecryptableReason,
          deviceSigned: n.deviceSigned,
          leads: leads(n.session.nodeId, n.session.bootId),
        })),
        leaders: leases.map((l) => ({
          room: l.roomId,
          nodeId: l.holder?.nodeId,
          bootId: l.holder?.bootId,
          term: l.term,
          expiresInMs: l.expiresAt - l.now,
        })),
        noLeader: [...held].map(([room, why]) => ({ room, why })),
      };
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
      return 0;
    }
    if (list.length === 0) process.stdout.write("no nodes\n");
    for (const n of list) {
      if (isGone(n.heartbeatAgeMs)) {
        const line = `${n.session.nodeId.padEnd(16)} gone: last heartbeat ${formatDuration(n.heartbeatAgeMs)} ago`;
        process.stdout.write(`${line}\n`);
        continue;
      }
      const led = leads(n.session.nodeId, n.session.bootId);
      const cols = [
        n.session.nodeId.padEnd(16),
        `labels [${n.labels.join(", ")}]`.padEnd(24),
        `running ${n.runningTasks}/${n.capacity}`.padEnd(12),
        `heartbeat ${formatDuration(n.heartbeatAgeMs)} ago`.padEnd(22),
        describeRelease(n.release, n.protocol).padEnd(30),
        ...[led.length > 0 ? `leads ${led.join(", ")}` : null, deviceWords(n), undecryptableWords(n)].filter(
          (w) => w !== null,
        ),
      ];
      process.stdout.write(`${cols.join(" ").trimEnd()}\n`);
    }
    // An upgrade in progress: say so, with each release's nodes (docs/operations.md, Upgrading).
    const releases = new Map<string, string[]>();
    for (const n of list.filter((x) => !isGone(x.heartbeatAgeMs))) {
      const key = describeRelease(n.release, n.protocol);
      releases.set(key, [...(releases.get(key) ?? []), n.session.nodeId]);
    }
    if (releases.size > 1)
      process.stdout.write(
        `mixed releases: ${[...releases].map(([rel, ids]) => `${rel} (${ids.join(", ")})`).join("; ")}\n`,
      );
    for (const room of rooms) {
      const lease = leases.find((l) => l.roomId === room);
      process.stdout.write(
        lease === undefined
          ? `room ${room}: no leader${held.has(room) ? ` — ${held.get(room)}` : ""}\n`
          : `room ${room}: led by ${lease.holder?.nodeId ?? "?"} (term ${lease.term})\n`,
      );
    }
    return 0;
  } finally {
    await store.close();
  }
}
