import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option, TestClock } from "effect"
import { JobSnapshot } from "../../../src/domain/JobSnapshot.js"
import { IllegalTransition, JobNotFound, LockLost } from "../../../src/domain/LifecycleErrors.js"
import { PersistenceError } from "../../../src/domain/PersistenceError.js"
import { execute } from "../../../src/pipeline/execute.js"
import { defectsAsInternal, persistenceAsInternal } from "../../../src/pipeline/internalErrors.js"
import { prepare } from "../../../src/pipeline/prepare.js"
import { project } from "../../../src/pipeline/project.js"
import { resolve } from "../../../src/pipeline/resolve.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../../src/services/ArtifactRepository.js"
import { CredentialVault } from "../../../src/services/CredentialVault.js"
import { payloadFor } from "../../../src/services/JobQueue.js"
import { ModelRouter } from "../../../src/services/ModelRouter.js"
import { ResultProjectors, UnknownProjectorKey } from "../../../src/services/ResultProjectors.js"
import { SnapshotRepository } from "../../../src/services/SnapshotRepository.js"
import { UsageLog } from "../../../src/services/UsageLog.js"
import { memoryEngineStack } from "../../support/engineStack.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

const preparedEcho = (message: string) =>
  Effect.gen(function*() {
    const { job } = yield* Effect.flatMap(AiJobService, (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message }
      }))
    const payload = payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt })
    return Option.getOrThrow(yield* prepare(payload, "worker-1", Duration.millis(60_000)))
  })

const executedEcho = (message: string) =>
  Effect.flatMap(Effect.flatMap(preparedEcho(message), resolve), (resolved) => execute(resolved, 1, []))

const down = (operation: string) => new PersistenceError({ operation, message: "connection reset" })

/** PROJECT's error as the job would record it: its code, or its tag for the lease's own errors. */
const codeOf = (error: { readonly _tag: string; readonly code?: string }) => error.code ?? error._tag

const jobNow = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => Effect.map(jobs.findById(jobId), Option.getOrThrow))

describe("stage errors as INTERNAL errors", () => {
  it.effect("a storage failure is INTERNAL_PERSISTENCE naming the operation; a defect is INTERNAL_ERROR with its first line", () =>
    Effect.gen(function*() {
      const persistence = yield* Effect.flip(persistenceAsInternal(down("ai_job.read")))
      expect([persistence._tag, persistence.code, persistence.message]).toStrictEqual([
        "InternalError",
        "INTERNAL_PERSISTENCE",
        "ai_job.read: connection reset"
      ])
      const defect = yield* Effect.flip(defectsAsInternal(Effect.die(new Error("boom\nsecond line"))))
      expect([defect._tag, defect.code, defect.message]).toStrictEqual([
        "InternalError",
        "INTERNAL_ERROR",
        "defect: Error: boom"
      ])
      expect(yield* defectsAsInternal(Effect.succeed("fine"))).toBe("fine")
    }))
})

