import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { hostAllowed, startConsole } from "../../lib/console/server";
import { failingSource, fakeSource, RUN_ID } from "./fixtures";

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
});
