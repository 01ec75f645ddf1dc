import { Deferred, Effect } from "effect"
import { createConnection, createServer, type Socket } from "node:net"

/**
 * Where the next MySQL `COMMIT` through the proxy loses its connection: `before` it reaches the
 * server (nothing commits), or `after` the server committed, before its answer reaches the
 * client. Either way the client's COMMIT fails with its outcome unknown to it.
 */
export type CommitCut = "before" | "after"

/** COM_QUERY "COMMIT" as a new command: length 7, sequence 0, 0x03, the text. */
const commitPacket = Buffer.concat([Buffer.from([7, 0, 0, 0, 3]), Buffer.from("COMMIT")])

export interface TcpProxy {
  readonly port: number
  /** Closes the listener and drops every connection: to its clients, the server stopped. */
  readonly stop: Effect.Effect<void>
  /** Cuts the connection that sends the next `COMMIT` (MySQL protocol), once. */
  readonly cutNextCommit: (where: CommitCut) => Effect.Effect<void>
  /**
   * From the first client chunk holding `marker` on, what clients send is dropped, connections
   * kept open: to a client, the server stopped answering from that command on (its commands
   * wait for their own timeouts).
   */
  readonly stopForwardingAt: (marker: string) => Effect.Effect<void>
}

/** A TCP proxy on 127.0.0.1 (a free port) to `target`; released with its scope. */
export const startTcpProxy = (target: { readonly host: string; readonly port: number }) =>
  Effect.acquireRelease(
    Effect.async<TcpProxy>((resume) => {
      const sockets = new Set<Socket>()
      let armed: CommitCut | undefined
      let stopAt: Buffer | undefined
      let forwarding = true
      const track = (socket: Socket) => {
        sockets.add(socket)
        socket.on("close", () => sockets.delete(socket))
        socket.on("error", () => socket.destroy())
      }
      const server = createServer((client) => {
        const upstream = createConnection(target.port, target.host)
        track(client)
        track(upstream)
        let cutOnAnswer = false
        const cut = () => {
          client.destroy()
          upstream.destroy()
        }
        client.on("data", (chunk) => {
          if (stopAt !== undefined && chunk.includes(stopAt)) forwarding = false
          if (!forwarding) return
          if (armed !== undefined && chunk.includes(commitPacket)) {
            const where = armed
            armed = undefined
            if (where === "before") return cut()
            cutOnAnswer = true
          }
          upstream.write(chunk)
        })
        upstream.on("data", (chunk) => (cutOnAnswer ? cut() : client.write(chunk)))
        client.on("close", () => upstream.destroy())
        upstream.on("close", () => client.destroy())
      })
      const stop = Effect.async<void>((done) => {
        server.close(() => done(Effect.void))
        for (const socket of sockets) socket.destroy()
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        if (address === null || typeof address === "string") throw new Error("expected a TCP address")
        resume(
          Effect.succeed({
            port: address.port,
            stop,
            cutNextCommit: (where) =>
              Effect.sync(() => {
                armed = where
              }),
            stopForwardingAt: (marker) =>
              Effect.sync(() => {
                stopAt = Buffer.from(marker)
              })
          })
        )
      })
    }),
    ({ stop }) => stop
  )

/**
 * For `ScratchClientOptions.route`: the client reaches `url`'s server through a new proxy,
 * handed to the test through `holder`.
 */
export const routeThroughProxy = (holder: Deferred.Deferred<TcpProxy>) => (url: string) =>
  Effect.gen(function*() {
    const routed = new URL(url)
    const proxy = yield* startTcpProxy({ host: routed.hostname, port: Number(routed.port || 3306) })
    yield* Deferred.succeed(holder, proxy)
    routed.port = String(proxy.port)
    return routed.toString()
  })
