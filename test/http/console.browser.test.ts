import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import puppeteer, { type Browser, type Page } from "puppeteer-core"
import { leaseOf } from "../../src/domain/AiJob.js"
import type { AiJob } from "../../src/domain/AiJob.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { jobEventOf, JobEvents } from "../../src/services/JobEvents.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { WorkerDirectory } from "../../src/services/WorkerDirectory.js"
import { flashcardBody, markRunning, memoryEngine, startApi, tokenFor } from "./support/harness.js"

// Debian's chromium (`apt-get install -y chromium`, done by .ci/run); skipped where it is not installed.
const chromium = "/usr/bin/chromium"
const artifacts = join(import.meta.dirname, "..", "artifacts")

const Created = Schema.Struct({ jobId: Schema.String })

const launch = Effect.acquireRelease(
  Effect.promise(() =>
    puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    })
  ),
  (browser: Browser) => Effect.promise(() => browser.close())
)

const browse = <A>(run: () => Promise<A>) => Effect.promise(run)

const textOf = (page: Page, selector: string) =>
  browse(() => page.$eval(selector, (element) => element.textContent ?? ""))

const waitForText = (page: Page, selector: string, text: string) =>
  browse(() =>
    page.waitForFunction(
      `(document.querySelector(${JSON.stringify(selector)})?.textContent ?? "").includes(${JSON.stringify(text)})`,
      { timeout: 15_000 }
    )
  )

const screenshot = (page: Page, name: string) =>
  browse(() => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true }))

