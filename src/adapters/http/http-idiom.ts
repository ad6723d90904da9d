/**
 * How the HTTP API names a command in its answers (the outcome table's idiom for this face): a
 * verb's declared route, or the hand-written one of a read, with its arguments filled in.
 */
import type { Idiom } from "../../app/commands/outcome-table.js";
import type { AnyVerb } from "../../app/commands/verb.js";
import { httpRoutesOf } from "../../app/commands/verb.js";
import * as shapes from "../../app/commands/http-shapes.js";

/** Routes written by hand for verbs (read-routes.ts), so answers can name them. */
const HAND_WRITTEN: Readonly<Record<string, { method: string; path: string }>> = {
  logs: { method: "GET", path: "/v1/runs/:id/tasks/:task/logs" },
  nodes: { method: "GET", path: "/v1/nodes" },
};

/**
 * How the HTTP API names a command in its answers: its route, path parameters filled in, and the
 * other arguments as the body's fields (`POST /v1/runs/x/confirm {"hash":"4847e234d56d"}`).
 */
export function httpIdiom(verbs: readonly AnyVerb[]): Idiom {
  return {
    command: (verb, args) => {
      const declared = verbs.find((v) => v.verb === verb);
      if (declared?.httpWords !== undefined) return declared.httpWords(args);
      const route =
        (declared === undefined ? undefined : httpRoutesOf(declared, shapes)[0]) ?? HAND_WRITTEN[verb];
      if (route === undefined) return `the ${verb} command`;
      const rest = [...args];
      const names = (declared?.args ?? []).map((a) => a.name);
      const used = new Set<string>();
      const path = route.path.replace(/:([A-Za-z]+)/g, (_m, name: string) => {
        const at = names.indexOf(name);
        used.add(name);
        return encodeURIComponent((at >= 0 ? args[at] : rest.shift()) ?? `{${name}}`);
      });
      const fields = Object.fromEntries(
        names.map((n, i) => [n, args[i]] as const).filter(([n, v]) => !used.has(n) && v !== undefined),
      );
      return `${route.method} ${path}${Object.keys(fields).length === 0 ? "" : ` ${JSON.stringify(fields)}`}`;
    },
  };
}
