/**
 * RE2 (re2js), loaded the first time a pattern is compiled: its module is a fifth of the code every
 * command loads at start (~260 KB), and a command whose config and DAG declare no `pattern` compiles
 * none (a config with an action argument's pattern compiles it when the config is checked).
 * Matching time is linear in the input, so a crafted value cannot freeze a node (action-argv.ts,
 * param-pattern.ts).
 */
import { createRequire } from "node:module";
import type * as Re2 from "re2js";

let engine: typeof Re2.RE2JS | null = null;

/** RE2JS.compile, with re2js loaded on first use; throws re2js's error for an invalid pattern. */
export function compileRe2(source: string): Re2.RE2JS {
  engine ??= (createRequire(import.meta.url)("re2js") as typeof Re2).RE2JS;
  return engine.compile(source);
}
