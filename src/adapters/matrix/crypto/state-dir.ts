/**
 * Where a device's crypto state lives; apart from room-crypto.ts so that naming the folder does not
 * load the WASM crypto (a node loads it only once a room is encrypted).
 */
import { join } from "node:path";

/** The folder of one device's crypto state inside the node's state folder. */
export function cryptoStateDir(stateDir: string, nodeId: string, account: string, deviceId: string): string {
  return join(stateDir, `crypto-${nodeId}-${account}-${deviceId.replace(/[^A-Za-z0-9_-]/g, "_")}`);
}
