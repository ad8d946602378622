import { describe, expect, it } from "vitest";
import { defineRole } from "../../functions/core/define-role";
import { defineIntegration, portsOf } from "../../functions/core/integration";
import { InMemoryEventStore } from "../../functions/core/memory";
import { defineModule } from "../../functions/core/role-module";
import {
  type LocalScript,
  type LocalScripts,
  type ModelRequest,
  model,
  type RolePorts,
  use,
} from "../../functions/kit";
import { senderModule } from "../../functions/roles/customer-support/sender/index";
import { taskProjectionModule } from "../../functions/roles/task-projection/index";
import { IntegrationTwins, memoryRolePorts } from "../../lib/dev/role-kit/memory-ports";
import { testRole } from "../../lib/dev/role-kit/test-role";

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const task = { taskId: TASK, aggregate: { type: "task", id: TASK } };

describe("testRole", () => {
  it("delivers a stream out of order: the gate repairs the gap from the store, once", async () => {
    const t = testRole(taskProjectionModule);
    const events = [
      ...(await t.append(task, { type: "task.accepted", payload: { title: "Refund" } })),
      ...(await t.append(task, { type: "plan.created", payload: { steps: [{ title: "look" }] } })),
      ...(await t.append(task, { type: "answer.generated", payload: { answer_ref: "a1" } })),
    ];
    const last = await t.deliver(events[2] as (typeof events)[number]);
    expect(last.steps.map((s) => [s.version, s.status, s.repaired])).toEqual([
      [1, "applied", true],
      [2, "applied", true],
      [3, "applied", false],
    ]);
    // The earlier versions, delivered late, are duplicates now.
    expect((await t.deliver(events[0] as (typeof events)[number])).status).toBe("duplicate");
    const view = await t.state<{ status: string }>({ type: "task_view", id: TASK });
    expect(view?.status).toBe("generated");
  });

  it("refuses a message the registry refuses, naming the type", () => {
    const t = testRole(taskProjectionModule);
    expect(() => t.message("task.feedback.received", { rating: 9 }, task)).toThrow(
      /not a valid task\.feedback\.received/,
    );
  });

  it("builds a module's settings from the given environment, and names a bad one", () => {
    expect(() => testRole(senderModule, { env: { MAX_UNKNOWN_ATTEMPTS: "0" } })).toThrow(
      /sender: invalid environment[\s\S]*MAX_UNKNOWN_ATTEMPTS/,
    );
  });
});

describe("defineRole", () => {
  const careless = defineRole<{ n: number }, "task.feedback.received">({
    group: "careless",
    subscriptions: ["task.feedback.received"],
    stateOf: (event) => ({ type: "careless", id: event.task_id }),
    decide: (state, event) => ({
      state: { n: (state?.n ?? 0) + event.payload.rating },
      // An emit the role did not declare: a cast gets it past the types, not past the check.
      emit: [{ type: "task.accepted", payload: { title: "x" } }] as never,
    }),
  });
  const module = defineModule({
    descriptor: careless,
    entry: "none",
    deployment: {},
    build: () => careless,
  });

  it("throws on an emit the role did not declare, before anything commits", async () => {
    const t = testRole(module);
    const feedback = t.message("task.feedback.received", { rating: 4 }, task);
    await expect(t.deliver(feedback)).rejects.toThrow(
      /careless emitted task\.accepted, which is not among its emits \(none\)/,
    );
    expect(await t.state({ type: "careless", id: TASK })).toBeUndefined();
  });
});

/** An integration a team adds: a ledger that takes each entry key once. */
interface Ledger {
  record(key: string): Promise<"recorded" | "already">;
}
const ledgerOf = (): Ledger => {
  const keys = new Set<string>();
  return {
    async record(key) {
      if (keys.has(key)) return "already";
      keys.add(key);
      return "recorded";
    },
  };
};
const ledger = defineIntegration<Ledger>({
  name: "ledger",
  access: "write",
  does: "records ledger entries",
  defaults: undefined,
  memory: ledgerOf,
});

