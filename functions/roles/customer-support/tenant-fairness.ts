/**
 * The concurrency of every group on a support conversation's way to its reply (the refund agent's
 * included), which tenants share
 * (fairness between tenants, lib/infra/README.md): a tenant's events hold at most 2 of the group's
 * 3 consumer invocations, as many as the group had before tenants, so the third is always free
 * for another tenant's conversation however large one tenant's backlog.
 */
export const TENANT_FAIR_CONCURRENCY = { maxConcurrency: 3, tenantConcurrency: 2 } as const;
