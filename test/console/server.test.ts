import { request } from "node:http";
import { describe, expect, it } from "vitest";
import type { OpsActions } from "../../lib/operator/actions";
import { hostAllowed, startConsole } from "../../lib/operator/console/server";
import { failingSource, fakeSource, RUN_ID } from "./fixtures";

function rawPost(url: string, path: string, body: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = request(
        new URL(path, url),
        {
          method: "POST",
          agent: false,
          headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            text += chunk;
          });
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
          );
        },
      );
      req.on("error", reject);
      req.end(body);
    },
  );
}

describe("startConsole", () => {
  function rawGet(url: string, path: string, host?: string) {
    return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
      (resolve, reject) => {
        const req = request(
          new URL(path, url),
          { agent: false, headers: host ? { host } : {} },
          (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => {
              body += chunk;
            });
            res.on("end", () =>
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body }),
            );
          },
        );
        req.on("error", reject);
        req.end();
      },
    );
  }

  it("serves the pages on 127.0.0.1 with their status codes and stops when closed", async () => {
    const console = await startConsole({ source: fakeSource() });
    try {
      expect(console.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      const home = await rawGet(console.url, "/");
      expect(home.status).toBe(200);
      expect(home.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(home.headers["content-security-policy"]).toContain("default-src 'none'");
      expect(home.body).toContain(RUN_ID);
      expect((await rawGet(console.url, "/trace?id=nobody")).status).toBe(404);
      expect((await rawGet(console.url, "/", "attacker.example:80")).status).toBe(421);
      expect((await rawGet(console.url, "/", "localhost")).status).toBe(200);
    } finally {
      await console.close();
    }
    await expect(rawGet(console.url, "/")).rejects.toThrow(/ECONNREFUSED/);
  });

  it("answers 500 over HTTP when the source throws", async () => {
    const console = await startConsole({ source: failingSource("no route to DynamoDB") });
    try {
      const res = await rawGet(console.url, "/dead-letters");
      expect(res.status).toBe(500);
      expect(res.body).toContain("no route to DynamoDB");
    } finally {
      await console.close();
    }
  });

  it("checks the Host header only when bound to loopback", () => {
    expect(hostAllowed("127.0.0.1", "127.0.0.1:8080")).toBe(true);
    expect(hostAllowed("127.0.0.1", "[::1]:8080")).toBe(true);
    expect(hostAllowed("127.0.0.1", "rebind.attacker.example:8080")).toBe(false);
    expect(hostAllowed("0.0.0.0", "console.internal:8080")).toBe(true);
  });

  it("acts on its own forms only: the token of the page it served, 303 back with the answer", async () => {
    const asked: unknown[] = [];
    const actions: OpsActions = {
      run: async (...args) => {
        asked.push(args);
        return { kind: "sent", message: "workflow.cancel.requested sent to bus (event id E1)" };
      },
      review: async () => ({ kind: "refused", message: "no" }),
      resolveSend: async () => ({ kind: "refused", message: "no" }),
      redrive: async () => ({ kind: "refused", message: "no" }),
      decideStep: async () => ({ kind: "refused", message: "no" }),
      start: async () => ({ kind: "refused", message: "no" }),
      stopOrResume: async () => ({ kind: "refused", message: "no" }),
    };
    const running = { ...(await fakeSource().run(RUN_ID)), status: "RUNNING" } as never;
    const console = await startConsole({ source: fakeSource({ runs: [running] }), actions });
    try {
      const page = await rawGet(console.url, `/runs/${RUN_ID}`);
      const token = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? "";
      expect(token).toMatch(/^[\w-]{43}$/);
      const path = `/runs/${RUN_ID}/cancel`;
      const without = await rawPost(console.url, path, "reason=stop");
      expect(without.status).toBe(403);
      expect(asked).toEqual([]);
      const sent = await rawPost(console.url, path, `reason=stop&csrf=${token}`);
      expect(sent.status).toBe(303);
      const location = String(sent.headers.location);
      expect(location).toMatch(new RegExp(`^/runs/${RUN_ID}\\?flash=`));
      expect(asked).toEqual([[RUN_ID, { kind: "cancel", reason: "stop" }]]);
      const back = await rawGet(console.url, location);
      expect(back.body).toContain("workflow.cancel.requested sent to bus (event id E1)");
      const tooBig = await rawPost(console.url, path, `reason=${"x".repeat(600 * 1024)}`);
      expect(tooBig.status).toBe(413);
    } finally {
      await console.close();
    }
  });

  it("answers POST with 405 when it has no actions", async () => {
    const console = await startConsole({ source: fakeSource() });
    try {
      expect((await rawPost(console.url, `/runs/${RUN_ID}/cancel`, "reason=x")).status).toBe(405);
    } finally {
      await console.close();
    }
  });
});
