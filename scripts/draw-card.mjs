/**
 * Draws docs/pictures/card-running.png, the picture of a status card in docs/chat.md: the card's own HTML
 * from the built renderer (renderStatusCard), laid out as a chat client shows a message (sender,
 * bold title, paragraphs, a bullet list, code spans, a small footer) in SVG and turned into a PNG by
 * resvg with the bundled DejaVu Sans, as run pictures are. Emoji are drawn as dots in the graph's
 * state colours (DejaVu Sans has no colour emoji). `npm run build && node scripts/draw-card.mjs`.
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, URL } from "node:url";
import { renderStatusCard } from "../dist/app/render/status-card.js";
import { STATE_STYLE } from "../dist/adapters/graph/dot.js";

const require = createRequire(import.meta.url);
const { Resvg } = require("@resvg/resvg-js");
const asset = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const OUT = asset("docs/pictures/card-running.png");

// A nightly ETL run of 20 tasks, mid-flight: 14 succeeded, one failed, two running, three waiting.
const T0 = Date.UTC(2026, 10, 26, 2, 0, 0);
const NOW = T0 + 95_000;
const ids = [
  "extract_orders",
  "extract_users",
  "extract_events",
  "extract_refunds",
  "clean_orders",
  "clean_users",
  "clean_events",
  "clean_refunds",
  "dedupe_events",
  "join_orders_users",
  "currency_fx",
  "load_orders",
  "load_users",
  "load_events",
  "load_refunds",
  "aggregate_daily",
  "aggregate_weekly",
  "refresh_dashboards",
  "export_finance",
  "notify",
];
const status = (i) =>
  i === 14 ? "failed" : i === 15 || i === 16 ? "running" : i >= 17 ? "blocked" : "succeeded";
const tasks = ids.map((taskId, i) => {
  const s = status(i);
  const started = s === "blocked" ? null : T0 + i * 4_000;
  return {
    runId: "4c1d9e7a-2b3f-4e5a-9c8d-7f6e5d4c3b2a",
    taskId,
    seq: i + 1,
    status: s,
    version: 3,
    attempt: s === "failed" ? 2 : 1,
    maxAttempts: s === "failed" ? 2 : 1,
    action: "etl",
    args: {},
    needs: [],
    on: { labels: [], node: null },
    priority: 0,
    concurrencyKey: null,
    timeoutMs: null,
    queueTimeoutMs: null,
    retryBackoffMs: 1000,
    executor: s === "blocked" ? null : { nodeId: `node-${"abc"[i % 3]}`, bootId: "b" },
    leaseExpiresAt: null,
    notBefore: null,
    deadline: null,
    queuedAt: T0,
    startedAt: started,
    finishedAt: s === "succeeded" || s === "failed" ? started + 3_000 + (i % 4) * 1_000 : null,
    exitCode: s === "failed" ? 2 : s === "succeeded" ? 0 : null,
    output: null,
    outputBytes: null,
    error: s === "failed" ? "exited with status 2" : null,
  };
});
const run = {
  runId: "4c1d9e7a-2b3f-4e5a-9c8d-7f6e5d4c3b2a",
  roomId: "!ops:example.org",
  dagId: "nightly_etl",
  hash: "9f2c4e1ab7d03c55",
  status: "running",
  description: "Orders, users and events into the warehouse",
  maxParallel: null,
  publisher: "@alice:example.org",
  publishEventId: "$publish",
  confirmedBy: "@bob:example.org",
  confirmDeadline: null,
  createdAt: T0,
  updatedAt: NOW,
  dag: { id: "nightly_etl", description: null, maxParallel: null, tasks: [] },
};
const card = renderStatusCard(run, tasks, NOW, 16);

// --- The card's HTML as blocks of styled runs -------------------------------------------------

const EMOJI_COLOUR = {
  "✅": STATE_STYLE.succeeded.border,
  "❌": STATE_STYLE.failed.fill,
  "🔄": STATE_STYLE.running.border,
  "⚪": STATE_STYLE.blocked.border,
  "🕒": STATE_STYLE.queued.border,
  "🛑": STATE_STYLE.canceling.border,
  "⏱️": STATE_STYLE.timed_out.fill,
  "🚫": STATE_STYLE.canceled.border,
  "⏭️": STATE_STYLE.skipped.border,
  "⏳": STATE_STYLE.queued.border,
};

const unescape = (s) =>
  s
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");

/** [{ kind: "p" | "li" | "sub", runs: [{ text, bold, code, link, colour }] }] */
function blocks(html) {
  const out = [];
  let current = null;
  const style = { bold: 0, code: 0, link: 0, sub: 0 };
  for (const m of html.matchAll(/<(\/?)(\w+)[^>]*>|([^<]+)/g)) {
    const [, close, tag, raw] = m;
    if (raw !== undefined) {
      current ??= { kind: "p", runs: [] };
      for (const piece of unescape(raw).split(/(✅|❌|🔄|⚪|🕒|🛑|⏱️|🚫|⏭️|⏳)/u)) {
        if (piece === "") continue;
        const colour = EMOJI_COLOUR[piece];
        current.runs.push(
          colour !== undefined
            ? { text: "●", colour, bold: false, code: false, link: false }
            : { text: piece, bold: style.bold > 0, code: style.code > 0, link: style.link > 0 },
        );
      }
      continue;
    }
    const d = close === "" ? 1 : -1;
    if (tag === "b" || tag === "strong") style.bold += d;
    else if (tag === "code") style.code += d;
    else if (tag === "a") style.link += d;
    else if (tag === "sub") style.sub += d;
    if ((tag === "p" || tag === "li") && close === "") current = { kind: tag, runs: [] };
    if ((tag === "p" || tag === "li") && close === "/") {
      if (current !== null && current.runs.length > 0)
        out.push({ ...current, small: style.sub > 0 || current.small });
      current = null;
    }
    if (tag === "sub" && close === "" && current !== null) current.small = true;
  }
  return out;
}

