// What the resumption peers share: checks, a free port, waiting for a
// listener, `genmcp serve` nodes (with a redis-server and `--bus` for a
// fleet) on free loopback ports, and a per-request round-robin proxy in
// front of a fleet. Used by peer.mjs, fleet.mjs, fleet_kill.mjs and
// fleet_post.mjs (run by scripts/ts-resume-peer.sh); the SDK client's side
// is client.mjs.
import { spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";

export const WAIT_MS = 20_000;
const KEY = "5a".repeat(32);
let failed = 0;

export function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed += 1;
}

/** Prints the summary line and exits: non-zero when a check failed. */
export function finish(name) {
  console.log(`${name}: ${failed === 0 ? "all checks passed" : `${failed} checks failed`}`);
  process.exit(failed === 0 ? 0 : 1);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitUntil(cond, what) {
  const end = Date.now() + WAIT_MS;
  while (!cond()) {
    if (Date.now() > end) {
      check(false, `${what} (timed out)`);
      return false;
    }
    await sleep(20);
  }
  check(true, what);
  return true;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function accepts(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    sock.once("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => resolve(false));
  });
}

// Each request goes to the next node in turn; GETs take their own turns, so
// each reconnection of the GET stream lands on another node than the last
// one. Nodes in `dead` are skipped, as a load balancer's health check would.
// Bodies are streamed both ways, a client that leaves aborts the upstream
// request, and an upstream that dies mid-response cuts the client's too.
// `proxy.cutGets()` cuts every GET stream open now (an idle timeout).
export function roundRobin(ports, gets, dead = new Set()) {
  let next = 0;
  let nextGet = 0;
  const openGets = new Set();
  const pick = (turn) => {
    for (let i = 0; i < ports.length; i += 1) {
      const node = (turn + i) % ports.length;
      if (!dead.has(node)) return node;
    }
    return turn % ports.length;
  };
  const proxy = http.createServer((req, res) => {
    let node;
    if (req.method === "GET") {
      node = pick(nextGet);
      nextGet = node + 1;
      gets.push({ node, lastEventId: req.headers["last-event-id"] });
      openGets.add(res);
      res.on("close", () => openGets.delete(res));
    } else {
      node = pick(next);
      next = node + 1;
    }
    const up = http.request(
      { host: "127.0.0.1", port: ports[node], method: req.method, path: req.url, headers: req.headers },
      (upRes) => {
        res.writeHead(upRes.statusCode, upRes.headers);
        upRes.pipe(res);
        upRes.on("close", () => {
          if (!upRes.complete) res.destroy();
        });
      },
    );
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  });
  proxy.cutGets = () => {
    for (const res of openGets) res.destroy();
  };
  return new Promise((resolve) => proxy.listen(0, "127.0.0.1", () => resolve(proxy)));
}

/**
 * One `genmcp serve` node given `args`, pushed onto `children`: its port,
 * read from its `genmcp listening` log line (`--port 0`: no probed port that
 * another process could take first). Its warnings and errors go to stderr.
 */
export async function startNode(bin, args, children) {
  const child = spawn(bin, ["--log-format", "json", "serve", "--host", "127.0.0.1", "--port", "0", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    // Info, whatever RUST_LOG says: the listening line is an info line.
    env: { ...process.env, RUST_LOG: "genmcp=info", GENMCP_KEY: KEY },
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let pending = "";
    let port = null;
    const timer = setTimeout(() => reject(new Error("genmcp did not start")), WAIT_MS);
    child.once("exit", (code) => {
      if (port === null) {
        clearTimeout(timer);
        reject(new Error(`genmcp exited (${code}) before listening`));
      }
    });
    child.stderr.on("data", (chunk) => {
      pending += chunk.toString();
      let nl;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        let entry = null;
        try {
          entry = JSON.parse(line);
        } catch {
          process.stderr.write(`${line}\n`);
          continue;
        }
        const fields = entry.fields ?? {};
        if (port === null && fields.message === "genmcp listening") {
          port = Number(String(fields.addr).split(":").pop());
          clearTimeout(timer);
          resolve(port);
        } else if (!["INFO", "DEBUG", "TRACE"].includes(entry.level)) {
          process.stderr.write(`${line}\n`);
        }
      }
    });
  });
}

/** A redis-server on a free port, pushed onto `children`: its port. A server
 * that exits at once (its probed port was taken) is started on another. */
async function startRedis(children) {
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    const up = Date.now() + WAIT_MS;
    const running = () => child.exitCode === null && child.signalCode === null;
    while (running() && !(await accepts(port))) {
      if (Date.now() > up) {
        child.kill("SIGKILL");
        throw new Error("redis-server did not start");
      }
      await sleep(50);
    }
    if (running()) {
      // Only the server that runs: the peers name nodes by their place in
      // `children` (the server first).
      children.push(child);
      return port;
    }
    if (attempt >= 5) throw new Error("redis-server did not start on 5 free ports");
  }
}

/**
 * A redis-server and `count` `genmcp serve --bus` nodes (each also given
 * `args`), pushed onto `children`: the nodes' ports.
 */
export async function startFleet(bin, count, args, children) {
  const redisPort = await startRedis(children);
  const ports = [];
  for (let i = 0; i < count; i += 1) {
    ports.push(await startNode(bin, ["--bus", `redis://127.0.0.1:${redisPort}`, ...args], children));
  }
  return ports;
}
