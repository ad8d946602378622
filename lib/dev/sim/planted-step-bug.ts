import type { RoleModule } from "../../../functions/core/role-module";

/**
 * A defect planted in a step role written with the kit: it forgets its step run records
 * (`step-record-forgotten`), so a request sent again for an assignment it answered already (a
 * lease that ran out) runs the step a second time instead of answering what it answered.
 */
export type PlantedStepBug = "step-record-forgotten";

/** The module with its role's decisions stripped of the state they write. */
export function forgettingItsRecords(module: RoleModule<unknown>): RoleModule<unknown> {
  return {
    ...module,
    build(ports, settings) {
      const role = module.build(ports, settings);
      return {
        ...role,
        decide: async (state, event, context) => {
          const { state: _forgotten, ...decision } = await role.decide(state, event, context);
          return decision;
        },
      };
    },
  };
}
