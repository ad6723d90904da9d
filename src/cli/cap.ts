/** `dagbot cap N`: set the room's global cap on active tasks while runs are in flight. */
import type { Command } from "commander";
import { MAX_CAP } from "../domain/command-table.js";
import {
  CliError,
  openConfiguredStore,
  pickRoom,
  resolveConfig,
  runCli,
  withCommonOptions,
} from "./engine-setup.js";
import type { CommonOptions } from "./engine-setup.js";

interface CapOptions extends CommonOptions {
  room?: string;
  json?: boolean;
}

export function registerCap(program: Command): void {
  withCommonOptions(
    program
      .command("cap")
      .description("Set the room's global cap on active (queued or running) tasks, effective at once.")
      .argument("<n>", `the new cap, 0 to ${MAX_CAP} (0 pauses admission)`)
      .option("--room <room>", "the room (default: the config's only room)")
      .option("--json", "print { room, cap, previous } as JSON"),
    "Raising the cap lets the leader queue waiting tasks at once; lowering it never interrupts a running task\n" +
      "(admission stops until enough tasks finish). Exit status: 0 set, 2 bad value or config, 1 store error.",
  ).action((n: string, options: CapOptions) => runCli("cap", () => setCap(n, options)));
}

async function setCap(text: string, options: CapOptions): Promise<number> {
  const cap = /^\d{1,6}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(cap) || cap > MAX_CAP) {
    throw new CliError(`cap must be a whole number from 0 to ${MAX_CAP}, got "${text.slice(0, 20)}"`);
  }
  const config = resolveConfig(options, {}, { storeOnly: true });
  const roomId = pickRoom(config, options.room);
  const store = await openConfiguredStore(config);
  try {
    const { previous } = await store.setRoomCap(roomId, cap);
    if (options.json === true) process.stdout.write(`${JSON.stringify({ room: roomId, cap, previous })}\n`);
    else process.stdout.write(`cap of room ${roomId}: ${cap} (was ${previous})\n`);
    return 0;
  } finally {
    await store.close();
  }
}
