import type { WorkflowDefinition } from "../../core/dag/definition";
import type { RegisteredWorkflow, WorkflowRegistry, WorkflowScope } from "../../core/dag/registry";
import { TransientError } from "../../core/errors";
import type { AwsClient } from "../aws/client";
import { GetItem, PutItem, TransactWriteItems, UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr } from "./tables";

const DEFINITION_TYPE = "workflow_definition";
const LIST_TYPE = "workflow_registry";
const SCOPES_TYPE = "workflow_scopes";

/** The registry's items' keys, as an IAM policy's `dynamodb:LeadingKeys` names them. */
export const WORKFLOW_REGISTRY_KEYS: readonly string[] = [
  `${DEFINITION_TYPE}#*`,
  `${LIST_TYPE}#*`,
  `${SCOPES_TYPE}#*`,
];

/** The state table's key of the one item that lists every scope a workflow was put in. */
export const WORKFLOW_SCOPES_KEY = `${SCOPES_TYPE}#all`;

/** The attribute of the scopes item: a string set of the scopes. */
const SCOPES = "scopes";

/** The state table's key of one version of a registered workflow. */
export function workflowDefinitionKey(scope: WorkflowScope, name: string, version: number): string {
  return `${DEFINITION_TYPE}#${scope}/${name}/${version}`;
}

/** The state table's key of a scope's list of registered workflows and their versions. */
export function workflowRegistryKey(scope: WorkflowScope): string {
  return `${LIST_TYPE}#${scope}`;
}

/** The state table's key of the roles a tenant's plans may name. */
export function planPolicyKey(tenant: string): string {
  return `workflow_plan_policy#${tenant}`;
}

/** The attribute of a tenant's plan policy item that lists the roles allowed (a string set is
 * not used: it cannot be empty). */
const ROLES = "roles";

/** The attribute of a version item that holds its definition (JSON). */
const DEFINITION = "definition";
/** The attribute of a scope's list item that holds `{ name: [versions] }` (JSON). */
const WORKFLOWS = "workflows";

/** How many times a put retries when another put of the same scope changed its list first. */
const LIST_ATTEMPTS = 5;

export interface DynamoWorkflowRegistryOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/**
 * The workflow registry on the state table: one item per version, `pk` =
 * `workflow_definition#<scope>/<name>/<version>` with the definition's JSON in `definition`,
 * and one item per scope, `workflow_registry#<scope>`, listing every name's versions
 * (`workflows`, JSON) under a `revision`. A put writes both in one TransactWriteItems: the
 * version item on `attribute_not_exists(pk)` (a version is written once and never changed) and
 * the list on the revision it was read at (another put in between: read again and retry).
 * Before that, the scope is added to the string set `scopes` of one item, `workflow_scopes#all`
 * (UpdateItem ADD: puts of any scope commute, and a put that then fails leaves a scope that lists
 * nothing), which an operator's list of every tenant's workflows reads.
 *
 * A tenant's plan policy, the roles its plans may name (functions/core/dag/plan.ts), is one item,
 * `workflow_plan_policy#<tenant>`, its roles a list in `roles`, read by each child start of a plan
 * (one GetItem) and replaced whole by `agentbus workflow allow`.
 *
 * Why the state table: the orchestrator and the operator's tools already reach it, and nothing
 * else there notices these items (they carry none of its sparse indexes' attributes, and a
 * `<type>#<id>` key with a `/` is no aggregate's). Keys use the scope, `*` for every tenant.
 *
 * What it costs: a put is one strongly consistent GetItem of the list and a transaction of two
 * items (2x write units each); a start reads the list of its tenant (and of every tenant when
 * the tenant has no such name) and one version; a run's later events read its version, which a
 * container keeps once read (it never changes).
 */
export class DynamoWorkflowRegistry implements WorkflowRegistry {
  private readonly versions = new Map<string, unknown>();

  constructor(private readonly options: DynamoWorkflowRegistryOptions) {}

  async create(scope: WorkflowScope, definition: WorkflowDefinition): Promise<boolean> {
    const { name, version } = definition;
    await this.addScope(scope);
    for (let attempt = 1; attempt <= LIST_ATTEMPTS; attempt++) {
      const list = await this.readList(scope);
      if (list.workflows[name]?.includes(version)) return false;
      const workflows = {
        ...list.workflows,
        [name]: [...(list.workflows[name] ?? []), version].sort((a, b) => a - b),
      };
      const written = await this.write(scope, definition, workflows, list.revision);
      if (written !== "list_changed") return written === "written";
    }
    throw new TransientError(
      "workflow_registry.contended",
      `the workflow list of scope ${scope} changed under ${LIST_ATTEMPTS} puts in a row; try again`,
    );
  }

