/**
 * Files the package ships beside its code, found from the root of the tree this module was built
 * into (src/ under the tests, dist/ installed) rather than from each module's own folder: the
 * command's modules are bundled into a few chunks at dist/'s top (scripts/bundle-cli.mjs), where a
 * module no longer sits in its own folder (bench/README.md, "`dagbot run` of a one-task DAG").
 * Whatever imports this must stay at that depth, which the bundle's chunks keep.
 */
import { fileURLToPath } from "node:url";

const TREE = new URL("./", import.meta.url);

/** A path below the package's root (config/, assets/, package.json). */
export function packageFile(relative: string): string {
  return fileURLToPath(new URL(`../${relative}`, TREE));
}

/** A URL below the built tree (src/ or dist/): files copied beside the compiled modules. */
export function treeUrl(relative: string): URL {
  return new URL(relative, TREE);
}
