import { FiberRef, Scheduler } from "effect"
import type { RuntimeFiber } from "effect/Fiber"

/**
 * One FIFO run queue for every fiber of a simulation, drained in a single microtask.
 *
 * Effect's default scheduler gives each fiber its own runner and falls back to `setTimeout`
 * after 2048 microtask rounds, so the order in which different fibers run depends on real
 * time and on what ran earlier in the process: a seed would not replay. Here the order is a
 * pure function of the program: tasks run in the order they were scheduled (by priority),
 * and a fiber yields after the usual op budget.
 */
export const makeSimulationScheduler = (): Scheduler.Scheduler => {
  const tasks = new Scheduler.PriorityBuckets()
  let running = false

  const drain = () => {
    while (tasks.buckets.length > 0) {
      const buckets = tasks.buckets
      tasks.buckets = []
      for (const [, toRun] of buckets) {
        for (let i = 0; i < toRun.length; i++) toRun[i]!()
      }
    }
    running = false
  }

  return {
    scheduleTask: (task: Scheduler.Task, priority: number) => {
      tasks.scheduleTask(task, priority)
      if (!running) {
        running = true
        void Promise.resolve().then(drain)
      }
    },
    shouldYield: (fiber: RuntimeFiber<unknown, unknown>) =>
      fiber.currentOpCount > fiber.getFiberRef(FiberRef.currentMaxOpsBeforeYield)
        ? fiber.getFiberRef(FiberRef.currentSchedulingPriority)
        : false
  }
}
