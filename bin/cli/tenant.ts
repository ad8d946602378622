import { Option } from "commander";
import { TenantId } from "../../schemas/ids";
import { UsageError } from "./target";

/**
 * `--tenant <id>` on the listing commands: only that tenant's items. A state or an envelope that
 * names no tenant (from before tenants, or a role that records none) is the default tenant's.
 */
export const tenantOption = (
  description = "only this tenant's items (what names no tenant is the tenant default's)",
) => new Option("--tenant <id>", description);

/**
 * `--tenant <id>` on a command that acts on a run, an agent run or a conversation: the command
 * goes in the tenant that state records whatever the flag says; with the flag, a state of another
 * tenant is refused (exit 2, nothing sent).
 */
export const actingTenantOption = () =>
  new Option(
    "--tenant <id>",
    "refuse unless what it acts on is this tenant's (the command goes in the tenant its state records)",
  );

/** The tenant `--tenant` names, checked as a TenantId (a bad one is a usage error, exit 2). */
export function tenantArgument(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const parsed = TenantId.safeParse(value);
  if (!parsed.success)
    throw new UsageError(
      `--tenant ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message ?? "not a tenant id"}`,
    );
  return value;
}
