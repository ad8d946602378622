import { Command, Option } from "commander";
import type { ErasureReport } from "../../functions/core/personal-data/erase";
import { unreachableByErasure } from "../../functions/core/retention";
import { eraseCustomerData } from "../../lib/operator/erase";
import { DEFAULT_TENANT, OpaqueId } from "../../schemas/ids";
import { withStack } from "./ops";
import { out, type Target, UsageError } from "./target";
import { tenantArgument } from "./tenant";

/**
 * `agentbus erase --customer <id> [--tenant <id>] [--reason <text>]`: erase a customer's personal
 * data (lib/operator/erase.ts). Exit 0 when erased, or erased already (nothing changes then);
 * exit 2 when nothing of the customer is recorded.
 */

type TargetOf = (command: Command) => Target;

interface EraseOptions {
  readonly customer: string;
  readonly tenant?: string;
  readonly reason?: string;
  readonly json?: boolean;
}

export function eraseCommand(targetOf: TargetOf): Command {
  return new Command("erase")
    .addOption(
      new Option("--customer <id>", "the customer's id (customer_id)").makeOptionMandatory(),
    )
    .addOption(new Option("--tenant <id>", "the customer's tenant").default(DEFAULT_TENANT))
    .option("--reason <text>", "why, in your words (kept with the erasure; say nothing personal)")
    .option("--json", "print the report as JSON")
    .action(async function (this: Command, options: EraseOptions) {
      const customer = OpaqueId.safeParse(options.customer);
      if (!customer.success)
        throw new UsageError(
          `--customer ${JSON.stringify(options.customer)}: ${customer.error.issues[0]?.message ?? "not a customer id"}`,
        );
      if (options.reason !== undefined && options.reason.length > 1000)
        throw new UsageError("--reason takes at most 1000 characters; nothing erased");
      const subject = {
        tenant: tenantArgument(options.tenant) ?? DEFAULT_TENANT,
        customer: customer.data,
      };
      const report = await withStack(targetOf(this), (stack) =>
        eraseCustomerData(stack, subject, options.reason),
      );
      if (report.outcome === "unknown")
        throw new UsageError(
          `no personal data of customer ${subject.customer} (tenant ${subject.tenant}) is recorded: nothing erased`,
        );
      if (options.json) out(JSON.stringify(report));
      else printReport(report);
    });
}

function printReport(report: ErasureReport): void {
  const { subject, erasure } = report;
  const who = `customer ${subject.customer} (tenant ${subject.tenant})`;
  out(
    report.outcome === "erased"
      ? `${who} erased`
      : `${who} was erased already${erasure ? ` at ${erasure.at} by ${erasure.by}` : ""}`,
  );
  if (report.outcome === "erased" && erasure)
    out(`  at              ${erasure.at} by ${erasure.by}`);
  out(`  conversations   ${report.conversations}`);
  out(`  overwritten     ${report.overwritten} state item(s) and stored text(s)`);
  out("  cannot be reached; gone when their retention runs out (default days):");
  for (const place of unreachableByErasure()) out(`    ${place.days} days  ${place.where}`);
}
