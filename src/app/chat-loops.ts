/**
 * The chat side of leading a room, beside the engine's leader loop: while this node leads a room it
 * sends the room's outbox (outbox-loop.ts) and keeps its status cards current (status-cards.ts),
 * and it posts the one notice that an encrypted room is not supported. Plugged into the engine node
 * through its onLeadership callback: a fence starts the room's loops, null stops them.
 */
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type { LeaderFence, Store } from "../ports/store.js";
import { isConflict } from "../ports/errors.js";
import type { EngineObserver } from "./engine-observer.js";
import type { PictureMaker } from "./pictures.js";
import { runOutboxLoop, type OutboxLoopOptions, type OutboxTransport } from "./outbox-loop.js";
import { runStatusCardLoop, type StatusCardOptions } from "./status-cards.js";

export interface ChatLoopsDeps {
  store: Store;
  transport: OutboxTransport;
  clock: Clock;
  logger: Logger;
  /** Whether intake found the room encrypted (then nothing but the notice is posted there). */
  isEncrypted: (roomId: string) => boolean;
  outbox?: OutboxLoopOptions;
  cards?: StatusCardOptions;
  /** Draws and uploads `!dag graph` pictures (absent: such a request is answered with a notice). */
  pictures?: PictureMaker;
  /** Observes the outbox loops' failed passes (metrics). */
  observer?: EngineObserver;
  /** The room's members at or above a power level: whom a gate's message mentions. */
  members?: (roomId: string, level: number) => Promise<string[]>;
  /** The fleet's bot accounts: never named as a gate's approvers. */
  bots?: ReadonlySet<string>;
}

export interface ChatLoops {
  /** The engine node's onLeadership callback. */
  onLeadership(roomId: string, fence: LeaderFence | null): void;
  /** Intake found `roomId` encrypted: post the notice if this node leads it. */
  roomEncrypted(roomId: string): void;
  /** Stops every room's loops and waits for them; later leadership changes are ignored. */
  stop(): Promise<void>;
}

export const e2eeNoticeTxnId = (roomId: string): string => `e2ee-notice.${roomId}`;

const E2EE_NOTICE =
  "This room is end-to-end encrypted, and dagbot does not support encryption: it cannot read " +
  "commands here and will not act in this room. Use an unencrypted room for dagbot.";

interface Leading {
  fence: LeaderFence;
  abort: AbortController;
  done: Promise<void>;
}

export function createChatLoops(deps: ChatLoopsDeps): ChatLoops {
  const log = deps.logger;
  const leading = new Map<string, Leading>();
  /** The newest fence (or null) the engine reported per room: a late start for an old term is dropped. */
  const wanted = new Map<string, LeaderFence | null>();
  let stopped = false;

  const postE2eeNotice = async (fence: LeaderFence): Promise<void> => {
    try {
      // Insert-or-ignore on the txnId: one notice per room, whichever node leads and however often.
      await deps.store.enqueueOutbox(fence, [
        {
          txnId: e2eeNoticeTxnId(fence.roomId),
          roomId: fence.roomId,
          eventType: "m.room.message",
          content: {
            msgtype: "m.notice",
            body: E2EE_NOTICE,
            format: "org.matrix.custom.html",
            formatted_body: `<p>${E2EE_NOTICE}</p>`,
            "m.mentions": {},
          },
        },
      ]);
    } catch (err) {
      if (!isConflict(err))
        log.warn({ room: fence.roomId, err: String(err) }, "could not queue the e2ee notice");
    }
  };

  const start = (fence: LeaderFence): void => {
    const abort = new AbortController();
    const roomDeps = { store: deps.store, clock: deps.clock, logger: log };
    const loops: Promise<void>[] = [
      runOutboxLoop(
        {
          ...roomDeps,
          transport: deps.transport,
          onStoreError: () => deps.observer?.storeError?.("outbox"),
          ...(deps.pictures ? { pictures: deps.pictures } : {}),
        },
        fence,
        abort.signal,
        deps.outbox,
      ),
    ];
    if (deps.isEncrypted(fence.roomId)) loops.push(postE2eeNotice(fence));
    else
      loops.push(
        runStatusCardLoop(
          {
            ...roomDeps,
            ...(deps.members === undefined ? {} : { members: deps.members }),
            ...(deps.bots === undefined ? {} : { bots: deps.bots }),
          },
          fence,
          abort.signal,
          deps.cards,
        ),
      );
    const done = Promise.all(loops).then(
      () => undefined,
      (err: unknown) => log.error({ room: fence.roomId, err: String(err) }, "chat loop crashed"),
    );
    leading.set(fence.roomId, { fence, abort, done });
  };

  const end = async (roomId: string): Promise<void> => {
    const current = leading.get(roomId);
    if (current === undefined) return;
    leading.delete(roomId);
    current.abort.abort();
    await current.done;
  };

  return {
    onLeadership(roomId, fence) {
      if (stopped) return;
      wanted.set(roomId, fence);
      const previous = leading.get(roomId);
      if (previous !== undefined) void end(roomId);
      if (fence !== null) {
        // A new term's loops wait for the old term's to finish, so two never send side by side.
        const after = previous?.done ?? Promise.resolve();
        void after.then(() => {
          if (!stopped && wanted.get(roomId) === fence && !leading.has(roomId)) start(fence);
        });
      }
    },
    roomEncrypted(roomId) {
      const current = leading.get(roomId);
      if (current !== undefined && !stopped) void postE2eeNotice(current.fence);
    },
    async stop() {
      stopped = true;
      await Promise.all([...leading.keys()].map((roomId) => end(roomId)));
    },
  };
}
