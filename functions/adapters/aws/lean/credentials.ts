import { readFile } from "node:fs/promises";

/**
 * The lean client's credentials, found as the AWS SDK v3's default chain finds them where a
 * function runs: the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
 * `AWS_SESSION_TOKEN`: where Lambda puts the execution role's), else the container credentials
 * endpoint (`AWS_CONTAINER_CREDENTIALS_FULL_URI` with `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` or
 * `AWS_CONTAINER_AUTHORIZATION_TOKEN`, as Lambda SnapStart sets them, or ECS's
 * `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`), with the SDK's rules (`@aws-sdk/credential-provider-http`):
 * an `http:` endpoint only on a loopback or container host, three retries a second apart, and
 * the credentials kept until five minutes before they expire.
 */

export interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When the endpoint's credentials expire; the environment's carry none. */
  readonly expiration?: Date;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Credentials this close to expiring are fetched again (the SDK's five minutes). */
const REFRESH_BEFORE_EXPIRY_MS = 300_000;
/** ECS's credentials host, for a relative URI. */
const ECS_HOST = "http://169.254.170.2";
/** The hosts an `http:` endpoint may name besides loopback (ECS, EKS Pod Identity). */
const CONTAINER_HOSTS = new Set(["169.254.170.2", "169.254.170.23", "[fd00:ec2::23]"]);

export interface ContainerEndpointOptions {
  /** Retries after a failed fetch, and the wait before each (the SDK's 3 and 1,000 ms). */
  readonly retries?: number;
  readonly retryDelayMs?: number;
  /** Each fetch's timeout (the SDK's 1,000 ms). */
  readonly timeoutMs?: number;
}

export class CredentialSource {
  private cached: Credentials | undefined;
  private pending: Promise<Credentials> | undefined;

  constructor(
    private readonly env: Env,
    private readonly options: ContainerEndpointOptions = {},
  ) {}

  /** The environment's credentials, else the container endpoint's, fetched when due. */
  async get(): Promise<Credentials> {
    const fromEnv = environmentCredentials(this.env);
    if (fromEnv) return fromEnv;
    const cached = this.cached;
    if (cached && !expiresSoon(cached)) return cached;
    this.pending ??= this.fetchWithRetries().finally(() => {
      this.pending = undefined;
    });
    this.cached = await this.pending;
    return this.cached;
  }

  private async fetchWithRetries(): Promise<Credentials> {
    const url = containerEndpoint(this.env);
    const retries = this.options.retries ?? 3;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.fetchOnce(url);
      } catch (error) {
        if (attempt >= retries)
          throw new Error(
            `no AWS credentials from the container endpoint ${url.href}: ${(error as Error).message}`,
          );
        await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs ?? 1000));
      }
    }
  }

  private async fetchOnce(url: URL): Promise<Credentials> {
    const authorization = await authorizationOf(this.env);
    const response = await fetch(url, {
      headers: authorization === undefined ? {} : { Authorization: authorization },
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 1000),
    });
    const text = await response.text();
    if (response.status !== 200) {
      const { Code, Message } = parseObject(text);
      const detail = [Code, Message].filter((part) => typeof part === "string").join(": ");
      throw new Error(`the endpoint answered ${response.status}${detail ? ` (${detail})` : ""}`);
    }
    const body = parseObject(text);
    const { AccessKeyId, SecretAccessKey, Token, Expiration } = body;
    const expiration = typeof Expiration === "string" ? new Date(Expiration) : undefined;
    if (
      typeof AccessKeyId !== "string" ||
      typeof SecretAccessKey !== "string" ||
      typeof Token !== "string" ||
      !expiration ||
      Number.isNaN(expiration.getTime())
    )
      throw new Error(
        "the answer is not { AccessKeyId, SecretAccessKey, Token, Expiration (RFC 3339) }",
      );
    return {
      accessKeyId: AccessKeyId,
      secretAccessKey: SecretAccessKey,
      sessionToken: Token,
      expiration,
    };
  }
}

function environmentCredentials(env: Env): Credentials | undefined {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) return undefined;
  const sessionToken = env.AWS_SESSION_TOKEN;
  return sessionToken
    ? { accessKeyId, secretAccessKey, sessionToken }
    : { accessKeyId, secretAccessKey };
}

function expiresSoon(credentials: Credentials): boolean {
  const expiration = credentials.expiration?.getTime();
  return expiration !== undefined && expiration - Date.now() < REFRESH_BEFORE_EXPIRY_MS;
}

/** The container endpoint the environment names, checked as the SDK checks it. */
export function containerEndpoint(env: Env): URL {
  const relative = env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
  const full = env.AWS_CONTAINER_CREDENTIALS_FULL_URI;
  if (!relative && !full)
    throw new Error(
      "no AWS credentials: neither AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (Lambda sets them from the execution role) nor AWS_CONTAINER_CREDENTIALS_FULL_URI is set",
    );
  const given = relative ? `${ECS_HOST}${relative}` : (full as string);
  if (!URL.canParse(given))
    throw new Error(`the container credentials endpoint ${JSON.stringify(given)} is not a URL`);
  const url = new URL(given);
  if (url.protocol === "https:" || isLoopback(url.hostname) || CONTAINER_HOSTS.has(url.hostname))
    return url;
  throw new Error(
    `the container credentials endpoint ${url.href} is refused: it must be https, or http on a loopback address (127.0.0.0/8, [::1], localhost) or a container host (169.254.170.2, 169.254.170.23, [fd00:ec2::23])`,
  );
}

function isLoopback(hostname: string): boolean {
  if (hostname === "localhost" || hostname === "[::1]") return true;
  const parts = hostname.split(".");
  return (
    parts.length === 4 &&
    parts[0] === "127" &&
    parts.every((part) => /^\d{1,3}$/.test(part) && Number(part) <= 255)
  );
}

/** The Authorization header: the token file's content, else the token (the file wins). */
async function authorizationOf(env: Env): Promise<string | undefined> {
  const file = env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE;
  const token = file
    ? (await readFile(file, "utf8")).trim()
    : env.AWS_CONTAINER_AUTHORIZATION_TOKEN;
  if (token?.includes("\r") || token?.includes("\n"))
    throw new Error("the container authorization token contains a line break");
  return token;
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === "object" ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
