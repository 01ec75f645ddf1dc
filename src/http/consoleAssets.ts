/**
 * The operator console's two files, kept as strings so the API bundle carries them without a
 * build step of their own. The script is plain browser
 * JavaScript: it must contain no backtick and no dollar-brace (they would end this literal).
 */

/** The page: no inline script, so its policy allows only this origin's script file. */
export const consoleHtml = String.raw`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AI Job Engine - operator console</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #243447; color: #fff; padding: 8px 16px; display: flex; gap: 16px; align-items: center; }
header h1 { font-size: 18px; margin: 0 16px 0 0; }
header a, header button { color: #fff; background: none; border: 0; font: inherit; cursor: pointer; text-decoration: none; }
header button { margin-left: auto; }
main { padding: 12px 16px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
.error { color: #a00; font-weight: bold; }
tr.alert td { background: #fde8e8; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; }
a.current { font-weight: bold; }
form label { margin-right: 8px; }
</style>
</head>
<body>
<header><h1>AI Job Engine</h1><nav id="nav" hidden><a href="#/stats">Stats</a> <a href="#/jobs">Jobs</a> <a href="#/outbox">Outbox</a> <a href="#/workers">Workers</a> <button id="sign-out" type="button">Sign out</button></nav></header>
<main id="main"></main>
<script type="module" src="/admin/console.js"></script>
</body>
</html>
`

