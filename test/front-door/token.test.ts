import { generateKeyPair, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { verifyToken } from "../../functions/front-door/token";

/** The stream function's and the local server's token check, as API Gateway's JWT authorizer. */

const ISSUER = "https://issuer.example";
const { publicKey, privateKey } = await generateKeyPair("RS256");

async function verify(claims: Record<string, unknown>, audience: string | string[] = ["app"]) {
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: "RS256" })
    .setIssuer(ISSUER)
    .setExpirationTime("5m")
    .sign(privateKey);
  return verifyToken(token, async () => publicKey, { issuer: ISSUER, audience });
}

describe("a token's audience", () => {
  it("is its aud, a string or a list, naming one of the expected", async () => {
    expect(await verify({ sub: "u1", aud: "app" })).toMatchObject({ claims: { sub: "u1" } });
    expect(await verify({ sub: "u1", aud: ["other", "app"] })).toHaveProperty("claims");
    expect(await verify({ sub: "u1", aud: "app" }, "app")).toHaveProperty("claims");
    expect(await verify({ sub: "u1", aud: "other" })).toEqual({
      problem: "the token's aud claim is not accepted",
    });
  });

  it("is its client_id when it has no aud (a Cognito access token), as API Gateway takes it", async () => {
    expect(await verify({ sub: "u1", client_id: "app" })).toMatchObject({
      claims: { client_id: "app" },
    });
    expect(await verify({ sub: "u1", client_id: "other" })).toEqual({
      problem: "the token's client_id claim is not accepted",
    });
    // With aud, aud decides: a client_id that matches does not make up for it.
    expect(await verify({ sub: "u1", aud: "other", client_id: "app" })).toEqual({
      problem: "the token's aud claim is not accepted",
    });
    expect(await verify({ sub: "u1" })).toEqual({ problem: "the token has no aud claim" });
  });
});
