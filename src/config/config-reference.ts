/**
 * The node config's reference, as the markdown tables of docs/configuration.md, made from the schema
 * itself (docs/architecture.md §7: one config schema) so the page cannot drift from what a node
 * accepts: each key's type, default and description come from `nodeConfigFileSchema`.
 * `npm run docs` writes it into the page; test/unit/config-reference.test.ts fails when they differ.
 */
import * as z from "zod";
import { nodeConfigFileSchema } from "./node-config.js";

/** The markers around the generated part of docs/configuration.md. */
export const REFERENCE_START = "<!-- config-reference:start (npm run docs writes this part) -->";
export const REFERENCE_END = "<!-- config-reference:end -->";

interface JsonSchema {
  type?: string | string[];
  description?: string;
  default?: unknown;
  unit?: string;
  /** A default the loader fills in, in words (`node_id`: the host name). */
  shownDefault?: string;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  required?: string[];
  minimum?: number;
  maximum?: number;
}

interface Section {
  /** How the section is written in TOML: `[matrix]`, `[actions.NAME]`, `[[webhooks]]`. */
  heading: string;
  description: string | undefined;
  schema: JsonSchema;
}

function isObject(s: JsonSchema | undefined): s is JsonSchema & { properties: Record<string, JsonSchema> } {
  return s !== undefined && s.properties !== undefined;
}

/** A record whose values are tables (`[actions.NAME]`): its value schema, else undefined. */
function recordOfTables(s: JsonSchema): JsonSchema | undefined {
  const values = s.additionalProperties;
  return typeof values === "object" && isObject(values) ? values : undefined;
}

/** An array of tables (`[[webhooks]]`): its item schema, else undefined. */
function arrayOfTables(s: JsonSchema): JsonSchema | undefined {
  return s.type === "array" && isObject(s.items) ? s.items : undefined;
}

function typeOf(s: JsonSchema): string {
  if (s.unit === "duration") return "duration";
  if (s.unit === "size") return "size";
  if (s.enum !== undefined) return s.enum.map((v) => `\`${JSON.stringify(v)}\``).join(" or ");
  if (s.type === "integer") {
    const range = s.minimum !== undefined && s.maximum !== undefined ? ` ${s.minimum}–${s.maximum}` : "";
    return `integer${range}`;
  }
  if (s.type === "array") return s.items === undefined ? "list" : `list of ${typeOf(s.items)}s`;
  if (s.type === "object") {
    const values = s.additionalProperties;
    return typeof values === "object" ? `table of ${typeOf(values)}s` : "table";
  }
  if (typeof s.type === "string") return s.type;
  return "value";
}

function defaultOf(s: JsonSchema, required: boolean): string {
  if (s.shownDefault !== undefined) return s.shownDefault;
  if (required) return "required";
  if (s.default === undefined) return "—";
  if (typeof s.default === "object" && s.default !== null && Object.keys(s.default).length === 0)
    return Array.isArray(s.default) ? "`[]`" : "—";
  return `\`${JSON.stringify(s.default)}\``;
}

/** Table cells hold no line breaks and no unescaped pipes. */
function cell(text: string): string {
  return text.replaceAll("|", "\\|").replaceAll("\n", " ");
}

function sectionsOf(schema: JsonSchema, path: string, out: Section[]): void {
  if (!isObject(schema)) return;
  for (const [key, child] of Object.entries(schema.properties)) {
    const at = path === "" ? key : `${path}.${key}`;
    const table = isObject(child) ? child : undefined;
    const record = recordOfTables(child);
    const array = arrayOfTables(child);
    if (table !== undefined) {
      out.push({ heading: `[${at}]`, description: child.description, schema: table });
      sectionsOf(table, at, out);
    } else if (record !== undefined) {
      const name = `${at}.${key === "actions" ? "NAME" : key === "args" ? "ARG" : "KEY"}`;
      out.push({ heading: `[${name}]`, description: child.description, schema: record });
      sectionsOf(record, name, out);
    } else if (array !== undefined) {
      out.push({ heading: `[[${at}]]`, description: child.description, schema: array });
      sectionsOf(array, at, out);
    }
  }
}

function tableOf(schema: JsonSchema): string[] {
  const rows = ["| key | type | default | description |", "|---|---|---|---|"];
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    if (isObject(child) || recordOfTables(child) !== undefined || arrayOfTables(child) !== undefined) {
      const kind = arrayOfTables(child) !== undefined ? "list of tables" : "table";
      rows.push(`| \`${key}\` | ${kind} | — | ${cell(child.description ?? "")} (below) |`);
      continue;
    }
    const required = schema.required?.includes(key) === true && child.default === undefined;
    rows.push(
      `| \`${key}\` | ${cell(typeOf(child))} | ${cell(defaultOf(child, required))} | ${cell(child.description ?? "")} |`,
    );
  }
  return rows;
}

/** The generated part of docs/configuration.md, markers included. */
export function configReference(): string {
  const schema = z.toJSONSchema(nodeConfigFileSchema(), {
    io: "input",
    unrepresentable: "any",
  }) as JsonSchema;
  const sections: Section[] = [];
  sectionsOf(schema, "", sections);
  const parts = [
    REFERENCE_START,
    "",
    'A duration is a number and a unit: `"500ms"`, `"30s"`, `"10m"`, `"1h"`, `"7d"`. A size is bytes',
    '(`65536`) or a number and a unit: `"64KiB"`, `"1MiB"`. "—" in the default column: absent unless set.',
    "",
    "### Top level",
    "",
    ...tableOf(schema),
  ];
  for (const section of sections) {
    parts.push("", `### \`${section.heading}\``, "");
    if (section.description !== undefined) parts.push(section.description, "");
    parts.push(...tableOf(section.schema));
  }
  parts.push("", REFERENCE_END);
  return parts.join("\n");
}

/** `page` with its generated part replaced by `reference`; an error when the page has no markers. */
export function withReference(page: string, reference: string): string {
  const start = page.indexOf(REFERENCE_START);
  const end = page.indexOf(REFERENCE_END);
  if (start < 0 || end < start)
    throw new Error(`the page has no "${REFERENCE_START}" … "${REFERENCE_END}" part`);
  return page.slice(0, start) + reference + page.slice(end + REFERENCE_END.length);
}