  async get(scope: WorkflowScope, name: string, version: number): Promise<unknown> {
    const key = workflowDefinitionKey(scope, name, version);
    if (this.versions.has(key)) return structuredClone(this.versions.get(key));
    const item = await this.getItem(key, "GetItem (workflow definition)");
    const text = item?.[DEFINITION]?.S;
    if (text === undefined) return undefined;
    const definition: unknown = JSON.parse(text);
    this.versions.set(key, definition);
    return structuredClone(definition);
  }

  async list(scope: WorkflowScope): Promise<readonly RegisteredWorkflow[]> {
    const { workflows } = await this.readList(scope);
    return Object.entries(workflows)
      .map(([name, versions]) => ({ name, versions }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async scopes(): Promise<readonly WorkflowScope[]> {
    const item = await this.getItem(WORKFLOW_SCOPES_KEY, "GetItem (workflow scopes)");
    return [...(item?.[SCOPES]?.SS ?? [])].sort();
  }

  async allowedRoles(tenant: string): Promise<readonly string[] | undefined> {
    const item = await this.getItem(planPolicyKey(tenant), "GetItem (plan policy)");
    const roles = item?.[ROLES]?.L;
    return roles?.flatMap((role) => (role.S === undefined ? [] : [role.S]));
  }

  async allowRoles(tenant: string, roles: readonly string[]): Promise<void> {
    try {
      await this.options.client.send(
        PutItem({
          TableName: this.options.tableName,
          Item: {
            [StateAttr.pk]: { S: planPolicyKey(tenant) },
            [ROLES]: { L: roles.map((role) => ({ S: role })) },
          },
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "PutItem (plan policy) on the state table");
    }
  }

  private async addScope(scope: WorkflowScope): Promise<void> {
    try {
      await this.options.client.send(
        UpdateItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: WORKFLOW_SCOPES_KEY } },
          UpdateExpression: "ADD #scopes :scope",
          ExpressionAttributeNames: { "#scopes": SCOPES },
          ExpressionAttributeValues: { ":scope": { SS: [scope] } },
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "UpdateItem (workflow scopes) on the state table");
    }
  }

  private async readList(
    scope: WorkflowScope,
  ): Promise<{ revision: number; workflows: Record<string, number[]> }> {
    const item = await this.getItem(workflowRegistryKey(scope), "GetItem (workflow list)");
    if (!item) return { revision: 0, workflows: {} };
    return {
      revision: Number(item[StateAttr.revision]?.N ?? 0),
      workflows: JSON.parse(item[WORKFLOWS]?.S ?? "{}") as Record<string, number[]>,
    };
  }

  private async write(
    scope: WorkflowScope,
    definition: WorkflowDefinition,
    workflows: Record<string, number[]>,
    revision: number,
  ): Promise<"written" | "version_exists" | "list_changed"> {
    const { tableName } = this.options;
    const key = workflowDefinitionKey(scope, definition.name, definition.version);
    try {
      await this.options.client.send(
        TransactWriteItems({
          TransactItems: [
            {
              Put: {
                TableName: tableName,
                Item: {
                  [StateAttr.pk]: { S: key },
                  [DEFINITION]: { S: JSON.stringify(definition) },
                },
                ConditionExpression: "attribute_not_exists(#pk)",
                ExpressionAttributeNames: { "#pk": StateAttr.pk },
              },
            },
            {
              Put: {
                TableName: tableName,
                Item: {
                  [StateAttr.pk]: { S: workflowRegistryKey(scope) },
                  [StateAttr.revision]: { N: String(revision + 1) },
                  [WORKFLOWS]: { S: JSON.stringify(workflows) },
                },
                ConditionExpression:
                  revision === 0 ? "attribute_not_exists(#pk)" : "#revision = :revision",
                ExpressionAttributeNames:
                  revision === 0 ? { "#pk": StateAttr.pk } : { "#revision": StateAttr.revision },
                ...(revision === 0
                  ? {}
                  : { ExpressionAttributeValues: { ":revision": { N: String(revision) } } }),
              },
            },
          ],
        }),
      );
      return "written";
    } catch (error) {
      if (error instanceof Error && error.name === "TransactionCanceledException") {
        const reasons =
          (error as { CancellationReasons?: { Code?: string }[] }).CancellationReasons ?? [];
        if (reasons[0]?.Code === "ConditionalCheckFailed") return "version_exists";
        if (reasons[1]?.Code === "ConditionalCheckFailed") return "list_changed";
      }
      throw dynamoFailure(error, "TransactWriteItems (workflow definition) on the state table");
    }
  }

  private async getItem(key: string, operation: string) {
    try {
      const { Item } = await this.options.client.send(
        GetItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: key } },
          ConsistentRead: true,
        }),
      );
      return Item;
    } catch (error) {
      throw dynamoFailure(error, `${operation} on the state table`);
    }
  }
}