// --- SVG in the look of a chat client's message -----------------------------------------------

const xml = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const FONT = "DejaVu Sans";
const PAD = 20;
const AVATAR = 36;
const LEFT = PAD + AVATAR + 12;

function tspans(runs, size) {
  return runs
    .map((r) => {
      const attrs = [];
      if (r.colour !== undefined) attrs.push(`fill="${r.colour}"`, `font-size="${size + 2}"`);
      else if (r.code) attrs.push(`fill="#b3261e"`, `font-size="${size - 1}"`);
      else if (r.link) attrs.push(`fill="#0b6bcb"`);
      if (r.bold) attrs.push(`font-weight="bold"`);
      return `<tspan ${attrs.join(" ")} xml:space="preserve">${xml(r.text)}</tspan>`;
    })
    .join("");
}

function svgOf(width, background = true) {
  const parts = [];
  let y = PAD + 14;
  parts.push(`<circle cx="${PAD + AVATAR / 2}" cy="${PAD + AVATAR / 2}" r="${AVATAR / 2}" fill="#5c6bc0"/>`);
  parts.push(
    `<text x="${PAD + AVATAR / 2}" y="${PAD + AVATAR / 2 + 6}" text-anchor="middle" font-size="17" font-weight="bold" fill="#fff">D</text>`,
  );
  parts.push(
    `<text x="${LEFT}" y="${y}" font-size="14" font-weight="bold" fill="#5c6bc0">dagbot <tspan font-weight="normal" fill="#8d99a5" font-size="12">  02:01</tspan></text>`,
  );
  y += 8;
  for (const b of blocks(card.html)) {
    const size = b.small ? 12 : 14;
    y += b.kind === "li" ? size + 8 : size + 12;
    const x = b.kind === "li" ? LEFT + 20 : LEFT;
    if (b.kind === "li")
      parts.push(`<text x="${LEFT + 6}" y="${y}" font-size="${size}" fill="#17191c">•</text>`);
    parts.push(
      `<text x="${x}" y="${y}" font-size="${size}" fill="${b.small ? "#737d8c" : "#17191c"}">${tspans(b.runs, size)}</text>`,
    );
  }
  const height = y + PAD;
  return {
    height,
    svg:
      `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="${FONT}">` +
      `${background ? `<rect width="100%" height="100%" fill="#ffffff"/>` : ""}${parts.join("")}</svg>`,
  };
}

const fonts = {
  loadSystemFonts: false,
  fontFiles: [asset("assets/fonts/DejaVuSans.ttf"), asset("assets/fonts/DejaVuSans-Bold.ttf")],
  defaultFontFamily: FONT,
  sansSerifFamily: FONT,
};
// Lay out once wide, measure what was drawn, then draw at that width (plus the margin).
const wide = svgOf(2000, false);
const measured = new Resvg(wide.svg, { font: fonts }).innerBBox();
const width = Math.ceil((measured?.x ?? 0) + (measured?.width ?? 1200) + PAD);
const final = new Resvg(svgOf(width).svg, {
  font: fonts,
  background: "white",
  fitTo: { mode: "zoom", value: 1.5 },
});
const image = final.render();
writeFileSync(OUT, image.asPng());
console.log(`${OUT}: ${image.width} × ${image.height}`);
console.log(card.body);
