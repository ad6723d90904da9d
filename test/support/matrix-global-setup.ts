/**
 * vitest globalSetup: installs Synapse and bakes its template database once, before the test
 * workers start, so parallel files don't each do it. Never fails the run: without Python the unit
 * tests still run, and each Synapse test fails on its own with the installer's explanation.
 */
import { prepareSynapse } from "./synapse.js";

export default async function setup(): Promise<void> {
  try {
    await prepareSynapse();
  } catch (e) {
    console.warn(`[matrix-global-setup] ${e instanceof Error ? e.message : String(e)}`);
  }
}
