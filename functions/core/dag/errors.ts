import { PermanentError } from "../errors";

/** A workflow definition that can never run (class permanent). */
export class WorkflowDefinitionError extends PermanentError {}

/** A run whose bookkeeping contradicts its definition: a bug or corrupted state (permanent). */
export class DagIntegrityError extends PermanentError {}

/** A request the run cannot satisfy: unknown node, blocked re-run, unknown workflow kind. */
export class DagRequestError extends PermanentError {}
