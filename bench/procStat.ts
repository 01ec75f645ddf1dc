import { readFileSync } from "node:fs"
import { round } from "./stats.js"

/** Clock ticks per second in /proc/{pid}/stat (USER_HZ, 100 on Linux). */
const clockTicks = 100

/** CPU seconds (user + system) a process has used and its resident memory in MB, from /proc. */
export const processUsage = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / clockTicks
  const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
  return { cpuSeconds, rssMb: Number(rss ?? 0) / 1024 }
}

/** This process's CPU (user + system) in ms per job since `before` (a `process.cpuUsage()` reading). */
export const cpuMsPerJobSince = (before: NodeJS.CpuUsage, jobs: number): number => {
  const used = process.cpuUsage(before)
  return round((used.user + used.system) / 1000 / Math.max(1, jobs), 3)
}

/** This process's CPU time (user + system, every thread) in µs: on a shared machine, steadier than the wall clock. */
export const cpuMicros = (): number => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}