describe("integrations in the role kit", () => {
  const bookkeeper = defineRole<{ n: number }, "task.feedback.received", "task.accepted">({
    group: "bookkeeper",
    subscriptions: ["task.feedback.received"],
    emits: ["task.accepted"],
    stateOf: (event) => ({ type: "bookkeeping", id: event.task_id }),
    decide: (state) => ({ state: { n: (state?.n ?? 0) + 1 }, emit: [] }),
  });
  const withLedger = (built: Ledger[]) =>
    defineModule({
      descriptor: bookkeeper,
      entry: "none",
      deployment: {},
      uses: { book: ledger },
      build: (ports) => {
        built.push(ports.book);
        return bookkeeper;
      },
    });

  it("builds a role with its integrations' twins, under the names it uses them by", async () => {
    const built: Ledger[] = [];
    testRole(withLedger(built));
    expect(built).toHaveLength(1);
    expect(await built[0]?.record("entry-1")).toBe("recorded");
    expect(await built[0]?.record("entry-1")).toBe("already");
  });

  it("uses a stand-in given by the integration's name instead of its twin", () => {
    const built: Ledger[] = [];
    const standIn = ledgerOf();
    testRole(withLedger(built), { integrations: { ledger: standIn } });
    expect(built[0]).toBe(standIn);
  });

  it("one twin per integration serves every role built with the same twins", () => {
    const twins = new IntegrationTwins();
    const store = new InMemoryEventStore();
    const first = memoryRolePorts(store, { book: ledger }, twins);
    const second = memoryRolePorts(store, { entries: ledger }, twins);
    expect(first.book).toBe(second.entries);
    const hub = { store, controls: twins.controls };
    expect(portsOf(hub, { book: ledger }, () => "built", { ledger: "given" }).book).toBe("given");
  });

  it("refuses an integration name that is not camelCase", () => {
    expect(() => defineIntegration({ ...ledger, name: "Ledger-Service" })).toThrow(
      /integration name "Ledger-Service" must be camelCase/,
    );
  });
});

describe("the local model answers each role with the scripts its use of the model gives", () => {
  const ask = (role: string): ModelRequest => ({
    messages: [{ role: "user", text: "hello" }],
    metadata: { role, task_id: TASK, correlation_id: "corr_1" },
  });
  /** A role that asks the model, as `group`, on each feedback, and keeps its answer. */
  const askingModule = (group: string, localScripts: LocalScripts) => {
    const descriptor = {
      group,
      subscriptions: ["task.feedback.received" as const],
      stateOf: (event: { task_id: string }) => ({ type: "answer", id: event.task_id }),
    };
    const uses = { model: use(model, { localScripts }) };
    return defineModule({
      descriptor,
      entry: "none",
      deployment: {},
      uses,
      build: (ports: RolePorts<typeof uses>) =>
        defineRole<{ answer: string }, "task.feedback.received">({
          ...descriptor,
          decide: async () => ({
            state: { answer: (await ports.model.converse(ask(group))).text },
          }),
        }),
    });
  };
  const greeter: LocalScript = (request) => `hi from ${request.metadata?.role}`;
  const counter: LocalScript = (_request, facts) => ({ count: facts.int(1, 9, "count") });

  it("testRole's model answers the role with the script its module registers", async () => {
    const t = testRole(askingModule("greeter", { greeter }));
    await t.deliver(t.message("task.feedback.received", { rating: 4 }, task));
    expect(await t.state({ type: "answer", id: TASK })).toEqual({ answer: "hi from greeter" });
  });

  it("one twin serves every role of a kit, each answered with its own script", async () => {
    const twins = new IntegrationTwins();
    const store = new InMemoryEventStore();
    const greeting = memoryRolePorts(store, askingModule("greeter", { greeter }).uses, twins);
    const counting = memoryRolePorts(store, askingModule("counter", { counter }).uses, twins);
    expect((await greeting.model.converse(ask("greeter"))).text).toBe("hi from greeter");
    expect(JSON.parse((await counting.model.converse(ask("counter"))).text)).toEqual({
      count: expect.any(Number),
    });
    // One model for both: the counter's port answers the greeter too, and no role without a script.
    expect((await counting.model.converse(ask("greeter"))).text).toBe("hi from greeter");
    await expect(greeting.model.converse(ask("stranger"))).rejects.toMatchObject({
      code: "model.no_script",
    });
  });

  it("refuses two roles that give one role different scripts, naming it", () => {
    const twins = new IntegrationTwins();
    const store = new InMemoryEventStore();
    memoryRolePorts(store, askingModule("greeter", { greeter }).uses, twins);
    expect(() =>
      memoryRolePorts(store, askingModule("impostor", { greeter: counter }).uses, twins),
    ).toThrow(/another script for "greeter"/);
  });
});
