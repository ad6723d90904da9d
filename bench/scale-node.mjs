/**
 * A node process for the five-room part of the scale section: `dagbot node`'s composition (config,
 * store opened with retry, engine node, graceful stop on SIGTERM) with the rooms given on the
 * command line, since a node without Matrix serves only the local room. No command handling: the
 * five-room part measures an idle fleet. Usage: node scale-node.mjs <config.toml> <room,room,...>
 */
import process from "node:process";
import { load } from "./lib/dist.mjs";

const [configPath, roomList] = process.argv.slice(2);
const { engineSettings, makeLogger } = await load("composition/engine-settings.js");
const { openNodeStore } = await load("composition/store-open.js");
const { resolveConfig } = await load("composition/config-resolve.js");
const { startEngineNode } = await load("app/node.js");
const { createProcessExecutor } = await load("adapters/exec/process-executor.js");
const { systemClock } = await load("adapters/clock/system-clock.js");

const config = resolveConfig({ config: configPath });
const logger = makeLogger(config);
let signalled;
const firstSignal = new Promise((resolve) => (signalled = resolve));
let onStop = () => {};
const onSignal = () => {
  signalled();
  onStop();
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
const store = await openNodeStore(config, logger, firstSignal);
if (store !== null) {
  const node = startEngineNode(engineSettings(config, { roomIds: roomList.split(",") }), {
    store,
    executor: createProcessExecutor(),
    clock: systemClock,
    logger,
    processInbox: null,
  });
  await new Promise((resolve) => {
    onStop = () => void node.stop().then(resolve);
  });
  await store.close();
}