describe("RESOLVE (memory layers)", () => {
  it.scoped("runs on the snapshot PREPARE read with the lock, without reading it again", () =>
    Effect.gen(function*() {
      const prepared = yield* preparedEcho("from the store")
      const given = new JobSnapshot({
        id: "s-1",
        jobId: prepared.job.id,
        content: { message: "from the lock's read" },
        redactionVersion: "v1",
        expiresAt: new Date(8_640_000_000_000),
        createdAt: new Date(0)
      })
      const resolved = yield* resolve({ ...prepared, snapshot: Option.some(given) }).pipe(
        Effect.updateService(SnapshotRepository, (snapshots) => ({
          ...snapshots,
          findByJobId: () => Effect.die("read again")
        }))
      )
      expect(resolved.content).toStrictEqual({ message: "from the lock's read" })
      expect((yield* resolve(prepared)).content).toStrictEqual({ message: "from the store" })
      expect([resolved.credential.mode, resolved.route.model]).toStrictEqual(["platform_key", "deepseek-chat"])
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a missing snapshot and a vault's storage failure are INTERNAL errors", () =>
    Effect.gen(function*() {
      const prepared = yield* preparedEcho("gone")
      const missing = yield* Effect.flip(resolve({ ...prepared, snapshot: Option.none() }))
      expect([missing.code, missing.message]).toStrictEqual([
        "INTERNAL_ERROR",
        `job ${prepared.job.id} has no input snapshot (expired or never written)`
      ])
      const noVault = yield* Effect.flip(
        resolve(prepared).pipe(
          Effect.updateService(
            CredentialVault,
            (vault) => CredentialVault.make({ ...vault, resolve: () => Effect.fail(down("ai_credential.read")) })
          )
        )
      )
      expect([noVault.code, noVault.message]).toStrictEqual([
        "INTERNAL_PERSISTENCE",
        "ai_credential.read: connection reset"
      ])
    }).pipe(Effect.provide(memoryEngineStack())))
})

describe("PROJECT (memory layers)", () => {
  it.scoped("a projector missing from the registry is an INTERNAL error naming its key", () =>
    Effect.gen(function*() {
      const executed = yield* executedEcho("no projector")
      const failed = yield* Effect.flip(
        project(executed).pipe(
          Effect.updateService(ResultProjectors, (projectors) => ({
            ...projectors,
            get: (key) => Effect.fail(new UnknownProjectorKey({ key }))
          }))
        )
      )
      expect([failed._tag, codeOf(failed), failed.message]).toStrictEqual([
        "InternalError",
        "INTERNAL_ERROR",
        "no projector registered as synthetic_echo"
      ])
      expect((yield* jobNow(executed.job.id)).lifecycleStatus).toBe("running")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a lock wait that timed out is tried again within the lease, and the projection commits once", () =>
    Effect.gen(function*() {
      const executed = yield* executedEcho("contended")
      let tries = 0
      const run = yield* Effect.fork(
        project(executed).pipe(
          Effect.updateService(ArtifactRepository, (artifacts) => ({
            ...artifacts,
            record: (jobId, refs) =>
              Effect.suspend(() => {
                tries += 1
                return tries <= 2
                  ? Effect.fail(
                    new PersistenceError({
                      operation: "ai_artifact.insert",
                      message: "lock wait timeout",
                      lockContention: true
                    })
                  )
                  : artifacts.record(jobId, refs)
              })
          }))
        )
      )
      for (let step = 0; step < 100 && tries < 3; step++) yield* TestClock.adjust(100)
      const succeeded = yield* Fiber.join(run)
      expect([succeeded.lifecycleStatus, tries]).toStrictEqual(["succeeded", 3])
      expect(yield* Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(executed.job.id)))
        .toHaveLength(1)
      expect(
        (yield* Effect.flatMap(UsageLog, (usage) => usage.listByJobId(executed.job.id))).map((row) => row.errorCode)
      ).toStrictEqual([null])
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("lock waits are tried for a lease at most; any other storage failure is not retried: both are INTERNAL_PERSISTENCE", () =>
    Effect.gen(function*() {
      const executed = yield* executedEcho("always contended")
      let tries = 0
      const failing = (lockContention: boolean) =>
        Effect.updateService(ArtifactRepository, (artifacts) => ({
          ...artifacts,
          record: () =>
            Effect.suspend(() => {
              tries += 1
              return Effect.fail(
                new PersistenceError({ operation: "ai_artifact.insert", message: "refused", lockContention })
              )
            })
        }))
      const once = yield* Effect.flip(project(executed).pipe(failing(false)))
      expect([codeOf(once), once.message, tries]).toStrictEqual([
        "INTERNAL_PERSISTENCE",
        "ai_artifact.insert: refused",
        1
      ])

      tries = 0
      const start = yield* TestClock.currentTimeMillis
      const run = yield* Effect.fork(Effect.flip(project(executed).pipe(failing(true))))
      // The stack's lease is 15 s: the retries stop within it (jittered steps of at most ~1.2 s).
      for (let step = 0; step < 400; step++) yield* TestClock.adjust(100)
      const ended = yield* Fiber.join(run)
      expect(codeOf(ended)).toBe("INTERNAL_PERSISTENCE")
      expect(tries).toBeGreaterThan(5)
      expect(tries).toBeLessThan(40)
      expect((yield* TestClock.currentTimeMillis) - start).toBeGreaterThanOrEqual(15_000)
      expect((yield* jobNow(executed.job.id)).lifecycleStatus).toBe("running")
    }).pipe(Effect.provide(memoryEngineStack())))

  it.scoped("a projection applied again writes nothing new, warns, and fails: its call's usage row is already there", () =>
    Effect.gen(function*() {
      const executed = yield* executedEcho("twice")
      const first = yield* project(executed)
      expect(first.lifecycleStatus).toBe("succeeded")
      const again = yield* Effect.exit(project(executed))
      expect(Exit.isFailure(again) && again.cause._tag === "Fail" && codeOf(again.cause.error)).toBe(
        "INTERNAL_PERSISTENCE"
      )
      expect(yield* Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(executed.job.id)))
        .toHaveLength(1)
      const warned = (yield* (yield* LogCapture).lines).filter((line) =>
        line.includes("projection already applied; nothing new written")
      )
      expect(warned).toHaveLength(1)
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))
})

describe("RESOLVE's route and PROJECT's outcomes (memory layers)", () => {
  it.scoped("the route is asked for the job's own type and credential mode", () =>
    Effect.gen(function*() {
      const prepared = yield* preparedEcho("routed")
      const resolved = yield* resolve(prepared).pipe(
        Effect.updateService(ModelRouter, (router) => ({
          ...router,
          route: (request) =>
            Effect.map(
              router.route(request),
              (route) => ({ ...route, model: `${request.jobType}/${request.credentialMode}` })
            )
        }))
      )
      expect(resolved.route.model).toBe("synthetic_echo/platform_key")
    }).pipe(Effect.provide(memoryEngineStack())))

  /** PROJECT with the projector and the artifact store answering as given; whether it warned. */
  const projectWarns = (
    answers: { readonly duplicate: boolean; readonly inserted: number; readonly duplicates: number }
  ) =>
    Effect.gen(function*() {
      const executed = yield* executedEcho(`answers ${JSON.stringify(answers)}`)
      const capture = yield* LogCapture
      yield* capture.clear
      const done = yield* project(executed).pipe(
        Effect.updateService(ResultProjectors, (projectors) => ({
          ...projectors,
          get: (key) =>
            Effect.map(projectors.get(key), (projector) => ({
              ...projector,
              project: () => Effect.succeed({ artifacts: [], duplicate: answers.duplicate })
            }))
        })),
        Effect.updateService(ArtifactRepository, (artifacts) => ({
          ...artifacts,
          record: () => Effect.succeed({ inserted: answers.inserted, duplicates: answers.duplicates })
        }))
      )
      expect(done.lifecycleStatus).toBe("succeeded")
      return (yield* capture.lines).some((line) => line.includes("projection already applied; nothing new written"))
    })

  it.scoped("warns when the projector found its rows, or every artifact was there already; not for a first projection", () =>
    Effect.gen(function*() {
      expect(yield* projectWarns({ duplicate: true, inserted: 1, duplicates: 0 })).toBe(true)
      expect(yield* projectWarns({ duplicate: false, inserted: 0, duplicates: 2 })).toBe(true)
      // No artifacts at all, or some new beside old ones: nothing was applied before.
      expect(yield* projectWarns({ duplicate: false, inserted: 0, duplicates: 0 })).toBe(false)
      expect(yield* projectWarns({ duplicate: false, inserted: 1, duplicates: 1 })).toBe(false)
    }).pipe(Effect.provide(LogCaptureLayer), Effect.provide(memoryEngineStack())))

  it.scoped("a fence that finds the job moved on or gone is LockLost for this lease, and nothing commits", () =>
    Effect.gen(function*() {
      for (const refusal of ["IllegalTransition", "JobNotFound"] as const) {
        const executed = yield* executedEcho(`refused by ${refusal}`)
        const lost = yield* Effect.flip(
          project(executed).pipe(
            Effect.updateService(AiJobLifecycleRepository, (jobs) => ({
              ...jobs,
              markSucceeded: () =>
                refusal === "IllegalTransition"
                  ? Effect.fail(new IllegalTransition({ jobId: executed.job.id, from: "cancelled", to: "succeeded" }))
                  : Effect.fail(new JobNotFound({ jobId: executed.job.id }))
            }))
          )
        )
        expect(lost).toStrictEqual(new LockLost({ ...executed.lease }))
        expect(executed.lease.workerId).toBe("worker-1")
        expect(yield* Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(executed.job.id)))
          .toHaveLength(0)
        expect((yield* jobNow(executed.job.id)).lifecycleStatus).toBe("running")
      }
    }).pipe(Effect.provide(memoryEngineStack())))
})
