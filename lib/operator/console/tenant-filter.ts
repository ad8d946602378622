import { TenantId } from "../../../schemas/ids";
import { escapeHtml } from "./html";

/**
 * The console's tenant filter: `?tenant=<id>` on the overview and the dead-letters page shows
 * that tenant's items only (what names no tenant is the tenant `default`'s); empty or absent,
 * every tenant's.
 */

/** The tenant `?tenant=` names: undefined for every tenant, or why it is not a tenant id. */
export function tenantParam(
  params: URLSearchParams,
): { readonly tenant?: string } | { readonly problem: string } {
  const raw = (params.get("tenant") ?? "").trim();
  if (raw === "") return {};
  const parsed = TenantId.safeParse(raw);
  if (parsed.success) return { tenant: raw };
  const why = parsed.error.issues[0]?.message ?? "not a tenant id";
  return { problem: `The tenant ${JSON.stringify(raw)} is not a tenant id: it ${why}.` };
}

/**
 * TENANT_ID_PATTERN as an input's `pattern` (anchored by the browser, compiled with the `v` flag,
 * where a class's `-` must be escaped).
 */
const INPUT_PATTERN = "[a-z0-9][a-z0-9\\-]{0,62}";

/** The filter's form: a GET to the same page, with the tenant shown now. */
export function renderTenantFilter(action: string, tenant: string | undefined): string {
  const value = tenant === undefined ? "" : ` value="${escapeHtml(tenant)}"`;
  const showing =
    tenant === undefined
      ? "every tenant"
      : `tenant <code data-tenant-shown>${escapeHtml(tenant)}</code> only`;
  return `<form class="tenant-filter" action="${escapeHtml(action)}" method="get" data-tenant-filter>
<label>Tenant <input name="tenant" pattern="${escapeHtml(INPUT_PATTERN)}" placeholder="every tenant"${value}></label>
<button type="submit">Filter</button>
<span class="muted">showing ${showing}</span>
</form>`;
}
