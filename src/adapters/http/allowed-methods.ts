/**
 * A request whose path is a route of the API but whose method is not is a 405 with an `Allow`
 * header naming the methods the path has (RFC 9110 §15.5.6), not a 404 that would say the path
 * does not exist.
 */
import type { FastifyInstance } from "fastify";

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] as const;

/** The methods the API serves at this path (without its query); empty when the path is no route. */
export function allowedMethods(app: Pick<FastifyInstance, "findRoute">, url: string): string[] {
  const path = url.split("?")[0] ?? "";
  return METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
}
