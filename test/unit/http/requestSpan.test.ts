import { describe, expect, it } from "@effect/vitest"
import { urlAttributesOf } from "../../../src/http/requestSpan.js"

/** What the span recorded before: the platform's `toURL`, with user and password redacted. */
const throughUrl = (target: string, headers: Readonly<Record<string, string>>) => {
  const protocol = headers["x-forwarded-proto"] === "https" ? "https" : "http"
  let url: URL
  try {
    url = new URL(target, `${protocol}://${headers["host"] ?? "localhost"}`)
  } catch {
    return undefined
  }
  url.username = url.username === "" ? "" : "REDACTED"
  url.password = url.password === "" ? "" : "REDACTED"
  return { full: url.toString(), path: url.pathname, query: url.search.slice(1), scheme: url.protocol.slice(0, -1) }
}

const targets = [
  "/api/ai/jobs/job_01JBENCH",
  "/api/ai/jobs?limit=10&cursor=abc%3D",
  "/api/ai/jobs?",
  "/metrics",
  "/./metrics",
  "/api/../metrics",
  "/openapi.json",
  "//evil.example/x",
  "/a b",
  "/caf\u00e9",
  "/x?q='a'",
  "/x?q=\"a\"",
  "/x#frag",
  "/x?a#b",
  "/%7Euser",
  "\\\\metrics",
  "http://other.example:8080/x?y=1",
  "http://user:secret@other.example/x",
  "*",
  "/x{y}|^`"
]

const hosts = [
  undefined,
  "127.0.0.1:3000",
  "localhost",
  "api.example.com",
  "API.Example.com",
  "127.1",
  "0x7f.0.0.1",
  "1.2.3.4:80",
  "1.2.3.4:443",
  "1.2.3.4:0080",
  "1.2.3.4:99999",
  "host:",
  "[::1]:3000",
  "user:pw@host",
  "xn--nxasmq6b.example",
  "exa mple",
  "example.com."
]

describe("the request span's URL attributes", () => {
  it("are what parsing the URL gives, for plain and odd targets and hosts alike", () => {
    for (const target of targets) {
      for (const host of hosts) {
        for (const proto of [undefined, "https"]) {
          const headers: Record<string, string> = {}
          if (host !== undefined) headers["host"] = host
          if (proto !== undefined) headers["x-forwarded-proto"] = proto
          expect(urlAttributesOf(target, headers), `${target} on ${host} (${proto})`).toEqual(
            throughUrl(target, headers)
          )
        }
      }
    }
  })
})
