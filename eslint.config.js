// Lint rules, including the layer rules of docs/architecture.md §2: imports point
// inward (entry points → adapters → app → ports → domain); the domain is pure; the app imports no
// driver or SDK and reads no env, argv or signals; only adapters and the entry points touch the
// outside world, and nothing but the entry points imports them.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

/** The outermost rings: the CLI and composition roots, and the dev harness (Synapse for demo and tests). */
const entryPoints = ["**/cli/**", "**/cli.js", "**/composition/**", "**/harness/**"];

const drivers = [
  "better-sqlite3",
  "pg",
  "matrix-bot-sdk",
  "node:child_process",
  "child_process",
  "node:http",
  "http",
  "pino",
  "fastify",
  "@fastify/swagger",
  "fastify-type-provider-zod",
  "prom-client",
];

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "stubs/", "coverage/", ".venv*/", "tmp/", "bench/results/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { languageOptions: { globals: { ...globals.node } } },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  {
    files: ["src/domain/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: [...drivers, "node:fs", "fs", "node:net", "node:timers"].map((name) => ({
            name,
            message: "src/domain is pure: no I/O, drivers or loggers.",
          })),
          patterns: [
            {
              group: ["**/adapters/**", "**/app/**", "**/config/**", "**/ports/**", ...entryPoints],
              message: "domain imports nothing outward.",
            },
          ],
        },
      ],
      "no-restricted-globals": [
        "error",
        { name: "process", message: "src/domain reads no env or argv." },
        { name: "setTimeout", message: "src/domain has no timers." },
        { name: "setInterval", message: "src/domain has no timers." },
      ],
    },
  },
  {
    files: ["src/app/**/*.ts", "src/ports/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          paths: drivers.map((name) => ({ name, message: "only src/adapters imports drivers and SDKs." })),
          patterns: [
            { group: ["**/adapters/**"], message: "app and ports depend on ports, not adapters." },
            {
              group: ["**/config/**", ...entryPoints],
              message: "app and ports get their settings and wiring passed in by a composition root.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["src/app/**/*.ts"],
    rules: {
      "no-restricted-globals": [
        "error",
        {
          name: "process",
          message: "src/app reads no env, argv or signals: the composition root passes them in.",
        },
      ],
    },
  },
  {
    files: ["src/adapters/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: entryPoints, message: "adapters are wired by the entry points, never the reverse." },
          ],
        },
      ],
    },
  },
  {
    // The Matrix adapter is a face: it turns events into inbox rows and outbox rows into messages, and
    // knows no verb (docs/architecture.md, "Layers"); what a command is, it asks the domain.
    files: ["src/adapters/matrix/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: entryPoints, message: "adapters are wired by the entry points, never the reverse." },
            { group: ["**/app/**"], message: "the Matrix adapter imports no part of src/app." },
          ],
        },
      ],
    },
  },
  {
    // Composition wires; the CLI parses argv and prints, calling composition: never the reverse.
    files: ["src/composition/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ group: ["**/cli/**", "**/cli.js"], message: "composition never imports the CLI." }] },
      ],
    },
  },
  {
    files: ["src/cli/**/*.ts", "src/cli.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/adapters/**"],
              message: "the CLI parses argv and prints; src/composition wires adapters.",
            },
          ],
        },
      ],
    },
  },
  {
    // Signals and exit hooks belong to the entry points (docs/architecture.md §2): a library that listens at
    // import time, or at all, takes a decision that is the composition root's.
    files: [
      "src/domain/**/*.ts",
      "src/ports/**/*.ts",
      "src/app/**/*.ts",
      "src/adapters/**/*.ts",
      "src/config/**/*.ts",
    ],
    rules: {
      "no-restricted-properties": [
        "error",
        {
          object: "process",
          property: "on",
          message: "only src/composition, src/cli and src/harness listen to process events.",
        },
        {
          object: "process",
          property: "once",
          message: "only src/composition, src/cli and src/harness listen to process events.",
        },
      ],
    },
  },
  {
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },
);
