/** The resolve hook of module-trace.mjs (module hooks run in their own thread). */
import { appendFileSync } from "node:fs";
import process from "node:process";

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const file = process.env.DAGBOT_MODULE_TRACE;
  if (file) appendFileSync(file, `${resolved.url}\n`);
  return resolved;
}
