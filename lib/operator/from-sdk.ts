/** The SDK v3 clients behind the functions' AWS port, for the operator's tools (one home: the adapter). */
export { fromSdk, type SdkClient } from "../../functions/adapters/aws/sdk-client";