describe("operator console in Chromium", () => {
  it.live.skipIf(!existsSync(chromium))(
    "sign in, see a new job appear, watch it succeed, replay a dead event, see workers; a USER token is refused",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          mkdirSync(artifacts, { recursive: true })
          const api = yield* startApi(memoryEngine())
          const admin = yield* tokenFor("console-admin", "SUPER_ADMIN")
          const user = yield* tokenFor("console-user")
          const browser = yield* launch
          const page = yield* browse(() => browser.newPage())
          const problems: Array<string> = []
          page.on("console", (message) => {
            if (message.type() === "error") problems.push(message.text())
          })
          page.on("pageerror", (error) => problems.push(String(error)))
          yield* browse(() => page.setViewport({ width: 1200, height: 900 }))

          // A USER token sees an error, not data.
          yield* browse(() => page.goto(`${api.baseUrl}/admin`, { waitUntil: "load" }))
          yield* browse(() => page.waitForSelector("#token"))
          yield* browse(() => page.type("#token", user))
          yield* browse(() => page.click("#sign-in-button"))
          yield* waitForText(page, "#sign-in-problem", "FORBIDDEN")
          expect(yield* browse(() => page.$("#stats-page"))).toBeNull()
          expect(yield* browse(() => page.evaluate("sessionStorage.length"))).toBe(0)
          yield* screenshot(page, "console-user-refused")

          // The admin signs in and lands on the stats page with its charts.
          yield* browse(() => page.evaluate("document.getElementById('token').value = ''"))
          yield* browse(() => page.type("#token", admin))
          yield* browse(() => page.click("#sign-in-button"))
          yield* browse(() => page.waitForSelector("#stats-page"))
          expect(yield* browse(() => page.$("#chart-throughput"))).not.toBeNull()
          yield* screenshot(page, "console-stats")

          // A job created through the API appears in the list (it refreshes by itself).
          yield* browse(() => page.goto(`${api.baseUrl}/admin#/jobs`))
          yield* browse(() => page.waitForSelector("#jobs-table"))
          const created = yield* api.request("POST", "/api/ai/flashcard-generations", {
            token: user,
            body: flashcardBody()
          })
          expect(created.status).toBe(202)
          const { jobId } = yield* Schema.decodeUnknown(Created)(created.body)
          yield* browse(() => page.waitForSelector(`tr[data-job-id="${jobId}"]`, { timeout: 15_000 }))
          yield* screenshot(page, "console-jobs")

          // Open it and watch it go queued -> running -> succeeded without reloading.
          yield* browse(() => page.click(`tr[data-job-id="${jobId}"] a.job-link`))
          yield* waitForText(page, "#job-status", "queued")
          // Written straight to the store, so announced as the engine announces its own writes.
          const announce = (job: AiJob) => Effect.flatMap(JobEvents, (events) => events.publish(jobEventOf(job)))
          const running = yield* api.run(Effect.tap(markRunning(jobId), announce))
          yield* waitForText(page, "#job-status", "running")
          const lease = leaseOf(running)
          if (lease === undefined) return yield* Effect.dieMessage("a running job without a lease")
          yield* api.run(
            Effect.flatMap(AiJobLifecycleRepository, (repo) =>
              repo.markSucceeded(lease, "console-hash", { locked: running })).pipe(Effect.orDie, Effect.tap(announce))
          )
          yield* waitForText(page, "#job-status", "succeeded")
          yield* waitForText(page, "#live-mode", "finished")
          yield* screenshot(page, "console-job")

          // A dead outbox event is listed and replayed from the page.
          const deadId = yield* api.run(
            Effect.gen(function*() {
              const outbox = yield* OutboxRepository
              const claimed = yield* outbox.claimBatch("console-dispatcher", 10)
              const event = claimed.find((candidate) =>
                candidate.aggregateId === jobId
              )
              if (event === undefined) return yield* Effect.dieMessage("the job's event was not claimed")
              yield* outbox.markDispatchFailed(event.id, "console-dispatcher", "queue refused", {
                retryDelay: Duration.millis(0),
                maxAttempts: 1
              })
              return event.id
            }).pipe(Effect.orDie)
          )
          yield* browse(() => page.goto(`${api.baseUrl}/admin#/outbox`))
          yield* browse(() => page.waitForSelector(`tr[data-event-id="${deadId}"] button.replay`))
          expect(yield* textOf(page, `tr[data-event-id="${deadId}"]`)).toContain("queue refused")
          yield* screenshot(page, "console-outbox")
          yield* browse(() => page.click(`tr[data-event-id="${deadId}"] button.replay`))
          yield* waitForText(page, "#outbox-notice", `Replayed ${deadId}`)
          const replayed = yield* api.run(
            OutboxRepository.pipe(Effect.flatMap((outbox) => outbox.findById(deadId)), Effect.orDie)
          )
          expect(replayed._tag === "Some" ? replayed.value.status : "missing").toBe("pending")

          // Workers: what each holds now.
          yield* api.run(
            Effect.flatMap(WorkerDirectory, (directory) =>
              directory.beat({
                instanceId: "console-worker-1",
                hostname: "host-a",
                pid: 42,
                queues: ["ai-interactive"],
                jobIds: ["job-held-now"],
                startedAt: new Date().toISOString(),
                beatAt: new Date().toISOString()
              }))
          )
          yield* browse(() => page.goto(`${api.baseUrl}/admin#/workers`))
          yield* waitForText(page, "#workers-table", "job-held-now")
          yield* screenshot(page, "console-workers")

          // A cancelled job is retried from its page; the new job links back, and the old one forward.
          const toRetry = yield* Effect.flatMap(
            api.request("POST", "/api/ai/flashcard-generations", { token: user, body: flashcardBody() }),
            (response) => Schema.decodeUnknown(Created)(response.body)
          )
          expect((yield* api.request("POST", `/api/ai/jobs/${toRetry.jobId}/cancel`, { token: user })).status).toBe(200)
          yield* browse(() => page.goto(`${api.baseUrl}/admin#/jobs/${toRetry.jobId}`))
          yield* browse(() => page.waitForSelector("#retry-job"))
          yield* browse(() => page.click("#retry-job"))
          yield* waitForText(page, "a.retried-from", toRetry.jobId)
          const retriedAs = yield* browse(() => page.$eval("#job-page", (element) => element.textContent ?? ""))
          yield* browse(() => page.click("a.retried-from"))
          yield* waitForText(page, "#job-page", toRetry.jobId)
          yield* waitForText(page, "a.retried-as", retriedAs.replace("Job ", ""))
          yield* screenshot(page, "console-retried-job")

          // Only failed API calls (the refused sign-in) may have been logged; never a CSP violation.
          expect(problems.filter((text) => /Content Security Policy|Refused to/i.test(text))).toEqual([])
        })
      ),
    { timeout: 120_000 }
  )
})
