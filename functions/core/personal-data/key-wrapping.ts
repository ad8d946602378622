/** Which customer a data key belongs to: bound to the key as its KMS encryption context. */
export interface DataKeyContext {
  readonly tenant: string;
  readonly customer: string;
}

/** Makes and unwraps 256-bit data keys under a key the functions never see (KMS in AWS). */
export interface KeyWrapping {
  /** A new 256-bit data key, plain (32 bytes) and wrapped. */
  newKey(
    context: DataKeyContext,
  ): Promise<{ readonly plain: Uint8Array; readonly wrapped: Uint8Array }>;
  /** The plain data key of a wrapped one (fails when the context differs from the one it was made with). */
  unwrap(wrapped: Uint8Array, context: DataKeyContext): Promise<Uint8Array>;
}
