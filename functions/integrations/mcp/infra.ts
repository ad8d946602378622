import { ArnFormat, Stack } from "aws-cdk-lib";
import { Grant } from "aws-cdk-lib/aws-iam";
import { defineInfra } from "../../../lib/infra/integration-infra";
import { mcp } from "./index";

/**
 * Nothing is provisioned: the MCP server is outside the stack and its token is the team's secret
 * or parameter. Each group that uses a server may read exactly that server's token: a parameter
 * (`ssm:GetParameter` on it), or a secret (`secretsmanager:GetSecretValue` on it, and
 * `ssm:GetParameter` on Parameter Store's reference to it, through which it is read). A parameter
 * encrypted with a customer-managed KMS key also needs `kms:Decrypt` on that key, which the team
 * grants. A use without a server fails the synth, naming the group.
 */
export const mcpInfra = defineInfra(mcp, (scope, users) => {
  for (const { group, options } of users) {
    if (!options?.url)
      throw new Error(
        `group ${group.node.id} uses mcp without naming a server: use(mcp, { url, credentials })`,
      );
    const credentials = options.credentials;
    if (!credentials) continue;
    const stack = Stack.of(scope.stack);
    const parameterArn = (name: string) =>
      stack.formatArn({
        service: "ssm",
        resource: "parameter",
        resourceName: name.replace(/^\//, ""),
      });
    const grants: [string, string][] =
      "secret" in credentials
        ? [
            ["secretsmanager:GetSecretValue", secretArn(stack, credentials.secret)],
            [
              "ssm:GetParameter",
              parameterArn(`/aws/reference/secretsmanager/${credentials.secret}`),
            ],
          ]
        : [["ssm:GetParameter", parameterArn(credentials.parameter)]];
    for (const [action, arn] of grants)
      Grant.addToPrincipal({ grantee: group.consumer, actions: [action], resourceArns: [arn] });
  }
});

/** A secret by its name (any of the suffixes Secrets Manager adds), or by its ARN as given. */
function secretArn(stack: Stack, secret: string): string {
  if (secret.startsWith("arn:")) return secret;
  return stack.formatArn({
    service: "secretsmanager",
    resource: "secret",
    resourceName: `${secret}-??????`,
    arnFormat: ArnFormat.COLON_RESOURCE_NAME,
  });
}
