import { createConnection, createServer, type Socket } from "node:net"
import { Effect } from "effect"

/**
 * A TCP proxy on 127.0.0.1 (a free port) to `target`, for a server that must "stop" while the
 * shared one keeps running: `stop` closes the listener and drops every connection, so the
 * clients behind it see what a stopped server looks like (resets, then refused connections).
 * Released with its scope.
 */
export const startTcpProxy = (target: { readonly host: string; readonly port: number }) =>
  Effect.acquireRelease(
    Effect.async<{ readonly port: number; readonly stop: Effect.Effect<void> }>((resume) => {
      const sockets = new Set<Socket>()
      const track = (socket: Socket) => {
        sockets.add(socket)
        socket.on("close", () => sockets.delete(socket))
        socket.on("error", () => socket.destroy())
      }
      const server = createServer((client) => {
        const upstream = createConnection(target.port, target.host)
        track(client)
        track(upstream)
        client.pipe(upstream)
        upstream.pipe(client)
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
        resume(Effect.succeed({ port: address.port, stop }))
      })
    }),
    ({ stop }) => stop
  )
