/**
 * The scheduling views a store keeps for the leaders it serves, one per room and term
 * (src/domain/schedule-view.ts; docs/architecture.md §4, "Scheduling without rereading the room").
 * A view belongs to one fence: a new term, another holder or a failed step starts from a whole read.
 */
import type { ScheduleView } from "../../domain/schedule-view.js";
import type { ScheduleDecision } from "../../domain/scheduling.js";
import type { LeaderFence } from "../../ports/store.js";
import { sessionKey } from "./records.js";

export class ScheduleViews {
  private static readonly byOwner = new WeakMap<object, ScheduleViews>();

  /** The views kept for one store connection (or pool): made on first use, gone with it. */
  static of(owner: object): ScheduleViews {
    let views = ScheduleViews.byOwner.get(owner);
    if (views === undefined) {
      views = new ScheduleViews();
      ScheduleViews.byOwner.set(owner, views);
    }
    return views;
  }

  private readonly views = new Map<string, { fence: string; view: ScheduleView }>();

  private static fenceKey(fence: LeaderFence): string {
    return `${fence.term}\u0000${sessionKey(fence.session)}`;
  }

  /** The room's view, if it was made under this very fence. */
  get(fence: LeaderFence): ScheduleView | undefined {
    const held = this.views.get(fence.roomId);
    return held !== undefined && held.fence === ScheduleViews.fenceKey(fence) ? held.view : undefined;
  }

  set(fence: LeaderFence, view: ScheduleView): void {
    this.views.set(fence.roomId, { fence: ScheduleViews.fenceKey(fence), view });
  }

  drop(fence: LeaderFence): void {
    this.views.delete(fence.roomId);
  }

  /**
   * After a step wrote `written` of its decision's moves: the view follows the decision when all of
   * it was written, and is dropped otherwise (the next step reads the whole room).
   */
  settled(fence: LeaderFence, view: ScheduleView, decision: ScheduleDecision, written: number): void {
    const all = decision.toQueue.length + decision.toSkip.length + decision.toOpen.length;
    // An expansion writes rows the view never saw, a stop ends queued tasks: read the room again.
    if (written !== all || decision.toExpand.length + decision.toStop.length > 0) {
      this.drop(fence);
      return;
    }
    view.applied(decision);
    this.set(fence, view);
  }

  /** A step that failed (deposed, a store error) may have changed the view without writing: drop it. */
  async guard<T>(fence: LeaderFence, step: Promise<T>): Promise<T> {
    try {
      return await step;
    } catch (e) {
      this.drop(fence);
      throw e;
    }
  }
}
