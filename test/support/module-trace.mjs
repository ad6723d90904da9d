/**
 * `node --import <this file> ...`: every module the process resolves through `import` is appended,
 * one URL a line, to the file named by DAGBOT_MODULE_TRACE. Tests read it to prove that a part (the
 * HTTP server, the WASM crypto) is not loaded by a node that does not use it.
 */
import { register } from "node:module";

register("./module-trace-hooks.mjs", import.meta.url);
