// Engine test action: ignores SIGTERM and never ends on its own; only SIGKILL stops it.
// argv: <marks dir>. Writes its pid so the test can check that it is gone.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { setInterval } from "node:timers";

process.on("SIGTERM", () => {});
writeFileSync(join(process.argv[2], `${process.env.DAGBOT_TASK_ID}.pid`), String(process.pid));
setInterval(() => {}, 1_000);