/** The page's script module (`/admin/console.js`). */
export const consoleScript = String
  .raw`// The operator console: plain DOM, the admin API only (plus the job's SSE stream when there is one).
const tokenKey = "ai-job-engine.admin-token"
const main = document.getElementById("main")
const nav = document.getElementById("nav")
const svgNs = "http://www.w3.org/2000/svg"
let cleanup = () => {}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
}

function h(tag, attrs, ...children) {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value)
    else element.setAttribute(name, value === true ? "" : String(value))
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue
    element.append(child instanceof Node ? child : String(child))
  }
  return element
}

function s(tag, attrs, ...children) {
  const element = document.createElementNS(svgNs, tag)
  for (const [name, value] of Object.entries(attrs || {})) element.setAttribute(name, String(value))
  for (const child of children.flat()) element.append(child instanceof Node ? child : String(child))
  return element
}

const token = () => sessionStorage.getItem(tokenKey)

// The pasted token's exp, read only to sign out when it passes (the server checks every request).
function tokenExpiry(value) {
  try {
    const payload = JSON.parse(atob(value.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")))
    return typeof payload.exp === "number" ? payload.exp * 1000 : null
  } catch (error) {
    return null
  }
}

let expiryTimer = null
function signOut(reason) {
  clearTimeout(expiryTimer)
  sessionStorage.removeItem(tokenKey)
  cleanup()
  cleanup = () => {}
  signIn(reason)
}

// Back to the sign-in form when the token expires (a live stream ends then too).
function watchExpiry() {
  clearTimeout(expiryTimer)
  const expiresAt = tokenExpiry(token() || "")
  if (expiresAt === null || expiresAt - Date.now() > 2147483647) return
  expiryTimer = setTimeout(() => signOut(new ApiError(401, "TOKEN_EXPIRED", "The token expired: paste a new one.")), Math.max(0, expiresAt - Date.now()))
}

async function api(method, path) {
  const response = await fetch(path, { method, headers: { authorization: "Bearer " + token(), accept: "application/json" } })
  const body = await response.json().catch(() => null)
  if (!response.ok) {
    throw new ApiError(response.status, (body && body.code) || "HTTP_" + response.status, (body && body.message) || response.statusText)
  }
  return body
}

function table(headers, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, headers.map((title) => h("th", {}, title)))), h("tbody", {}, rows))
}

function errorBox(error) {
  const code = error instanceof ApiError ? error.code : "ERROR"
  return h("p", { class: "error", id: "error", role: "alert" }, "Refused: " + code + " - " + error.message)
}

// replaceChildren writes a null as the text "null": a part that does not apply is left out.
function show(...children) {
  main.replaceChildren(...children.filter((child) => child !== null && child !== undefined))
}

const ms = (value) => (value === null || value === undefined ? "-" : value < 1000 ? value + " ms" : (value / 1000).toFixed(1) + " s")

// ---- Sign in

function signIn(message) {
  nav.hidden = true
  const input = h("textarea", { id: "token", rows: 4, cols: 70, autocomplete: "off",
    placeholder: "Paste a SUPER_ADMIN bearer token: HS256 (npm run token) or an access token from the identity provider" })
  const problem = h("div", { id: "sign-in-problem" }, message ? errorBox(message) : null)
  const submit = async (event) => {
    event.preventDefault()
    const pasted = input.value.trim()
    if (pasted === "") return
    sessionStorage.setItem(tokenKey, pasted)
    try {
      await api("GET", "/admin-api/ai/stats")
      location.hash = "#/stats"
      route()
    } catch (error) {
      sessionStorage.removeItem(tokenKey)
      problem.replaceChildren(errorBox(error))
    }
  }
  show(
    h("h2", {}, "Sign in"),
    h("form", { id: "sign-in", onsubmit: submit }, h("p", {}, input), h("button", { type: "submit", id: "sign-in-button" }, "Sign in")),
    problem
  )
}

// ---- Stats

function barChart(title, id, bars, unit) {
  const width = 640
  const height = 180
  const max = Math.max(1, ...bars.map((bar) => bar.value))
  const step = bars.length === 0 ? width : width / bars.length
  const chart = s(
    "svg",
    { id, viewBox: "0 0 " + width + " " + (height + 30), width, height: height + 30, role: "img", "aria-label": title },
    s("line", { x1: 0, y1: height, x2: width, y2: height, stroke: "#888" }),
    bars.map((bar, index) => {
      const barHeight = (bar.value / max) * (height - 20)
      return s(
        "g",
        {},
        s("rect", { x: index * step + 2, y: height - barHeight, width: Math.max(1, step - 4), height: barHeight, fill: bar.color || "#3b6ea5" },
          s("title", {}, bar.label + ": " + bar.value + (unit || ""))),
        bars.length <= 24 ? s("text", { x: index * step + step / 2, y: height + 14, "text-anchor": "middle", "font-size": 10 }, bar.label) : ""
      )
    }),
    s("text", { x: 4, y: 12, "font-size": 11 }, "max " + max + (unit || ""))
  )
  return h("figure", {}, chart, h("figcaption", {}, title))
}

async function statsPage() {
  const stats = await api("GET", "/admin-api/ai/stats")
  const perMinute = new Map()
  for (const row of stats.perMinute) perMinute.set(row.minute, (perMinute.get(row.minute) || 0) + row.finished)
  const minuteBars = Array.from(perMinute.entries()).map(([minute, value]) => ({ label: minute.slice(11, 16), value }))
  const durationBars = stats.durations.flatMap((row) => [
    { label: row.jobType + " p50", value: row.p50Ms || 0, color: "#3b6ea5" },
    { label: row.jobType + " p95", value: row.p95Ms || 0, color: "#c0504d" }
  ])
  show(
    h("h2", { id: "stats-page" }, "Stats"),
    h("p", {}, "Generated " + stats.generatedAt),
    h("div", { class: "charts" },
      barChart("Jobs finished per minute (last hour)", "chart-throughput", minuteBars, ""),
      barChart("Duration p50 / p95 by type (last hour)", "chart-durations", durationBars, " ms")),
    h("h3", {}, "Jobs by type and status"),
    table(["Type", "Status", "Jobs"], stats.jobs.map((row) => h("tr", {}, h("td", {}, row.jobType), h("td", {}, row.lifecycleStatus), h("td", {}, row.total))), { id: "job-counts" }),
    h("h3", {}, "Queues"),
    table(["Queue", "Waiting", "Active", "Delayed"], stats.queues.map((row) =>
      h("tr", {}, h("td", {}, row.queueName + (row.available ? "" : " (not answering)")), h("td", {}, row.waiting), h("td", {}, row.active), h("td", {}, row.delayed)))),
    h("h3", {}, "Providers"),
    table(["Provider", "Model", "Circuit", "Failures in a row", "Open until"], stats.providers.map((row) =>
      h("tr", { class: row.breaker === "closed" ? "" : "alert" }, h("td", {}, row.provider), h("td", {}, row.model),
        h("td", {}, row.breaker === "half_open" ? "half-open (probing)" : row.breaker), h("td", {}, row.failures), h("td", {}, row.openUntil || ""))),
      { id: "provider-breakers" }),
    h("h3", {}, "Outbox"),
    h("p", { id: "outbox-summary" }, "pending " + stats.outbox.pending + ", dead " + stats.outbox.dead + ", oldest pending " + ms(stats.outbox.oldestPendingAgeMs)),
    h("h3", {}, "Durations (last hour)"),
    table(["Type", "Finished", "p50", "p95"], stats.durations.map((row) =>
      h("tr", {}, h("td", {}, row.jobType), h("td", {}, row.finished), h("td", {}, ms(row.p50Ms)), h("td", {}, ms(row.p95Ms))))),
    h("h3", {}, "Usage by day"),
    table(["Day", "Calls", "Tokens", "Cost (USD)"], stats.usageByDay.map((row) =>
      h("tr", {}, h("td", {}, row.day), h("td", {}, row.calls), h("td", {}, row.totalTokens), h("td", {}, (row.costMicros / 1e6).toFixed(4)))))
  )
}

// ---- Jobs

const statuses = ["", "queued", "running", "succeeded", "failed", "cancelled"]
const queues = ["", "ai-interactive", "ai-background"]

function jobsPage(params) {
  const filters = new URLSearchParams(params)
  const field = (name, control) => h("label", {}, name + " ", control)
  const select = (name, options) =>
    h("select", { name }, options.map((option) => h("option", { value: option, selected: filters.get(name) === option }, option === "" ? "any" : option)))
  const form = h("form", { id: "job-filters", onsubmit: (event) => {
    event.preventDefault()
    const chosen = new URLSearchParams()
    for (const [name, value] of new FormData(form)) if (String(value) !== "") chosen.set(name, String(value))
    location.hash = "#/jobs?" + chosen.toString()
  } },
    field("type", h("input", { name: "jobType", value: filters.get("jobType") || "", size: 18 })),
    field("status", select("status", statuses)),
    field("queue", select("queueName", queues)),
    field("from", h("input", { name: "createdFrom", value: filters.get("createdFrom") || "", placeholder: "ISO time", size: 22 })),
    field("to", h("input", { name: "createdTo", value: filters.get("createdTo") || "", placeholder: "ISO time", size: 22 })),
    h("button", { type: "submit" }, "Filter"))
  const list = h("div", { id: "job-list" })
  show(h("h2", { id: "jobs-page" }, "Jobs"), form, list)
  let cursors = [null]
  const load = async () => {
    const query = new URLSearchParams(filters)
    const cursor = cursors[cursors.length - 1]
    if (cursor) query.set("cursor", cursor)
    const page = await api("GET", "/admin-api/ai/jobs?" + query.toString())
    const rows = page.items.map((job) =>
      h("tr", { "data-job-id": job.jobId },
        h("td", {}, h("a", { href: "#/jobs/" + encodeURIComponent(job.jobId), class: "job-link" }, job.jobId)),
        h("td", {}, job.jobType), h("td", { class: "job-status" }, job.lifecycleStatus), h("td", {}, job.progress + "%"),
        h("td", {}, job.queueName), h("td", {}, job.userId), h("td", {}, job.createdAt)))
    // replaceChildren writes a null as the text "null": only the buttons that apply are passed.
    list.replaceChildren(...[
      table(["Job", "Type", "Status", "Progress", "Queue", "User", "Created"], rows, { id: "jobs-table" }),
      cursors.length > 1 ? h("button", { onclick: () => { cursors.pop(); load() } }, "Previous") : null,
      page.nextCursor ? h("button", { onclick: () => { cursors.push(page.nextCursor); load() } }, "Next") : null
    ].filter((child) => child !== null))
  }
  const timer = setInterval(() => load().catch(() => {}), 2000)
  cleanup = () => clearInterval(timer)
  return load()
}

function detailRows(job) {
  const fields = ["jobId", "jobType", "lifecycleStatus", "progress", "queueName", "priority", "userId", "targetType", "targetId",
    "credentialMode", "attemptCount", "maxAttempts", "createdAt", "startedAt", "finishedAt", "cancelRequestedAt", "updatedAt",
    "errorCode", "publicErrorMessage", "internalErrorMessage"]
  return fields.filter((name) => job[name] !== undefined && job[name] !== null).map((name) =>
    h("tr", {}, h("th", {}, name), h("td", name === "lifecycleStatus" ? { id: "job-status" } : {}, String(job[name]))))
}

const terminal = (status) => status === "succeeded" || status === "failed" || status === "cancelled"

async function followStream(jobId, refresh, controller, mode) {
  try {
    const response = await fetch("/api/ai/jobs/" + encodeURIComponent(jobId) + "/events", {
      headers: { authorization: "Bearer " + token(), accept: "text/event-stream" },
      signal: controller.signal
    })
    const type = response.headers.get("content-type") || ""
    if (!response.ok || !type.startsWith("text/event-stream") || !response.body) {
      if (response.body) await response.body.cancel().catch(() => {})
      return false
    }
    mode("live (server-sent events)")
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    let buffer = ""
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      buffer += value.replace(/\r\n/g, "\n")
      let end
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        if (block.split("\n").some((line) => line.startsWith("data:"))) await refresh()
      }
    }
    return true
  } catch (error) {
    return controller.signal.aborted
  }
}

async function jobPage(jobId) {
  const header = h("h2", { id: "job-page" }, "Job " + jobId)
  const live = h("p", { id: "live-mode" }, "loading")
  const body = h("div", {})
  show(header, live, body)
  const controller = new AbortController()
  let timer = null
  cleanup = () => { controller.abort(); if (timer) clearTimeout(timer) }
  let last = null
  const refresh = async () => {
    const timeline = await api("GET", "/admin-api/ai/jobs/" + encodeURIComponent(jobId) + "/timeline")
    last = timeline.job.lifecycleStatus
    const links = []
    if (timeline.retriedFrom) links.push(h("p", {}, "Retried from ", h("a", { class: "retried-from", href: "#/jobs/" + encodeURIComponent(timeline.retriedFrom) }, timeline.retriedFrom)))
    for (const next of timeline.retriedAs) links.push(h("p", {}, "Retried as ", h("a", { class: "retried-as", href: "#/jobs/" + encodeURIComponent(next) }, next)))
    const retry = terminal(last) && last !== "succeeded"
      ? h("button", { id: "retry-job", onclick: async () => {
        const created = await api("POST", "/admin-api/ai/jobs/" + encodeURIComponent(jobId) + "/retry")
        location.hash = "#/jobs/" + encodeURIComponent(created.jobId)
      } }, "Retry as a new job")
      : null
    body.replaceChildren(
      h("progress", { id: "job-progress", max: 100, value: timeline.job.progress }),
      table(["Field", "Value"], detailRows(timeline.job), { id: "job-detail" }),
      // replaceChildren takes nodes, not arrays, and writes a null as the text "null".
      ...links, ...(retry ? [retry] : []),
      h("h3", {}, "Timeline"),
      table(["At", "Event", "Detail"], timeline.events.map((event) =>
        h("tr", {}, h("td", {}, event.at), h("td", {}, event.kind), h("td", {}, event.detail || ""))), { id: "job-events" }),
      h("h3", {}, "Attempts and provider calls"),
      table(["Lease", "Call", "At", "Model", "Latency", "Tokens", "Cost (USD)", "Outcome"], timeline.attempts.flatMap((attempt) =>
        attempt.calls.map((call) => h("tr", {}, h("td", {}, attempt.leaseNo), h("td", {}, call.callNo), h("td", {}, call.at),
          h("td", {}, call.provider + "/" + call.model), h("td", {}, ms(call.latencyMs)), h("td", {}, call.totalTokens + (call.tokensEstimated ? " (estimated)" : "")),
          h("td", {}, (call.costMicros / 1e6).toFixed(6)), h("td", {}, call.outcome)))), { id: "job-calls" })
    )
  }
  await refresh()
  if (terminal(last)) { live.textContent = "finished"; return }
  const mode = (text) => { live.textContent = text }
  const streamed = await followStream(jobId, refresh, controller, mode)
  if (controller.signal.aborted) return
  await refresh()
  if (terminal(last)) { live.textContent = "finished"; return }
  if (!streamed) mode("polling every second (no event stream)")
  const poll = async () => {
    if (controller.signal.aborted) return
    try {
      await refresh()
    } catch (error) {
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return signOut(error)
      mode("polling: " + error.message)
    }
    if (terminal(last)) { live.textContent = "finished"; return }
    timer = setTimeout(poll, 1000)
  }
  timer = setTimeout(poll, 1000)
}

// ---- Outbox

async function outboxPage(params) {
  const status = new URLSearchParams(params).get("status") || "dead"
  const page = await api("GET", "/admin-api/ai/outbox/events?status=" + encodeURIComponent(status) + "&limit=100")
  const counts = await api("GET", "/admin-api/ai/outbox")
  const notice = h("p", { id: "outbox-notice" })
  const rows = page.items.map((event) =>
    h("tr", { "data-event-id": event.eventId },
      h("td", {}, event.eventId), h("td", {}, h("a", { href: "#/jobs/" + encodeURIComponent(event.aggregateId) }, event.aggregateId)),
      h("td", { class: "event-status" }, event.status), h("td", {}, event.attemptCount), h("td", {}, event.createdAt),
      h("td", {}, event.lastError || ""),
      h("td", {}, event.status === "dead" ? h("button", { class: "replay", onclick: async () => {
        try {
          await api("POST", "/admin-api/ai/outbox/" + encodeURIComponent(event.eventId) + "/replay")
          await outboxPage(params)
          document.getElementById("outbox-notice").textContent = "Replayed " + event.eventId
        } catch (error) { notice.replaceChildren(errorBox(error)) }
      } }, "Replay") : "")))
  const confirmAll = h("span", {})
  const replayAll = counts.dead === 0 ? null : h("button", { id: "replay-all", onclick: () => {
    confirmAll.replaceChildren(h("button", { id: "replay-all-confirm", onclick: async () => {
      const result = await api("POST", "/admin-api/ai/outbox/replay-dead")
      await outboxPage(params)
      document.getElementById("outbox-notice").textContent = "Replayed " + result.replayed + " dead events"
    } }, "Confirm: replay " + counts.dead + " dead events"))
  } }, "Replay all dead")
  show(
    h("h2", { id: "outbox-page" }, "Outbox"),
    h("p", {}, Object.entries(counts).map(([name, count]) => name + " " + count).join(", ")),
    h("p", {}, ["dead", "pending", "claimed"].map((name) =>
      h("a", { href: "#/outbox?status=" + name, class: name === status ? "current" : "" }, name)), " ", replayAll, " ", confirmAll),
    notice,
    table(["Event", "Job", "Status", "Attempts", "Created", "Last error", ""], rows, { id: "outbox-table" }),
    page.nextCursor ? h("p", {}, "More events than shown.") : null
  )
}

// ---- Workers

async function workersPage() {
  const load = async () => {
    const { workers } = await api("GET", "/admin-api/ai/workers")
    const rows = workers.map((worker) =>
      h("tr", {}, h("td", {}, worker.instanceId), h("td", {}, worker.hostname + ":" + worker.pid), h("td", {}, worker.queues.join(", ")),
        h("td", {}, worker.jobIds.length === 0 ? "idle" : worker.jobIds.map((id) => h("a", { href: "#/jobs/" + encodeURIComponent(id) }, id, " "))),
        h("td", {}, worker.beatAt), h("td", {}, worker.startedAt)))
    show(h("h2", { id: "workers-page" }, "Workers"),
      workers.length === 0 ? h("p", {}, "No live worker.") : null,
      table(["Worker", "Host", "Queues", "Holding now", "Last heartbeat", "Started"], rows, { id: "workers-table" }))
  }
  const timer = setInterval(() => load().catch(() => {}), 2000)
  cleanup = () => clearInterval(timer)
  return load()
}

// ---- Routing

async function route() {
  cleanup()
  cleanup = () => {}
  if (!token()) return signIn()
  watchExpiry()
  nav.hidden = false
  const [path, query] = (location.hash.slice(1) || "/stats").split("?")
  const parts = path.split("/").filter(Boolean)
  try {
    if (parts[0] === "jobs" && parts[1]) await jobPage(decodeURIComponent(parts[1]))
    else if (parts[0] === "jobs") await jobsPage(query || "")
    else if (parts[0] === "outbox") await outboxPage(query || "")
    else if (parts[0] === "workers") await workersPage()
    else await statsPage()
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return signOut(error)
    show(errorBox(error))
  }
}

document.getElementById("sign-out").addEventListener("click", () => {
  location.hash = ""
  signOut()
})
window.addEventListener("hashchange", route)
route()
`
