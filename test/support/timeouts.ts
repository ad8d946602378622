/**
 * How long a test waits on a slow step outside its own code: cfn-lint, a `cdk synth` or the CDK
 * app in a child process, esbuild bundling, moto_server's start. Minutes, not the seconds these
 * take on an idle machine: beside other work on two cores, cfn-lint over one template took 72 s,
 * and no test may fail because the machine is busy. A step that hangs still ends the test.
 */
export const SLOW_STEP_TIMEOUT_MS = 10 * 60_000;
