/**
 * The worker's finishes on PostgreSQL, batched as River's completer batches them
 * (docs/architecture.md §8, "Commits"): a finish asked for while another batch of this Store's is
 * on its way waits for it and then goes with every finish asked for meanwhile, in ONE statement
 * and one commit, each fenced by its own token (tasks.ts, FINISH_MANY). A finish asked for when
 * none is on its way goes at once, alone, as it always did: batching adds no wait, it only uses the
 * one there was. Finishes that ask to claim share the batch's one claim when their offers are the
 * same (one node's slots); others wait for a batch of their own.
 *
 * What a batch cannot change: a refused finish is refused alone (its own error, nothing claimed for
 * it) and the others go on; a statement that fails as a whole is sent again finish by finish, so
 * one finish that the server rejects cannot fail the finishes that happened to go with it.
 */
import type { TaskStatus } from "../../domain/model.js";
import type { ClaimBatch, NodeOffer, TaskResult, TaskToken } from "../../ports/store.js";
import type { Db } from "./db.js";
import type { FinishOrder } from "../store-common/ops/finish.js";
import {
  attemptOf,
  checkFinish,
  finishAndClaimOne,
  finishOne,
  finishOrder,
} from "../store-common/ops/finish.js";
import { autocommitScript, readScript } from "./script-driver.js";
import type { FinishAnswer } from "./tasks.js";
import { finishMany } from "./tasks.js";

/** The most finishes one statement carries (its parameter arrays stay small). */
const MAX_FINISHES_PER_STATEMENT = 64;
/**
 * Batches of one Store on their way at once. One would serialize the slots: half of them would
 * wait for the other half's statement (a lockstep of two alternating batches); two let a batch
 * form while the last one is on its way and the one before it is being answered.
 */
const IN_FLIGHT = 2;

interface Waiting extends FinishOrder {
  offer: NodeOffer | null;
  offerKey: string | null;
  answer: (a: FinishAnswer) => void;
}

const keyOf = (o: FinishOrder): string => `${o.token.runId}\u0000${o.token.taskId}`;

export class Finishes {
  private waiting: Waiting[] = [];
  private sending = 0;
  /** Statements sent and finishes carried (test/adapters/postgres-finishes.test.ts reads them). */
  readonly counts = { statements: 0, finishes: 0 };

  constructor(private readonly db: Db) {}

  async finish(token: TaskToken, result: TaskResult): Promise<{ status: TaskStatus }> {
    checkFinish(result, null);
    const attempt = token.claim ?? (await readScript(this.db, "finish task", () => attemptOf(token)));
    const a = await this.enqueue(finishOrder(token, result, null, attempt), null);
    if (!a.ok) throw a.error;
    return { status: a.status };
  }

  async finishAndClaim(
    token: TaskToken,
    result: TaskResult,
    offer: NodeOffer,
    max: number,
  ): Promise<{ status: TaskStatus; batch: ClaimBatch }> {
    checkFinish(result, { offer, max });
    const attempt = token.claim ?? (await readScript(this.db, "finish task", () => attemptOf(token)));
    const a = await this.enqueue(finishOrder(token, result, { offer, max }, attempt), offer);
    if (!a.ok) throw a.error;
    return { status: a.status, batch: a.batch ?? { claimed: [], more: false, nextReadyInMs: null } };
  }

  /** `order` was checked by finishOrder, so a bad finish threw to its own caller and never joins a batch. */
  private enqueue(order: FinishOrder, offer: NodeOffer | null): Promise<FinishAnswer> {
    return new Promise((answer) => {
      this.waiting.push({
        ...order,
        offer,
        offerKey: offer === null ? null : JSON.stringify(offer),
        answer,
      });
      if (this.sending < IN_FLIGHT) void this.drain();
    });
  }

  /** Sends batches until no finish waits; at most IN_FLIGHT of this Store's on their way at a time. */
  private async drain(): Promise<void> {
    this.sending += 1;
    try {
      while (this.waiting.length > 0) {
        const batch = this.take();
        this.counts.statements += 1;
        this.counts.finishes += batch.length;
        await this.send(batch);
      }
    } finally {
      this.sending -= 1;
    }
  }

  /**
   * The next batch: waiting finishes in order, those that claim only with the first claimer's
   * offer, one finish per task (a second finish of the same task waits for the next statement, so
   * it is refused by the first's fence as it would be alone).
   */
  private take(): Waiting[] {
    const batch: Waiting[] = [];
    const left: Waiting[] = [];
    const tasks = new Set<string>();
    let offerKey: string | null = null;
    for (const w of this.waiting) {
      const fits =
        batch.length < MAX_FINISHES_PER_STATEMENT &&
        !tasks.has(keyOf(w)) &&
        (w.offerKey === null || offerKey === null || w.offerKey === offerKey);
      if (!fits) {
        left.push(w);
        continue;
      }
      batch.push(w);
      tasks.add(keyOf(w));
      offerKey ??= w.offerKey;
    }
    this.waiting = left;
    return batch;
  }

  private async send(batch: Waiting[]): Promise<void> {
    const [only] = batch;
    if (batch.length === 1 && only !== undefined) return this.alone(only);
    const offer = batch.find((w) => w.offer !== null)?.offer ?? null;
    let answers: FinishAnswer[];
    try {
      answers = await finishMany(this.db, batch, offer);
    } catch {
      // Nothing was written: each goes again alone, and gets its own answer.
      await Promise.all(batch.map((w) => this.alone(w)));
      return;
    }
    batch.forEach((w, k) =>
      w.answer(answers[k] ?? { ok: false, error: new Error("finish task: no answer") }),
    );
  }

  /** One finish in the statement it always had. */
  private async alone(w: Waiting): Promise<void> {
    try {
      const offer = w.offer;
      if (offer === null) {
        const { status } = await autocommitScript(this.db, "finish task", () => finishOne(w));
        w.answer({ ok: true, status, batch: null });
      } else {
        const { status, batch } = await autocommitScript(this.db, "finish task", () =>
          finishAndClaimOne(w, offer),
        );
        w.answer({ ok: true, status, batch });
      }
    } catch (e) {
      w.answer({ ok: false, error: e instanceof Error ? e : new Error(String(e)) });
    }
  }
}
